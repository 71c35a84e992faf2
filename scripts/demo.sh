#!/usr/bin/env bash
# Show cfssl-issuer working with no cluster: the in-process API server, simple-cfssl over TLS
# and the manager binary, with config/samples applied (e2e/src/bin/demo/). Leaves nothing
# running, Ctrl-C included. `./scripts/demo.sh --hold` keeps it up for kubectl until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --quiet -p cfssl-issuer --bin cfssl-issuer -p e2e --bin demo
exec "${CARGO_TARGET_DIR:-target}/debug/demo" "$@"
