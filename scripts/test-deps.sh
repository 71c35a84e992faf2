#!/usr/bin/env bash
# What `make test` needs besides the Rust toolchain. It sets up what it can by itself and
# otherwise stops at the first missing piece with one line naming the command to run:
#   - multirootca and cfssl (Debian golang-cfssl): installed with apt when run as root;
#   - openssl and kubectl (Debian's kubectl package): installed with apt when run as root;
#   - promtool (Debian prometheus) for the chart's alert rules and dashboard: apt when root;
#   - Helm's engine for the chart lint: Python wheels in a project-local venv, .venv/.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
WHEELS=(helm-sdkpy==0.1.32 helm-python-sdk==0.2.2 PyYAML)

stop() { echo "make test: $1; run: $2" >&2; exit 1; }
is_root() { [ "$(id -u)" -eq 0 ]; }

apt_install() { # package...
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >/dev/null \
    || { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >/dev/null; }
}

need_package() { # command package
  command -v "$1" >/dev/null && return
  if is_root && command -v apt-get >/dev/null; then
    echo "make test: installing $2 (for $1)" >&2
    apt_install "$2"
    command -v "$1" >/dev/null && return
  fi
  stop "$1 is missing" "sudo apt-get install -y --no-install-recommends $2"
}

need_package multirootca golang-cfssl
need_package openssl openssl
need_package kubectl kubectl
need_package promtool prometheus
command -v python3 >/dev/null || need_package python3 python3

if [ ! -x "$VENV/bin/python3" ]; then
  if ! python3 -m venv "$VENV" >/dev/null 2>&1; then
    rm -rf "$VENV"
    need_venv() { is_root && command -v apt-get >/dev/null && apt_install python3-venv; }
    need_venv && python3 -m venv "$VENV" >/dev/null 2>&1 \
      || stop "python3 cannot make a venv" "sudo apt-get install -y python3-venv"
  fi
fi
# The wheels carry Helm as a shared library; they declare a newer Python than they need.
if ! "$VENV/bin/python3" -c 'import helm_sdkpy, helm_python, yaml' >/dev/null 2>&1; then
  echo "make test: installing the Helm engine wheels into $VENV" >&2
  "$VENV/bin/python3" -m pip install --quiet --disable-pip-version-check \
    --ignore-requires-python "${WHEELS[@]}" \
    || stop "cannot install the Helm engine wheels" "$VENV/bin/python3 -m pip install --ignore-requires-python ${WHEELS[*]}"
fi
