#!/usr/bin/env bash
# Builds the real peers `make e2e-real` runs against, from their Go modules through the module
# proxy (no release downloads, no source committed here): kube-apiserver, etcd, cert-manager's
# controller (our main around its controller packages, scripts/real-peers/cert-manager), a
# current CFSSL multirootca and kubernetes-csi's conformance tool csi-sanity. Each binary lands in $REAL_PEERS_DIR (outside target/) under a
# name carrying its version, and is built once: a second run only prints the directory.
#
#   scripts/real-peers.sh [build]   build what is missing, print the directory of bin/ links
#   scripts/real-peers.sh dir       print that directory only
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

KUBERNETES_VERSION=v1.35.4
ETCD_VERSION=v3.6.16
CERT_MANAGER_VERSION=v1.21.2
CFSSL_VERSION=v1.6.5
CSI_TEST_VERSION=v5.6.0

REAL_PEERS_DIR=${REAL_PEERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cfssl-issuer/real-peers}
WORK=$REAL_PEERS_DIR/modules
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
LDFLAGS="-s -w"

log() { echo "real-peers: $*" >&2; }

# A throwaway module in $WORK/$1 requiring $2, so `go build` takes a main package of a
# dependency; replace lines are added by the caller.
module() { # name require...
  local dir=$WORK/$1; shift
  rm -rf "$dir"; mkdir -p "$dir"
  printf 'module cfssl-issuer.local/real-peers\n\ngo 1.25\n' > "$dir/go.mod"
  (cd "$dir" && for r in "$@"; do go mod edit -require="$r"; done)
  echo "$dir"
}

timed_build() { # label output dir package
  local start=$SECONDS
  (cd "$3" && go build -trimpath -ldflags="$LDFLAGS" -o "$2.partial" "$4")
  mv "$2.partial" "$2"
  log "built $1 in $((SECONDS - start)) s"
  echo "$1 $((SECONDS - start))" >> "$REAL_PEERS_DIR/build-times"
}

# kube-apiserver: k8s.io/kubernetes points its staging modules at ./staging/src; a dependent
# needs each of them replaced by its published v0.X.Y twin.
build_kube_apiserver() {
  local out=$REAL_PEERS_DIR/kube-apiserver-$KUBERNETES_VERSION
  [ -x "$out" ] && return
  local dir; dir=$(module kube-apiserver "k8s.io/kubernetes@$KUBERNETES_VERSION")
  local gomod; gomod=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  local staging=v0.${KUBERNETES_VERSION#v1.}
  for m in $(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$gomod"); do
    (cd "$dir" && go mod edit -replace="$m=$m@$staging")
  done
  # The version a release build stamps in, so /version and the compatibility-version logic
  # see v1.X.Y and not v0.0.0-master.
  local minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
  local v=k8s.io/component-base/version
  LDFLAGS="$LDFLAGS -X $v.gitVersion=$KUBERNETES_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor" \
    timed_build kube-apiserver "$out" "$dir" k8s.io/kubernetes/cmd/kube-apiserver
}

build_etcd() {
  local out=$REAL_PEERS_DIR/etcd-$ETCD_VERSION
  [ -x "$out" ] && return
  local dir; dir=$(module etcd "go.etcd.io/etcd/server/v3@$ETCD_VERSION")
  timed_build etcd "$out" "$dir" go.etcd.io/etcd/server/v3
}

build_cert_manager() {
  local out=$REAL_PEERS_DIR/cert-manager-controller-$CERT_MANAGER_VERSION
  [ -x "$out" ] && [ "$out" -nt "$ROOT/scripts/real-peers/cert-manager/main.go" ] && return
  local dir; dir=$(module cert-manager "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION")
  cp "$ROOT/scripts/real-peers/cert-manager/main.go" "$dir/"
  timed_build cert-manager-controller "$out" "$dir" .
  # The CRDs the controller serves, from the same module (Helm templates: the template
  # lines are dropped, which leaves plain CRDs).
  local src; src=$(cd "$dir" && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)
  local crds=$REAL_PEERS_DIR/cert-manager-crds-$CERT_MANAGER_VERSION.yaml
  : > "$crds"
  for f in "$src"/deploy/charts/cert-manager/templates/crd-*.yaml; do
    echo "---" >> "$crds"
    grep -v '^\s*{{' "$f" | sed -e 's/{{[^}]*}}//g' >> "$crds"
  done
}

# multirootca and the cfssl CLI (scripts/multirootca-lab.sh makes its CAs with it); cgo, as
# CFSSL's releases are built, for its SQLite certificate database.
build_cfssl() {
  local dir; dir=$(module cfssl "github.com/cloudflare/cfssl@$CFSSL_VERSION")
  for cmd in multirootca cfssl; do
    local out=$REAL_PEERS_DIR/$cmd-$CFSSL_VERSION
    [ -x "$out" ] || CGO_ENABLED=1 LDFLAGS="$LDFLAGS -X github.com/cloudflare/cfssl/cli/version.version=${CFSSL_VERSION#v}" \
      timed_build "$cmd" "$out" "$dir" "github.com/cloudflare/cfssl/cmd/$cmd"
  done
}

# csi-sanity checks the CSI node plugin against the spec's own Go bindings
# (scripts/csi-sanity.sh): our proto/csi.proto is hand-written, and a wrong field number
# would still pass a Rust client generated from the same file.
build_csi_sanity() {
  local out=$REAL_PEERS_DIR/csi-sanity-$CSI_TEST_VERSION
  [ -x "$out" ] && return
  local dir; dir=$(module csi-sanity "github.com/kubernetes-csi/csi-test/v5@$CSI_TEST_VERSION")
  timed_build csi-sanity "$out" "$dir" github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity
}

# Stable names for the harness: bin/etcd, bin/kube-apiserver, bin/multirootca, bin/cfssl,
# bin/cert-manager-controller, bin/cert-manager-crds.yaml and bin/csi-sanity.
link() {
  mkdir -p "$REAL_PEERS_DIR/bin"
  ln -sf "../etcd-$ETCD_VERSION" "$REAL_PEERS_DIR/bin/etcd"
  ln -sf "../kube-apiserver-$KUBERNETES_VERSION" "$REAL_PEERS_DIR/bin/kube-apiserver"
  ln -sf "../multirootca-$CFSSL_VERSION" "$REAL_PEERS_DIR/bin/multirootca"
  ln -sf "../cfssl-$CFSSL_VERSION" "$REAL_PEERS_DIR/bin/cfssl"
  ln -sf "../cert-manager-controller-$CERT_MANAGER_VERSION" "$REAL_PEERS_DIR/bin/cert-manager-controller"
  ln -sf "../cert-manager-crds-$CERT_MANAGER_VERSION.yaml" "$REAL_PEERS_DIR/bin/cert-manager-crds.yaml"
  ln -sf "../csi-sanity-$CSI_TEST_VERSION" "$REAL_PEERS_DIR/bin/csi-sanity"
}

case "${1:-build}" in
  dir) echo "$REAL_PEERS_DIR/bin" ;;
  build)
    command -v go >/dev/null || { echo "real-peers: needs Go 1.26 or later (go not found)" >&2; exit 1; }
    mkdir -p "$REAL_PEERS_DIR"
    for peer in ${REAL_PEERS:-etcd kube_apiserver cfssl cert_manager csi_sanity}; do "build_$peer"; done
    link
    echo "$REAL_PEERS_DIR/bin"
    ;;
  *) echo "usage: $0 [build|dir]" >&2; exit 2 ;;
esac
