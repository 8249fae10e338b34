# skewtest: see README.md.
SHELL := /bin/bash

# Settings read by the suite and `skewtest run` (go run ./scripts/skewtest settings).
PROVIDER ?= local
PLAN ?=
REPLICAS ?= 3
ARTIFACTS ?= $(CURDIR)/_artifacts
ROUNDS ?= 5
VERSION ?= v1.37.2
export PROVIDER PLAN REPLICAS ARTIFACTS

# Every package but the suites, which need a cluster.
UNIT_PKGS = $(shell go list ./... | grep -v /suites/)
GINKGO_ARGS ?=

.PHONY: test test-skew bench-skew kind-node-image signoff skewtest lint deps clean help

help:
	@echo "make test        unit tests, real-mount and sshd tests (no cluster)"
	@echo "make test-skew   the reconstruction suite on PROVIDER=$(PROVIDER) (PLAN, REPLICAS, VOLUME_KIND, ARTIFACTS)"
	@echo "make bench-skew  ROUNDS=$(ROUNDS) runs of the default plan: phase timings"
	@echo "make kind-node-image VERSION=$(VERSION)  build the offline kind node image"
	@echo "make signoff     the sign-off page of the runs under DIR=$(ARTIFACTS) (BASELINE=an earlier night's dir)"
	@echo "make skewtest    build bin/skewtest, whose exit code says pass, kubelet failure, bad input or infrastructure"
	@echo "make lint        gofmt and go vet"
	@echo "make deps        install host packages and Go modules"
	@echo "make clean       remove what killed local runs left behind"

# The kind node image test builds the image for real (debootstrap, module
# builds): minutes on a cold cache, hence the timeout.
test: deps
	go test -count=1 -timeout 45m $(UNIT_PKGS)

test-skew: deps
	@mkdir -p "$(ARTIFACTS)"
	go test -count=1 -v -timeout 85m ./suites/reconstruction -ginkgo.v \
		-ginkgo.junit-report="$(ARTIFACTS)/junit_ginkgo_reconstruction.xml" $(GINKGO_ARGS)
	@echo "Reports: $(ARTIFACTS)/latest/report.md (and one directory per run in $(ARTIFACTS))"

bench-skew: deps
	@mkdir -p "$(ARTIFACTS)"
	go run ./scripts/skewtest bench -rounds $(ROUNDS) -out "$(ARTIFACTS)/bench-$(PROVIDER).json"

kind-node-image: deps
	go run ./scripts/skewtest kind-node-image $(VERSION)

# signoff.md and signoff.html in DIR; exit 0 even when runs failed (the
# page says so), 2 when DIR holds no run.json.
DIR ?= $(ARTIFACTS)
BASELINE ?=
signoff:
	go run ./scripts/skewtest signoff "$(DIR)" $(if $(BASELINE),-baseline "$(BASELINE)")

# make exits 2 for any failed recipe and go run exits 1, whatever the
# program's code: jobs that act on skewtest's exit code (README, "Exit
# codes") run bin/skewtest.
skewtest:
	go build -o bin/skewtest ./scripts/skewtest

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...

deps:
	scripts/install-deps.sh

clean:
	go run ./scripts/skewtest clean
