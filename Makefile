# cfssl-issuer: contributor commands. `make help` lists them.
SHELL := /usr/bin/env bash
CARGO ?= cargo
KUBECTL ?= kubectl
KIND ?= kind
DOCKER ?= docker

VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
IMG ?= cfssl-issuer:$(VERSION)
SIMPLE_CFSSL_IMG ?= simple-cfssl:$(VERSION)
KIND_CLUSTER ?= cfssl-issuer
CERT_MANAGER_VERSION ?= v1.19.1
E2E_KUBECONFIG ?= $(HOME)/.kube/kind-$(KIND_CLUSTER)
# The project-local Python with Helm's engine for the chart lint (made by scripts/test-deps.sh).
PYTHON ?= .venv/bin/python3
# Where deploy-simple-cfssl saves the in-cluster CA's root and TLS CA for the e2e suite.
E2E_DIR := $(CURDIR)/.e2e

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-22s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Develop

.PHONY: build
build: ## Build the manager, simple-cfssl, the test server and the demo (debug)
	$(CARGO) build --workspace --bins

.PHONY: fmt
fmt: ## Format the code
	$(CARGO) fmt --all

.PHONY: test-deps
test-deps: ## Set up what the tests need (golang-cfssl when root, a .venv with Helm's engine) or name the command that does
	./scripts/test-deps.sh

.PHONY: lint
lint: test-deps ## rustfmt check, clippy -D warnings, the Helm chart lint and the kustomize build
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(PYTHON) scripts/chart-lint.py
	$(KUBECTL) kustomize config/default >/dev/null

.PHONY: test
test: lint ## Lint, then every test: unit, CFSSL conformance (multirootca + simple-cfssl), controllers, manifests, e2e
	$(CARGO) test --workspace --no-fail-fast

.PHONY: real-peers
real-peers: ## Build kube-apiserver, etcd, cert-manager's controller, CFSSL and csi-sanity from their Go modules (needs Go)
	./scripts/real-peers.sh build

.PHONY: e2e-real
e2e-real: ## The Kubernetes-semantics scenarios and cert-manager itself, against those real peers (needs Go)
	./scripts/e2e-real.sh

.PHONY: chaos
chaos: ## The fault scenarios (CA down, flaky API server, manager killed, slow CA) with 10,000 requests each
	$(CARGO) build -p cfssl-issuer --bin cfssl-issuer
	FAULTS_N=10000 $(CARGO) test -p e2e --test e2e_faults -- --nocapture

.PHONY: crds
crds: ## Regenerate config/crd and the chart's CRDs from the API types
	UPDATE_MANIFESTS=1 $(CARGO) test -p cfssl-issuer --test deploy_manifests crd_files

.PHONY: demo
demo: ## Show it working with no cluster: API server, simple-cfssl, manager, config/samples
	./scripts/demo.sh

.PHONY: fuzz
fuzz: ## Fuzz the parsers: a million cases per target, random seeds, release (make test runs 10,000 each)
	FUZZ_CASES=$(or $(FUZZ_CASES),1000000) FUZZ_SEED=$(or $(FUZZ_SEED),random) $(CARGO) test --release -p cfssl-issuer --test fuzz_parsers --test fuzz_settings -- --nocapture
	FUZZ_CASES=$(or $(FUZZ_CASES),1000000) FUZZ_SEED=$(or $(FUZZ_SEED),random) $(CARGO) test --release -p simple-cfssl --test fuzz_requests -- --nocapture

.PHONY: bench
bench: ## Benchmarks: CFSSL client vs raw HTTP (multirootca), reconciler cost, end to end, standalone mode and the CSI plugin (release)
	$(CARGO) bench --bench cfssl_sign
	$(CARGO) bench --bench reconcile
	$(CARGO) build --release -p cfssl-issuer --bin cfssl-issuer
	$(CARGO) run --release -p e2e --bin bench
	$(CARGO) run --release -p e2e --bin bench-standalone
	$(CARGO) run --release -p e2e --bin bench-csi
	TENANTS_N=1000 $(CARGO) test --release -p e2e --test e2e_tenants hostile_requests -- --nocapture

##@ Images (need a Docker engine)

.PHONY: docker-build
docker-build: ## Build the manager and simple-cfssl images (IMG, SIMPLE_CFSSL_IMG)
	$(DOCKER) build -t $(IMG) .
	$(DOCKER) build -t $(SIMPLE_CFSSL_IMG) -f simple-cfssl/Dockerfile .

##@ A kind cluster (needs kind, Docker and kubectl)

.PHONY: kind-cluster
kind-cluster: ## Create the kind cluster (KIND_CLUSTER) and write its kubeconfig to E2E_KUBECONFIG
	$(KIND) get clusters | grep -qx $(KIND_CLUSTER) || $(KIND) create cluster --name $(KIND_CLUSTER)
	mkdir -p $(dir $(E2E_KUBECONFIG))
	$(KIND) get kubeconfig --name $(KIND_CLUSTER) > $(E2E_KUBECONFIG)

.PHONY: deploy-cert-manager
deploy-cert-manager: ## Install cert-manager (CERT_MANAGER_VERSION) without its approver, and wait for it
	KUBECONFIG=$(E2E_KUBECONFIG) $(KUBECTL) apply -f https://github.com/cert-manager/cert-manager/releases/download/$(CERT_MANAGER_VERSION)/cert-manager.yaml
	# The e2e suite approves and denies requests itself, as the approver would.
	KUBECONFIG=$(E2E_KUBECONFIG) $(KUBECTL) -n cert-manager patch deploy cert-manager --type=json \
	  -p '[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--controllers=*,-certificaterequests-approver"}]'
	KUBECONFIG=$(E2E_KUBECONFIG) $(KUBECTL) -n cert-manager wait --for=condition=Available deploy --all --timeout=300s

.PHONY: kind-load
kind-load: ## Load both images into the kind cluster
	$(KIND) load docker-image --name $(KIND_CLUSTER) $(IMG) $(SIMPLE_CFSSL_IMG)

.PHONY: deploy
deploy: ## Install the CRDs, RBAC and manager (config/default) into the cluster
	KUBECONFIG=$(E2E_KUBECONFIG) $(KUBECTL) apply -k config/default
	KUBECONFIG=$(E2E_KUBECONFIG) $(KUBECTL) -n cfssl-issuer-system rollout status deploy/cfssl-issuer-controller-manager --timeout=180s

.PHONY: deploy-simple-cfssl
deploy-simple-cfssl: ## Run simple-cfssl in the cluster (namespace simple-cfssl); save its root and TLS CA
	KUBECONFIG=$(E2E_KUBECONFIG) $(KUBECTL) apply -k config/simple-cfssl
	KUBECONFIG=$(E2E_KUBECONFIG) $(KUBECTL) -n simple-cfssl rollout status deploy/simple-cfssl --timeout=180s
	mkdir -p $(E2E_DIR)
	KUBECONFIG=$(E2E_KUBECONFIG) $(KUBECTL) -n simple-cfssl exec deploy/simple-cfssl -- cat /tmp/ca/root.pem > $(E2E_DIR)/cfssl-root.pem
	KUBECONFIG=$(E2E_KUBECONFIG) $(KUBECTL) -n simple-cfssl exec deploy/simple-cfssl -- cat /tmp/ca/tls-ca.pem > $(E2E_DIR)/cfssl-tls-ca.pem

.PHONY: undeploy
undeploy: ## Remove the manager and simple-cfssl from the cluster (CRDs stay)
	KUBECONFIG=$(E2E_KUBECONFIG) $(KUBECTL) delete -k config/simple-cfssl --ignore-not-found
	KUBECONFIG=$(E2E_KUBECONFIG) $(KUBECTL) delete -k config/manager --ignore-not-found

.PHONY: e2e
e2e: ## The e2e suite against the cluster in E2E_KUBECONFIG (deployed manager and simple-cfssl)
	E2E_KUBECONFIG=$(E2E_KUBECONFIG) E2E_CFSSL_ROOT=$(E2E_DIR)/cfssl-root.pem \
	  E2E_CFSSL_TLS_CA=$(E2E_DIR)/cfssl-tls-ca.pem \
	  $(CARGO) test -p e2e --test 'e2e_*' -- --test-threads=4

.PHONY: e2e-all
e2e-all: kind-cluster deploy-cert-manager docker-build kind-load deploy deploy-simple-cfssl e2e ## kind cluster, cert-manager, images, deploy, then the e2e suite
