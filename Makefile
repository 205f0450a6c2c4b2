# flowtel — build, test and lint. `make help` lists the targets.
SHELL        := /usr/bin/env bash -o pipefail
GO           ?= go
TOOLS        := $(GO) tool -modfile=internal/tools/go.mod
OCB          := $(TOOLS) go.opentelemetry.io/collector/cmd/builder
STATICCHECK  := $(TOOLS) honnef.co/go/tools/cmd/staticcheck
MDATAGEN     := $(TOOLS) go.opentelemetry.io/collector/cmd/mdatagen
METADATA     := $(shell git ls-files '*/metadata.yaml' 2>/dev/null)
BUILD_DIR    := _build
DISTRIBUTIONS := flowtel flowtel-node flowtel-gateway
FUZZTIME     ?= 20s
BENCHTIME    ?= 1s
# Packages are listed with the same tags they are tested with: `go list`
# without them leaves out every package whose files are all integration-tagged
# (deploy, testbed/flood), which then never ran.
# Tests that need root, network namespaces, kernel conntrack or real servers
# (ClickHouse, kube-apiserver, tshark, nfacctd, the built distributions) carry
# `//go:build integration`: plain `go test ./...` is fast and root-free, the
# targets below run everything.
TAGS         := integration
# The real-cluster harness (its images) and the tests that run flowtel on it.
KUBE_PKGS    := ./testbed/kube/... ./testbed/e2ekube
# flowtel_safe builds the codec and the ClickHouse block without their fast
# paths into pdata's, xpdata's and clickhouse-go's internals (public APIs
# alone); `make test` runs the unit and integration tests of the components
# that way too (the end-to-end, deploy and distribution tests run the built
# collectors, which are built one way).
SAFE_TAGS    := flowtel_safe
# make demo DEMO_HOLD=10m keeps the demo cluster up for queries
DEMO_HOLD    ?= 0s

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

.PHONY: deps
deps: ## Install the system packages the tests need (apt; idempotent, needs root)
	@scripts/deps.sh

.PHONY: build
build: $(addprefix $(BUILD_DIR)/,$(DISTRIBUTIONS)) $(BUILD_DIR)/flowctl/flowctl $(BUILD_DIR)/flowctl/kubectl-flows $(BUILD_DIR)/flowctl/kubectl_complete-flows ## Build the three distributions with OCB, and flowctl (also as the kubectl plugin kubectl-flows), into _build/

$(BUILD_DIR)/flowctl/flowctl: go.mod $(shell git ls-files '*.go' 2>/dev/null)
	$(GO) build -o $@ ./cmd/flowctl

# The kubectl plugin "kubectl flows" is flowctl under the name kubectl-flows
# (a symlink; with _build/flowctl on PATH, kubectl finds it).
$(BUILD_DIR)/flowctl/kubectl-flows: $(BUILD_DIR)/flowctl/flowctl
	ln -sf flowctl $@

# kubectl's completion of "kubectl flows ..." runs kubectl_complete-flows.
$(BUILD_DIR)/flowctl/kubectl_complete-flows: cmd/flowctl/kubectl_complete-flows
	@mkdir -p $(dir $@)
	cp $< $@

# A distribution's OCB manifest: builder-config.yaml for the full one (the
# source the others are checked against), distributions/<name>/manifest.yaml
# for the others.
manifest = $(if $(filter flowtel,$(1)),builder-config.yaml,distributions/$(1)/manifest.yaml)

# Rebuild a distribution when its manifest or any Go source changes.
.SECONDEXPANSION:
$(BUILD_DIR)/%: $$(call manifest,$$*) go.mod $(shell git ls-files '*.go' 2>/dev/null)
	@mkdir -p $(BUILD_DIR)
	@echo "build: $* with OCB (cold caches: ~3 min each; log in $(BUILD_DIR)/$*.build.log)"
	@$(OCB) --config $(call manifest,$*) > $(BUILD_DIR)/$*.build.log 2>&1 || { cat $(BUILD_DIR)/$*.build.log; exit 1; }
	@scripts/check-distribution.sh $(call manifest,$*) $(BUILD_DIR)/$*/$* distributions/$*/config.yaml $(wildcard distributions/$*/kubernetes.yaml)
	@touch $@

.PHONY: peers
peers: ## Build, once per machine, the real peers the tests run (Kubernetes, CoreDNS, the Operator, helm, go-ipfix collector)
	@scripts/peers.sh

.PHONY: test
test: deps build peers ## Unit, integration and end-to-end tests (the real-cluster ones too), plus a bounded fuzz run of the record codec
	$(GO) test -tags $(TAGS) -count=1 -timeout 30m $$($(GO) list -tags $(TAGS) ./... | grep -v -e /testbed/kube -e /testbed/e2ekube)
	$(GO) test -tags "$(TAGS) $(SAFE_TAGS)" -count=1 -timeout 20m $$($(GO) list -tags "$(TAGS) $(SAFE_TAGS)" ./... | grep -v -e /testbed/e2e -e /testbed/kube -e /testbed/flood -e /deploy -e /distributions)
	@# The Kubernetes index is written by informers while the pipeline reads it:
	@# its readers and writers again under the race detector.
	$(GO) test -race -tags $(TAGS) -count=1 -timeout 10m ./internal/k8sindex/... ./processor/k8sflowprocessor/...
	@# The real clusters, one package at a time: each runs kubelets on both cores.
	$(GO) test -tags $(TAGS) -count=1 -p 1 -timeout 40m $(KUBE_PKGS)
	$(GO) test -run '^$$' -fuzz '^FuzzRoundTrip$$' -fuzztime $(FUZZTIME) ./internal/flowrecord/attrcodec
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./internal/flowrecord/attrcodec
	$(GO) test -run '^$$' -fuzz '^FuzzCompactRoundTrip$$' -fuzztime $(FUZZTIME) ./internal/flowrecord/compactcodec
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeCompact$$' -fuzztime $(FUZZTIME) ./internal/flowrecord/compactcodec
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeMessage$$' -fuzztime $(FUZZTIME) ./receiver/antreaflowsreceiver

.PHONY: generate
generate: ## Regenerate each component's metadata code, generated tests and documentation.md with mdatagen
	@for m in $(METADATA); do $(MDATAGEN) $$m || exit 1; done
	@# mdatagen links only upstream distributions; flowtel's own link to distributions/
	@sed -i -E 's#^\[(flowtel(-node|-gateway)?)\]: $$#[\1]: ../../distributions/\1/#' $(addsuffix README.md,$(dir $(METADATA)))
	@# mdatagen writes its files 0600; the tests may run as another user
	@chmod a+r $$(git ls-files -o -m --exclude-standard -- $(dir $(METADATA)) | grep -E "generated_|documentation.md") 2>/dev/null || true

.PHONY: lint
lint: ## gofmt, go vet, staticcheck, go.mod tidy
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet -tags $(TAGS) ./...
	$(GO) vet -tags "$(TAGS) $(SAFE_TAGS)" ./...
	$(STATICCHECK) -tags $(TAGS) ./...
	$(STATICCHECK) -tags "$(TAGS) $(SAFE_TAGS)" ./...
	@$(MAKE) --no-print-directory generate; changed=$$(git status --porcelain -- $(dir $(METADATA)) | grep -E 'generated_|documentation.md|README.md' || true); if [ -n "$$changed" ]; then echo "mdatagen output is stale (run make generate and commit):"; echo "$$changed"; exit 1; fi
	@$(GO) mod tidy -diff > /dev/null || { echo "go.mod/go.sum are not tidy: run go mod tidy"; $(GO) mod tidy -diff; exit 1; }

.PHONY: bench
bench: ## Go benchmarks (report the numbers in the issue note); the testbed's load runs are `make load`
	$(GO) test -run '^$$' -tags $(TAGS) -bench . -benchmem -benchtime $(BENCHTIME) $$($(GO) list -tags $(TAGS) ./... | grep -v /testbed/e2e)

.PHONY: check
check: lint build test ## Everything CI runs: lint, build the distributions, test

.PHONY: demo
demo: deps build peers ## A mini-cluster in network namespaces with flowtel deployed: prints the flows it records and draws their map into _build/demo (root)
	FLOWTEL_DEMO=1 FLOWTEL_DEMO_HOLD=$(DEMO_HOLD) $(GO) test -tags $(TAGS) -count=1 -v -timeout 2h -run '^TestScenarios$$' ./testbed/e2e

.PHONY: e2e
e2e: deps build peers ## Only the end-to-end testbed scenarios (root)
	$(GO) test -tags $(TAGS) -count=1 -v ./testbed/e2e

.PHONY: e2e-kube
e2e-kube: deps build peers ## Only the real-cluster tests: kubelets, containerd, kube-proxy and CoreDNS, flowtel installed by its chart, kustomize and the Operator (root)
	$(GO) test -tags $(TAGS) -count=1 -p 1 -v -timeout 40m $(KUBE_PKGS)

.PHONY: load
load: deps build peers ## Testbed load runs: node collector at 10k/100k connections, gateway throughput with 1 and 3 replicas, and fed by Antrea agents over IPFIX and over gRPC (root; results in testbed/results.md)
	$(GO) test -tags $(TAGS) -count=1 -run '^$$' -bench . -benchtime 1x -timeout 30m ./testbed/e2e

.PHONY: run
run: $(BUILD_DIR)/flowtel ## Run the full distribution (names endpoints when KUBECONFIG_PATH is set)
	$(BUILD_DIR)/flowtel/flowtel --config distributions/flowtel/config.yaml $(if $(KUBECONFIG_PATH),--config distributions/flowtel/kubernetes.yaml)

.PHONY: clean
clean: ## Remove build output
	rm -rf $(BUILD_DIR)
