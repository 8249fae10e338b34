# skewtest: see README.md.
SHELL := /bin/bash

# Settings read by the suite and `skewtest run` (go run ./cmd/skewtest settings).
PROVIDER ?= local
PLAN ?=
# Empty: each command's own (3 for a plan, 1 for a matrix tour's trails).
REPLICAS ?=
ARTIFACTS ?= $(CURDIR)/_artifacts
ROUNDS ?= 5
VERSION ?= v1.37.2
# The matrix tour's versions and node count (make test-matrix).
MATRIX ?=
MATRIX_NODES ?=
export PROVIDER PLAN REPLICAS ARTIFACTS MATRIX MATRIX_NODES

# Every Go build the targets make, tests included, in one configuration:
# the one the programs we put into images and onto nodes need (static,
# without cgo, paths trimmed). The builds inside tests and suites (the CSI
# driver, podbin, the runc shim, kindcni) then reuse the packages the test
# binaries compiled, instead of compiling the standard library and gRPC a
# second time, twice at once when two such tests run together.
export CGO_ENABLED := 0
# go env, not $(GOFLAGS): flags set with go env -w stay too.
export GOFLAGS := $(strip $(shell go env GOFLAGS) -trimpath)

# Every package but the suites, which need a cluster.
UNIT_PKGS = $(shell go list ./... | grep -v /suites/)
# go test's -p counts test binaries running as well as compiles. Ours that
# wait on real daemons (sshd, dockerd, containerd) would hold both slots of
# a 2-core machine idle for half a minute of a cold make test; two slots
# more than the cores keep the compiler busy meanwhile.
TEST_P ?= $(shell echo $$(( $$(nproc) + 2 )))
# Tests that build real images from Go modules and Debian packages, behind
# the images build tag so that make test stays fast. ci/ checks that every
# package with a `//go:build images` test file is listed here.
# clusters/binaries comes last: go test runs at most -p (the cores, 2 in
# CI) test binaries at once, so its patched-kubelet test starts after one
# of the kind tests has built the v1.37.2 kubelet it patches.
IMAGES_TAG = images
IMAGES_PKGS = ./clusters/kind/internal/nodeimage ./clusters/kind ./clusters/binaries
GINKGO_ARGS ?=
# go test's deadline for the suites. Ginkgo's own deadline ends the
# provider's teardown bound (clusters.TeardownBound) before it, so an
# interrupted or timed-out spec still tears down: kops needs an hour more
# for kops delete cluster and the sweep.
SKEW_TIMEOUT ?= $(if $(filter kops,$(PROVIDER)),160m,85m)

# The nightly jobs (.github/workflows/nightly.yaml, ci/prow/): what
# bin/skewtest runs, and where the sign-off page is made from.
NIGHTLY_COMMAND ?= matrix
SIGNOFF_DIR ?= $(ARTIFACTS)
ACTIONLINT_VERSION = v1.7.12
# Where .ci/run keeps the host's footprint from before its first test.
FOOTPRINT ?= $(ARTIFACTS)/footprint-before.json

.PHONY: janitor-aws footprint-save footprint-compare test test-images test-skew test-hosts test-history test-chaos test-mutants test-matrix bench-skew bench-scale kind-node-image signoff skewtest nightly nightly-signoff ci-chown ci-cache-open ci-cache-take lint deps clean help

help:
	@echo "make test        unit tests, real-mount, sshd and Docker tests (no cluster; minutes)"
	@echo "make test-images the tests that build the kind node image for real (root; 10-15 min cold)"
	@echo "make test-skew   the reconstruction suite on PROVIDER=$(PROVIDER) (PLAN, REPLICAS, VOLUME_KIND, ARTIFACTS)"
	@echo "make test-history  the kubelet's history: the KEP-3756 sign-off replayed on 1.26-1.28 kubelets, shipped bugs where they shipped and fixed"
	@echo "make test-hosts  the local provider in a Debian 12 qemu guest: cgroup v2, systemd as PID 1 (root; tens of minutes under TCG)"
	@echo "make test-chaos  runs interrupted at every phase by SIGINT, SIGTERM, SIGHUP, SIGKILL+clean or a closed stderr then SIGINT, each checked to leave nothing (root; CHAOS_SEED, CHAOS_RUNS)"
	@echo "make test-mutants the mutation score: the catalogue on each of the project's mutants of the kubelet and a control; every mutant must be killed (root; MUTANTS)"
	@echo "make test-matrix the matrix tour: every (from, to) pair of MATRIX, trails on MATRIX_NODES nodes at once"
	@echo "make bench-skew  ROUNDS=$(ROUNDS) runs of the default plan: phase timings; the matrix tour on the default nodes and on one; the catalogue one run after another and as one batch"
	@echo "make bench-scale what reconstruction costs on a busy node: N pods, and one pod with N volumes, per CSI driver mode; each hop's times, kubelet CPU and memory against N (PLAN, SCALE_PODS, SCALE_VOLUMES, SCALE_MODES)"
	@echo "make kind-node-image VERSION=$(VERSION)  build the offline kind node image"
	@echo "make signoff     the sign-off page of the runs under DIR=$(ARTIFACTS) (BASELINE=an earlier night's dir)"
	@echo "make skewtest    build bin/skewtest, whose exit code says pass, kubelet failure, bad input or infrastructure"
	@echo "make nightly     the nightly job: bin/skewtest $(NIGHTLY_COMMAND), exit code mapped for CI (.ci/exit-code)"
	@echo "make lint        gofmt, go vet, actionlint, shellcheck"
	@echo "make deps        install host packages and Go modules"
	@echo "make clean       remove what killed local runs left behind"
	@echo "make janitor-aws list expired AWS resources of kops runs in AWS_REGION; DRY_RUN=false deletes them"
	@echo "make footprint-save / footprint-compare  record the host's footprint in FOOTPRINT; name every difference from it"

# -vet=off: make lint runs go vet. go test's own vet pass would compute
# vet facts for every dependency again, about a fifth of a cold make test.
test: deps
	go test -count=1 -vet=off -p $(TEST_P) -timeout 15m $(UNIT_PKGS)

# Builds the v1.37.2 node image (Kubernetes, containerd, etcd and CoreDNS
# from Go modules, Debian from debootstrap) into $SKEWTEST_CACHE, where
# make test-skew PROVIDER=kind finds it: the build is not repeated.
test-images: deps
	go test -count=1 -v -tags $(IMAGES_TAG) -timeout 75m $(IMAGES_PKGS)

# The matrix tour has a target of its own; a label filter in GINKGO_ARGS
# replaces the default one.
test-skew: deps
	@mkdir -p "$(ARTIFACTS)"
	go test -count=1 -v -timeout $(SKEW_TIMEOUT) ./suites/reconstruction -ginkgo.v -ginkgo.label-filter='!matrix && !history' \
		-ginkgo.junit-report="$(ARTIFACTS)/junit_ginkgo_reconstruction.xml" $(GINKGO_ARGS)
	@echo "Reports: $(ARTIFACTS)/latest/report.md (and one directory per run in $(ARTIFACTS))"

# The local provider's default plan inside a Debian 12 guest under qemu
# (cgroup v2 unified, systemd as PID 1); the guest's reports and serial
# console go to $(ARTIFACTS)/hosts. Under TCG (no usable KVM) it takes tens
# of minutes, so the nightly jobs run it and .ci/run does not (docs/hosts.md).
test-hosts: deps
	@mkdir -p "$(ARTIFACTS)"
	go test -count=1 -v -timeout 150m ./suites/hosts -ginkgo.v -ginkgo.label-filter=hosts \
		-ginkgo.junit-report="$(ARTIFACTS)/junit_ginkgo_hosts.xml" $(GINKGO_ARGS)
	@echo "Reports: $(ARTIFACTS)/hosts (the guest's runs, serial.log)"

# The kubelet's history (scenarios/history): KEP-3756's sign-off replayed
# with 1.26 and 1.28 kubelets under a 1.28 control plane, and catalogue
# entries on kubelets where their bugs shipped and where they were fixed,
# each known bug required to reproduce. It builds two control planes and
# six kubelets cold (about 40 min on 2 cores), so the nightly jobs run it
# and .ci/run does not (docs/history.md).
test-history: deps
	@mkdir -p "$(ARTIFACTS)"
	go test -count=1 -v -timeout 120m ./suites/reconstruction -ginkgo.v -ginkgo.label-filter=history \
		-ginkgo.junit-report="$(ARTIFACTS)/junit_ginkgo_history.xml" $(GINKGO_ARGS)
	@echo "Reports: one directory per run in $(ARTIFACTS); make signoff DIR=$(ARTIFACTS) shows the history grid"

# Interrupted runs (suites/chaos): a run of the default plan interrupted
# at each phase (build, bring-up, deploy, kubelet down, cleanup poll,
# teardown) by each signal (SIGINT, SIGTERM, SIGHUP, SIGKILL then
# skewtest clean), from CHAOS_SEED (printed; default the time), each
# checked against the host's footprint before it; then the kops
# provider's SIGINT against the fakes. 24 local runs take about 20 min
# warm, so the nightly jobs run it and .ci/run does not (docs/cleanup.md).
CHAOS_RUNS ?=
test-chaos: deps
	@mkdir -p "$(ARTIFACTS)"
	CHAOS_RUNS=$(CHAOS_RUNS) go test -count=1 -v -timeout 150m ./suites/chaos -ginkgo.v -ginkgo.label-filter=chaos \
		-ginkgo.junit-report="$(ARTIFACTS)/junit_ginkgo_chaos.xml" $(GINKGO_ARGS)
	go test -count=1 -run 'TestDownAfterSIGINT' ./clusters/kops
	@echo "Summary: $(ARTIFACTS)/chaos/chaos.md"

# The mutation score (scenarios/mutation, docs/mutation.md): the whole
# catalogue on each of the project's mutants of the kubelet, as the
# upgrade target of a plan and in its middle, beside an unmutated control,
# as one batch; each mutant killed, masked or survived. Every mutant must
# be killed in both placements. It builds a patched kubelet per mutant and
# runs hundreds of runs, so the nightly jobs run it and .ci/run does not.
MUTANTS ?=
test-mutants: deps skewtest
	@mkdir -p "$(ARTIFACTS)"
	MUTANTS=$(MUTANTS) bin/skewtest mutants
	@echo "Report: $(ARTIFACTS)/mutation-*/mutation.md; make signoff DIR=$(ARTIFACTS) shows the grid"

test-matrix: deps
	@mkdir -p "$(ARTIFACTS)"
	go test -count=1 -v -timeout 60m ./suites/reconstruction -ginkgo.v -ginkgo.label-filter=matrix \
		-ginkgo.junit-report="$(ARTIFACTS)/junit_ginkgo_matrix.xml" $(GINKGO_ARGS)
	@echo "Report: $(ARTIFACTS)/latest/report.md"

bench-skew: deps
	@mkdir -p "$(ARTIFACTS)"
	go run ./cmd/skewtest bench -rounds $(ROUNDS) -out "$(ARTIFACTS)/bench-$(PROVIDER).json"

# What reconstruction costs on a busy node (skewtest bench-scale): one run
# of PLAN per CSI driver mode and size, N pods with a volume each and one
# pod with N volumes; each hop's times from the kubelet's start, the
# kubelet's CPU and peak memory, and its reconstruct counters against N,
# fitted, into $(ARTIFACTS)/bench-scale/<time> (JSON, Markdown, SVG). The
# sizes and modes are bench-scale's defaults unless set (comma-separated;
# none for no run of that shape).
SCALE_PODS ?=
SCALE_VOLUMES ?=
SCALE_MODES ?=
bench-scale: deps
	@mkdir -p "$(ARTIFACTS)"
	go run ./cmd/skewtest bench-scale $(if $(SCALE_PODS),-pods $(SCALE_PODS)) $(if $(SCALE_VOLUMES),-volumes $(SCALE_VOLUMES)) $(if $(SCALE_MODES),-modes $(SCALE_MODES))

kind-node-image: deps
	go run ./cmd/skewtest kind-node-image $(VERSION)

# signoff.md and signoff.html in DIR; exit 0 even when runs failed (the
# page says so), 2 when DIR holds no run.json.
DIR ?= $(ARTIFACTS)
BASELINE ?=
signoff:
	go run ./cmd/skewtest signoff "$(DIR)" $(if $(BASELINE),-baseline "$(BASELINE)")

# make exits 2 for any failed recipe and go run exits 1, whatever the
# program's code: jobs that act on skewtest's exit code (docs/design.md, "Exit
# codes") run bin/skewtest.
# bin/skewtest carries its helper programs (podbin, the CSI driver, kindcni,
# the runc shim: clusters/internal/helpers), built first into that package's
# embedded/ and embedded under HELPERS_TAG, so that it runs from any
# directory and on another machine of this architecture with no source tree
# or Go toolchain. Warm, both steps find their builds up to date.
# SKEWTEST_BIN is where it goes (tests build one into a directory of theirs).
HELPERS_TAG = embedhelpers
SKEWTEST_BIN ?= bin/skewtest
skewtest:
	go run ./clusters/internal/helpers/cmd/embedhelpers
	go build -tags $(HELPERS_TAG) -o $(SKEWTEST_BIN) ./cmd/skewtest

# The jobs call these. make exits 2 for any failed recipe, so the job's
# verdict comes from .ci/exit-code: skewtest's own code is recorded in
# $ARTIFACTS/exit-code; 1 (regression) and 2 (bad settings) fail, 3
# (infrastructure) passes with a warning, an interruption fails.
nightly: deps skewtest
	.ci/exit-code bin/skewtest $(NIGHTLY_COMMAND)

nightly-signoff:
	$(MAKE) signoff DIR="$(SIGNOFF_DIR)"

# The nightly jobs keep SKEWTEST_CACHE in root's /var/cache/skewtest, since
# root runs nothing from a cache another user could write
# (binaries.CheckCacheDir): ci-cache-open lets the runner's user restore
# the saved cache into it, ci-cache-take makes it root's alone before the
# runs, and ci-chown hands it back for saving.
ci-cache-open:
	@test -n "$${SKEWTEST_CACHE:-}" -a -n "$${SUDO_UID:-}" || { echo "ci-cache-open: run it through sudo -E with SKEWTEST_CACHE set"; exit 2; }
	install -d -o "$$SUDO_UID" -g "$$SUDO_GID" "$$SKEWTEST_CACHE"

ci-cache-take:
	@test -n "$${SKEWTEST_CACHE:-}" || { echo "ci-cache-take: set SKEWTEST_CACHE"; exit 2; }
	chown -R root:root "$$SKEWTEST_CACHE"
	chmod -R go-w "$$SKEWTEST_CACHE"

# A job running make as root through sudo hands what it wrote back to the
# runner's user, so that the cache and artifact uploads can read it. Only
# an explicit SKEWTEST_CACHE: sudo may have pointed HOME at root's.
ci-chown:
	@if [ -n "$${SUDO_UID:-}" ]; then \
		for d in "$(ARTIFACTS)" $${SKEWTEST_CACHE:+"$$SKEWTEST_CACHE"}; do \
			if [ -e "$$d" ]; then echo "chown -R $$SUDO_UID:$$SUDO_GID $$d"; chown -R "$$SUDO_UID:$$SUDO_GID" "$$d"; fi; \
		done; \
	else echo "ci-chown: not run through sudo, nothing to hand back"; fi

# actionlint comes from the Go module proxy at a pinned version; it runs
# shellcheck on run: lines when shellcheck is installed (install-deps.sh
# installs it), and so does this target on the repository's scripts. go
# vet runs with every tag that selects test files (images, vmnode), so
# that a change cannot break tests only make test-images or a developer's
# guest runs.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet -tags $(IMAGES_TAG),vmnode ./...
	go run github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)
	@if command -v shellcheck >/dev/null; then \
		echo "shellcheck .ci/run .ci/exit-code scripts/*.sh"; shellcheck .ci/run .ci/exit-code scripts/*.sh; \
	else echo "lint: shellcheck is not installed, scripts not checked (scripts/install-deps.sh installs it)"; fi

deps:
	scripts/install-deps.sh

clean:
	go run ./cmd/skewtest clean

# The host's footprint (processes, mounts, loop devices, cgroups, iptables,
# links, kernel settings, files): .ci/run saves it before its first test
# and compares after its last, so a leak of any test fails CI, named.
footprint-save:
	go run ./cmd/skewtest footprint save $(FOOTPRINT)

# AWS resources of kops runs (tag skewtest.k8s.io/run-id) whose expiry tag
# has passed, in AWS_REGION: listed by default, deleted with DRY_RUN=false.
DRY_RUN ?= true
janitor-aws:
	go run ./cmd/skewtest janitor-aws -dry-run=$(DRY_RUN)

footprint-compare:
	go run ./cmd/skewtest footprint compare $(FOOTPRINT)
