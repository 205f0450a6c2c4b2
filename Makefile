# flowtel — build, test and lint. `make help` lists the targets.
SHELL        := /usr/bin/env bash -o pipefail
GO           ?= go
TOOLS        := $(GO) tool -modfile=internal/tools/go.mod
OCB          := $(TOOLS) go.opentelemetry.io/collector/cmd/builder
STATICCHECK  := $(TOOLS) honnef.co/go/tools/cmd/staticcheck
BUILD_DIR    := _build
DISTRIBUTIONS := flowtel flowtel-node flowtel-gateway
FUZZTIME     ?= 20s
BENCHTIME    ?= 1s
# make demo DEMO_HOLD=10m keeps the demo cluster up for queries
DEMO_HOLD    ?= 0s

manifest = $(if $(filter flowtel,$(1)),builder-config.yaml,distributions/$(1)/manifest.yaml)

.SECONDEXPANSION:

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

.PHONY: deps
deps: ## Install the system packages the tests need (apt; idempotent, needs root)
	@scripts/deps.sh

.PHONY: build
build: $(addprefix $(BUILD_DIR)/,$(DISTRIBUTIONS)) ## Build the three distributions with OCB into _build/

# Rebuild a distribution when its manifest or any Go source changes.
$(BUILD_DIR)/%: $$(call manifest,%) go.mod $(shell git ls-files '*.go' 2>/dev/null)
	@mkdir -p $(BUILD_DIR)
	@echo "build: $* with OCB (cold caches: ~3 min each; log in $(BUILD_DIR)/$*.build.log)"
	@$(OCB) --config $(call manifest,$*) > $(BUILD_DIR)/$*.build.log 2>&1 || { cat $(BUILD_DIR)/$*.build.log; exit 1; }
	@scripts/check-distribution.sh $(call manifest,$*) $(BUILD_DIR)/$*/$* distributions/$*/config.yaml
	@touch $@

.PHONY: peers
peers: ## Build, once per machine, the real peers the tests run (kube-apiserver, etcd, helm, go-ipfix collector)
	@scripts/peers.sh

.PHONY: test
test: deps build peers ## Unit, integration and end-to-end tests, plus a bounded fuzz run of the record codec
	$(GO) test -count=1 -timeout 30m ./...
	$(GO) test -run '^$$' -fuzz '^FuzzRoundTrip$$' -fuzztime $(FUZZTIME) ./internal/flowrecord
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./internal/flowrecord

.PHONY: lint
lint: ## gofmt, go vet, staticcheck
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

.PHONY: bench
bench: ## Go benchmarks (report the numbers in the issue note); the testbed's load runs are `make load`
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $$($(GO) list ./... | grep -v /testbed/e2e)

.PHONY: check
check: lint build test ## Everything CI runs: lint, build the distributions, test

.PHONY: demo
demo: deps build peers ## A mini-cluster in network namespaces with flowtel deployed: prints the flows it records (root)
	FLOWTEL_DEMO=1 FLOWTEL_DEMO_HOLD=$(DEMO_HOLD) $(GO) test -count=1 -v -timeout 2h -run '^TestScenarios$$' ./testbed/e2e

.PHONY: e2e
e2e: deps build peers ## Only the end-to-end testbed scenarios (root)
	$(GO) test -count=1 -v ./testbed/e2e

.PHONY: load
load: deps build peers ## Testbed load runs: node collector at 10k/100k connections, gateway throughput with 1 and 3 replicas (root; results in testbed/results.md)
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x -timeout 30m ./testbed/e2e

.PHONY: run
run: $(BUILD_DIR)/flowtel ## Run the full distribution with its default configuration
	$(BUILD_DIR)/flowtel/flowtel --config distributions/flowtel/config.yaml

.PHONY: clean
clean: ## Remove build output
	rm -rf $(BUILD_DIR)
