#!/usr/bin/env bash
# Show cfssl-issuer's CFSSL half working with no cluster: start simple-cfssl, health-check it
# with the right and a wrong key, sign a CSR and print the certificate. Leaves nothing running.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --quiet -p cfssl-issuer -p simple-cfssl --bins
bin=target/debug
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT INT TERM

key=0123456789abcdef0123456789abcdef
"$bin/simple-cfssl" --listen 127.0.0.1:0 --dir "$work/ca" --key "$key" >"$work/ca.out" 2>"$work/ca.log" &
pids+=($!)
for _ in $(seq 50); do grep -q '^URL=' "$work/ca.out" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^URL=//p' "$work/ca.out")
root=$(sed -n 's/^CA=//p' "$work/ca.out")
echo "simple-cfssl listening on $url (root CA: $root)"

echo "$key" >"$work/key"
echo deadbeefdeadbeefdeadbeefdeadbeef >"$work/wrong-key"
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/tls.key" \
  -subj "/CN=demo.example.com" -addext "subjectAltName=DNS:demo.example.com,DNS:www.demo.example.com" \
  -out "$work/tls.csr" 2>/dev/null

echo; echo "== check with the right key"
"$bin/cfssl-issuer" check --url "$url" --label intermediate1 --profile server --key-file "$work/key"
echo; echo "== check with a wrong key (exit code 1 is expected)"
"$bin/cfssl-issuer" check --url "$url" --label intermediate1 --profile server --key-file "$work/wrong-key" || echo "exit code $?"
echo; echo "== sign a CSR for demo.example.com"
"$bin/cfssl-issuer" sign --url "$url" --label intermediate1 --profile server --key-file "$work/key" \
  --csr "$work/tls.csr" >"$work/chain.pem"
openssl x509 -in "$work/chain.pem" -noout -subject -issuer -enddate -ext subjectAltName
echo; echo "== verify the chain to the CFSSL root"
openssl verify -CAfile "$root" -untrusted "$work/chain.pem" "$work/chain.pem"
