# cfssl-issuer: contributor commands. `make help` lists them.
SHELL := /usr/bin/env bash
CARGO ?= cargo

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-22s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the manager, simple-cfssl and the test server (debug)
	$(CARGO) build --workspace --bins

.PHONY: fmt
fmt: ## Format the code
	$(CARGO) fmt --all

.PHONY: lint
lint: ## rustfmt check and clippy with warnings as errors
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

.PHONY: test
test: lint ## Lint, then every test: unit, CFSSL conformance (multirootca + simple-cfssl), e2e
	$(CARGO) test --workspace

.PHONY: bench
bench: ## Benchmarks: our CFSSL client against a raw HTTP loop on a local multirootca
	$(CARGO) bench --bench cfssl_sign

.PHONY: demo
demo: ## Show it working with no cluster
	./scripts/demo.sh
