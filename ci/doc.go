// Package ci holds the job definitions that run skewtest outside .ci/run:
// the Prow periodics in prow/ (test-infra's format) beside the GitHub
// Actions workflows in .github/workflows. It has no code; its tests check
// that every job runs make targets the Makefile has, with the settings
// Prow and TestGrid need, and that .ci/exit-code maps skewtest's exit codes
// as the jobs expect.
package ci
