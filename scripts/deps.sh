#!/usr/bin/env bash
# Installs the Debian packages flowtel's tests use, when missing. Idempotent;
# without root it only reports what is missing.
set -euo pipefail

# command → package
declare -A want=(
  [iptables]=iptables
  [conntrack]=conntrack
  [tshark]=tshark
  [nfacctd]=pmacct
  [clickhouse-server]=clickhouse-server
  [ip]=iproute2
)

missing=()
for cmd in "${!want[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || [ -x "/usr/bin/$cmd" ] || missing+=("${want[$cmd]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "deps: missing packages (run as root to install): ${missing[*]}" >&2
  exit 0
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
for i in 1 2 3; do
  apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null && exit 0
  echo "deps: apt-get failed (attempt $i), retrying" >&2
  sleep 5
done
echo "deps: could not install ${missing[*]}" >&2
exit 1
