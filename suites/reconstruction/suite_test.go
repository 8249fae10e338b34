// Package reconstruction is the Ginkgo suite behind `make test-skew`: the
// KEP-3756 upgrade/downgrade scenario on real kubelets, for the chosen
// provider and plans, plus the teardown guarantees of the local provider.
//
// Settings come from the environment (see `go run ./cmd/skewtest
// settings`); Ginkgo's own flags select specs, e.g.
// -ginkgo.label-filter=downgrade or -ginkgo.focus=local-volume.
package reconstruction

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/skewtest/internal/suiteconfig"
)

func TestReconstruction(t *testing.T) {
	RegisterFailHandler(Fail)
	suiteConfig, reporterConfig := GinkgoConfiguration()
	// Runs take tens of seconds each and build binaries on a cold cache:
	// show progress as it happens.
	reporterConfig.Verbose = true
	// A spec's teardown outlives an interrupt and the suite's deadline.
	suiteconfig.Apply(t, &suiteConfig)
	RunSpecs(t, "skewtest: kubelet volume reconstruction across versions", suiteConfig, reporterConfig)
}
