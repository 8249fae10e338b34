# skewtest: see README.md.
SHELL := /bin/bash

# Settings read by the suite and `skewtest run` (go run ./scripts/skewtest settings).
PROVIDER ?= local
PLAN ?=
REPLICAS ?= 3
ARTIFACTS ?= $(CURDIR)/_artifacts
ROUNDS ?= 5
VERSION ?= v1.37.2
# The matrix tour's versions and node count (make test-matrix).
MATRIX ?=
MATRIX_NODES ?=
export PROVIDER PLAN REPLICAS ARTIFACTS MATRIX MATRIX_NODES

# Every package but the suites, which need a cluster.
UNIT_PKGS = $(shell go list ./... | grep -v /suites/)
GINKGO_ARGS ?=

.PHONY: test test-skew test-matrix bench-skew kind-node-image lint deps clean help

help:
	@echo "make test        unit tests, real-mount and sshd tests (no cluster)"
	@echo "make test-skew   the reconstruction suite on PROVIDER=$(PROVIDER) (PLAN, REPLICAS, VOLUME_KIND, ARTIFACTS)"
	@echo "make test-matrix the matrix tour: every (from, to) pair of MATRIX, trails on MATRIX_NODES nodes at once"
	@echo "make bench-skew  ROUNDS=$(ROUNDS) runs of the default plan: phase timings; then the matrix tour on the default nodes and on one"
	@echo "make kind-node-image VERSION=$(VERSION)  build the offline kind node image"
	@echo "make lint        gofmt and go vet"
	@echo "make deps        install host packages and Go modules"
	@echo "make clean       remove what killed local runs left behind"

# The kind node image test builds the image for real (debootstrap, module
# builds): minutes on a cold cache, hence the timeout.
test: deps
	go test -count=1 -timeout 45m $(UNIT_PKGS)

# The matrix tour has a target of its own; a label filter in GINKGO_ARGS
# replaces the default one.
test-skew: deps
	@mkdir -p "$(ARTIFACTS)"
	go test -count=1 -v -timeout 85m ./suites/reconstruction -ginkgo.v -ginkgo.label-filter='!matrix' \
		-ginkgo.junit-report="$(ARTIFACTS)/junit_ginkgo_reconstruction.xml" $(GINKGO_ARGS)
	@echo "Reports: $(ARTIFACTS)/latest/report.md (and one directory per run in $(ARTIFACTS))"

test-matrix: deps
	@mkdir -p "$(ARTIFACTS)"
	go test -count=1 -v -timeout 60m ./suites/reconstruction -ginkgo.v -ginkgo.label-filter=matrix \
		-ginkgo.junit-report="$(ARTIFACTS)/junit_ginkgo_matrix.xml" $(GINKGO_ARGS)
	@echo "Report: $(ARTIFACTS)/latest/report.md"

bench-skew: deps
	@mkdir -p "$(ARTIFACTS)"
	go run ./scripts/skewtest bench -rounds $(ROUNDS) -out "$(ARTIFACTS)/bench-$(PROVIDER).json"

kind-node-image: deps
	go run ./scripts/skewtest kind-node-image $(VERSION)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...

deps:
	scripts/install-deps.sh

clean:
	go run ./scripts/skewtest clean
