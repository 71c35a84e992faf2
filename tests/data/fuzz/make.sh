#!/usr/bin/env bash
# Makes the fixed material tests/fuzz_parsers.rs mutates, so that a FUZZ_SEED replays the same
# inputs on every machine: a P-256 root, an intermediate it signed, a leaf for svc.example.org
# the intermediate signed (with an authority key identifier), the leaf key's
# SubjectPublicKeyInfo, and CSRs for svc.example.org and 10.0.0.1 with P-256, P-384, Ed25519
# and RSA-2048 keys. All DER. Made once with OpenSSL 3.0; run again only to change them.
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
ec() { openssl genpkey -algorithm EC -pkeyopt "ec_paramgen_curve:$1" -out "$2"; }
ca_ext="basicConstraints=critical,CA:true
keyUsage=critical,keyCertSign,cRLSign
subjectKeyIdentifier=hash"

ec P-256 "$work/root.key"; ec P-256 "$work/int.key"; ec P-256 "$work/leaf.key"
openssl req -x509 -new -key "$work/root.key" -subj /CN=root -days 36500 -sha256 \
  -addext "basicConstraints=critical,CA:true" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -outform DER -out root.der
openssl x509 -inform DER -in root.der -out "$work/root.pem"
openssl req -new -key "$work/int.key" -subj /CN=int -out "$work/int.csr"
openssl x509 -req -in "$work/int.csr" -CA "$work/root.pem" -CAkey "$work/root.key" -set_serial 2 \
  -days 36500 -sha256 -extfile <(printf '%s\nauthorityKeyIdentifier=keyid\n' "$ca_ext") -out "$work/int.pem"
openssl x509 -in "$work/int.pem" -outform DER -out int.der
openssl req -new -key "$work/leaf.key" -subj /CN=svc.example.org -out "$work/leaf.csr"
openssl x509 -req -in "$work/leaf.csr" -CA "$work/int.pem" -CAkey "$work/int.key" -set_serial 3 \
  -days 36500 -sha256 -outform DER -out leaf.der -extfile <(printf '%s\n' \
  "basicConstraints=critical,CA:false" "keyUsage=critical,digitalSignature" \
  "subjectAltName=DNS:svc.example.org" "subjectKeyIdentifier=hash" "authorityKeyIdentifier=keyid")
openssl pkey -in "$work/leaf.key" -pubout -outform DER -out leaf-spki.der

csr() {
  openssl req -new -key "$1" -subj /CN=svc.example.org -sha256 \
    -addext "subjectAltName=DNS:svc.example.org,IP:10.0.0.1" -outform DER -out "$2"
}
ec P-256 "$work/p256.key"; csr "$work/p256.key" csr-p256.der
ec P-384 "$work/p384.key"; csr "$work/p384.key" csr-p384.der
openssl genpkey -algorithm ED25519 -out "$work/ed25519.key"
openssl req -new -key "$work/ed25519.key" -subj /CN=svc.example.org \
  -addext "subjectAltName=DNS:svc.example.org,IP:10.0.0.1" -outform DER -out csr-ed25519.der
openssl genpkey -quiet -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$work/rsa.key"
csr "$work/rsa.key" csr-rsa.der
