#!/usr/bin/env bash
# `make e2e-real`: the e2e scenarios that depend on Kubernetes semantics, each against a real
# etcd and kube-apiserver of its own, and cert-manager's own controller driving this issuer,
# all built from their Go modules by scripts/real-peers.sh. The suite's multirootca scenarios
# run a current CFSSL (the one built there) instead of Debian's 2016 build. Then csi-sanity,
# built there too, checks the CSI node plugin's Identity and Node answers
# (scripts/csi-sanity.sh).
#
# Needs Go 1.26 or later with the module proxy, the Rust toolchain, openssl and kubectl.
set -euo pipefail
cd "$(dirname "$0")/.."

# The scenarios that need only a kubeconfig (those needing the in-process server's faults or
# counters return early against a real server).
SUITES=(
  e2e_cert_manager
  e2e_issuance
  e2e_csr
  e2e_bad_inputs
  e2e_standalone
  e2e_standalone_failures
  e2e_standalone_nextkey
  e2e_standalone_reissue
  e2e_standalone_renewal
  e2e_standalone_lease
  e2e_standalone_migrate
  e2e_standalone_restart
  e2e_unasked
  e2e_namespace_scope
)

peers=$(./scripts/real-peers.sh build)
export E2E_REAL_PEERS=$peers
export PATH="$peers:$PATH"
echo "e2e-real: peers in $peers; multirootca: $(command -v multirootca)" >&2

# --workspace everywhere: the same feature set as `make test`, so nothing is built twice.
cargo build --workspace --bins
args=()
for suite in "${SUITES[@]}"; do args+=(--test "$suite"); done
# The suites and csi-sanity each run whatever the other's result, so one failure does not
# hide the other's; either fails the script.
status=0
# Each scenario runs an etcd and a kube-apiserver: two at a time on a small machine.
cargo test --workspace --no-fail-fast "${args[@]}" -- --test-threads="${E2E_REAL_THREADS:-2}" || status=$?
./scripts/csi-sanity.sh || status=$?
exit "$status"
