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
  [openssl]=openssl
  [curl]=curl
  [flock]=util-linux
  [protoc]=protobuf-compiler
  [dot]=graphviz
  [prometheus]=prometheus
  [chromium]=chromium
  # A real Kubernetes cluster's Nodes (testbed/kube): the container runtime,
  # and nft for kube-proxy's nftables mode.
  [containerd]=containerd
  [runc]=runc
  [nft]=nftables
  # go test -race (make test runs the Kubernetes index under it) needs cgo's C compiler.
  [gcc]=gcc
)

# kubectl (the deploy tests apply manifests with it) is not a Debian 12 package;
# the machines come with one.
command -v kubectl >/dev/null 2>&1 || echo "deps: kubectl not found: the deploy tests need it on PATH" >&2

missing=()
for cmd in "${!want[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || [ -x "/usr/bin/$cmd" ] || missing+=("${want[$cmd]}")
done
# protoc's well-known types (google/protobuf/timestamp.proto), for the flow stream's generated code.
[ -f /usr/include/google/protobuf/timestamp.proto ] || missing+=(libprotobuf-dev)
# ZooKeeper (and the JRE it depends on), for the ClickHouse cluster the
# clickhouse_flows tests start (replicated tables, ON CLUSTER DDL).
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
# The CNI plugins the test cluster's Nodes use (bridge, host-local, portmap).
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "deps: missing packages (run as root to install): ${missing[*]}" >&2
  exit 0
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer no without a prompt.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true
for i in 1 2 3; do
  apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null && exit 0
  echo "deps: apt-get failed (attempt $i), retrying" >&2
  sleep 5
done
echo "deps: could not install ${missing[*]}" >&2
exit 1
