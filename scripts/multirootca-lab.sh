#!/usr/bin/env bash
# A throwaway CFSSL multirootca (Debian's golang-cfssl) on 127.0.0.1, for tests, benchmarks and
# the demo. It builds a root CA and two intermediates (labels intermediate1, intermediate2), a
# config with auth-keyed profiles, and starts multirootca in the background.
#
#   multirootca-lab.sh start DIR PORT [tls]   prints URL=... KEY=... CA=... PID=... on one line
#   multirootca-lab.sh stop DIR
#
# Profiles: default (8760h), server (720h), server-short (600s), client (client auth), all with
# the HMAC key; noauth (no key: multirootca answers "authorisation required").
set -euo pipefail

cmd=${1:?usage: multirootca-lab.sh start|stop DIR [PORT] [tls]}
dir=${2:?DIR}
key=${LAB_KEY_HEX:-0123456789abcdef0123456789abcdef}

need() { command -v "$1" >/dev/null || { echo "missing $1: apt-get install golang-cfssl" >&2; exit 3; }; }

write_config() {
  cat > csr-root.json <<JSON
{"CN":"cfssl-issuer lab root","key":{"algo":"ecdsa","size":256},"names":[{"O":"cfssl-issuer lab"}]}
JSON
  for n in 1 2; do
    cat > csr-intermediate$n.json <<JSON
{"CN":"cfssl-issuer lab intermediate $n","key":{"algo":"ecdsa","size":256},"names":[{"O":"cfssl-issuer lab"}]}
JSON
  done
  cat > csr-host.json <<JSON
{"CN":"127.0.0.1","hosts":["127.0.0.1","localhost"],"key":{"algo":"ecdsa","size":256}}
JSON
  local usages='"signing","key encipherment","server auth"'
  cat > config.json <<JSON
{"auth_keys":{"lab":{"type":"standard","key":"$key"}},
 "signing":{
  "default":{"auth_key":"lab","expiry":"8760h","usages":[$usages]},
  "profiles":{
   "server":{"auth_key":"lab","expiry":"720h","usages":[$usages]},
   "server-short":{"auth_key":"lab","expiry":"600s","usages":[$usages]},
   "client":{"auth_key":"lab","expiry":"720h","usages":["signing","key encipherment","client auth"]},
   "noauth":{"expiry":"720h","usages":[$usages]},
   "ca":{"expiry":"43800h","usages":["cert sign","crl sign"],
         "ca_constraint":{"is_ca":true,"max_path_len":0,"max_path_len_zero":true}},
   "host":{"expiry":"8760h","usages":[$usages]}}}}
JSON
}

make_pki() {
  cfssl gencert -initca csr-root.json 2>/dev/null | cfssljson -bare root
  for n in 1 2; do
    cfssl genkey -initca csr-intermediate$n.json 2>/dev/null | cfssljson -bare intermediate$n
    cfssl sign -ca root.pem -ca-key root-key.pem -config config.json -profile ca \
      intermediate$n.csr 2>/dev/null | cfssljson -bare intermediate$n
  done
  cfssl gencert -ca root.pem -ca-key root-key.pem -config config.json -profile host \
    csr-host.json 2>/dev/null | cfssljson -bare host
  : > roots.conf
  for n in 1 2; do
    printf '[ intermediate%s ]\nprivate = file://%s/intermediate%s-key.pem\ncertificate = %s/intermediate%s.pem\nconfig = %s/config.json\n\n' \
      "$n" "$PWD" "$n" "$PWD" "$n" "$PWD" >> roots.conf
  done
}

# Whether process PID has a socket listening on 127.0.0.1:PORT (/proc/net/tcp: local address in
# field 2, state 0A = LISTEN in field 4, the socket's inode in field 10).
owns_listener() {
  local pid=$1 local_addr inode
  local_addr=$(printf '0100007F:%04X' "$2")
  for inode in $(awk -v a="$local_addr" '$2 == a && $4 == "0A" { print $10 }' /proc/net/tcp); do
    if ls -l "/proc/$pid/fd" 2>/dev/null | grep -qF "socket:[$inode]"; then return 0; fi
  done
  return 1
}

case "$cmd" in
start)
  port=${3:?PORT}; mode=${4:-}
  need cfssl; need cfssljson; need multirootca
  mkdir -p "$dir"; cd "$dir"
  write_config; make_pki
  scheme=http; tls=()
  if [ "$mode" = tls ]; then scheme=https; tls=(-tls-cert host.pem -tls-key host-key.pem); fi
  multirootca -a "127.0.0.1:$port" -roots roots.conf "${tls[@]}" > multirootca.log 2>&1 &
  echo $! > multirootca.pid
  # Ready when multirootca itself listens on the port, not merely something: the port was free
  # when the caller chose it, but another process may have taken it since.
  for _ in $(seq 1 100); do
    if owns_listener "$(cat multirootca.pid)" "$port"; then
      echo "URL=$scheme://127.0.0.1:$port KEY=$key CA=$PWD/root.pem PID=$(cat multirootca.pid)"
      exit 0
    fi
    kill -0 "$(cat multirootca.pid)" 2>/dev/null || break
    sleep 0.1
  done
  echo "multirootca did not start; log:" >&2; cat multirootca.log >&2; exit 1
  ;;
stop)
  if [ -f "$dir/multirootca.pid" ]; then kill "$(cat "$dir/multirootca.pid")" 2>/dev/null || true; rm -f "$dir/multirootca.pid"; fi
  ;;
*) echo "unknown command $cmd" >&2; exit 2 ;;
esac
