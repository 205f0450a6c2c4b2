#!/usr/bin/env bash
# Builds, once per machine, the parts of a real Kubernetes cluster that the
# control plane's builder (testbed/controlplane/build.sh: kube-apiserver, etcd)
# does not: kubelet, kube-proxy, kube-controller-manager, kube-scheduler and
# kubectl from the same k8s.io/kubernetes module graph, and CoreDNS from its own
# module. Like the control plane they are built outside flowtel's go.mod and
# cached in ${FLOWTEL_CACHE:-/var/cache/flowtel}/kube/<version>/; a second run
# with every binary present does nothing and prints the directory.
#
# The OpenTelemetry Operator's manager is built too, from the module release
# whose CRD deploy/'s tests use (kube.OperatorModule in testbed/kube/operator.go).
#
# Usage: testbed/kube/build.sh      # prints the directory holding the binaries
# Env:   KUBE_VERSION (v1.37.2), COREDNS_VERSION (v1.15.0), FLOWTEL_CACHE, BUILD_NICE (10)
set -euo pipefail
cd "$(dirname "$0")/../.."

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
CACHE=${FLOWTEL_CACHE:-${XDG_CACHE_HOME:-/var/cache}/flowtel}
OUT=$CACHE/kube/$KUBE_VERSION
NICE=${BUILD_NICE:-10}
NODE_COMPONENTS="kubelet kube-proxy kube-controller-manager kube-scheduler kubectl"

log() { echo "kube/build.sh: $*" >&2; }

# The kube-apiserver's throw-away module already pins every staging module
# (its replace block); the other components build in the same module.
controlplane=$(testbed/controlplane/build.sh)
mod=$controlplane/src/kube-apiserver

mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock 9

export GOWORK=off GOFLAGS=-buildvcs=false

missing=()
for c in $NODE_COMPONENTS; do [ -x "$OUT/$c" ] || missing+=("$c"); done
if [ ${#missing[@]} -gt 0 ]; then
	minor=${KUBE_VERSION#v1.}
	minor=${minor%%.*}
	pkgs=()
	for c in "${missing[@]}"; do
		case $c in
		kubectl) pkgs+=(k8s.io/kubernetes/cmd/kubectl) ;;
		*) pkgs+=("k8s.io/kubernetes/cmd/$c") ;;
		esac
	done
	(cd "$mod" && GOFLAGS=-mod=mod go get "${pkgs[@]/%/@$KUBE_VERSION}" >/dev/null 2>&1 || true)
	log "building ${missing[*]} $KUBE_VERSION (cold: ~10 min on 2 cores, less once the apiserver's packages are cached)"
	mkdir -p "$OUT/tmp"
	(cd "$mod" && GOFLAGS=-mod=mod nice -n "$NICE" go build -trimpath \
		-ldflags "-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
		-o "$OUT/tmp/" "${pkgs[@]}")
	for c in "${missing[@]}"; do mv "$OUT/tmp/$c" "$OUT/$c"; done
	rmdir "$OUT/tmp"
fi

if [ ! -x "$OUT/coredns" ]; then
	cmod=$OUT/src/coredns
	mkdir -p "$cmod"
	cat >"$cmod/go.mod" <<EOM
module example.com/flowtel-corednsbuild

go 1.26.0
EOM
	log "building CoreDNS $COREDNS_VERSION (cold: ~3.5 min)"
	(cd "$cmod" && GOFLAGS=-mod=mod go get -tool "github.com/coredns/coredns@$COREDNS_VERSION" >get.log 2>&1) || { cat "$cmod/get.log" >&2; exit 1; }
	(cd "$cmod" && GOFLAGS=-mod=mod CGO_ENABLED=0 nice -n "$NICE" go build -trimpath -o "$OUT/coredns.tmp" github.com/coredns/coredns)
	mv "$OUT/coredns.tmp" "$OUT/coredns"
fi
operator=$(sed -n 's/^const OperatorModule = "\(.*\)"$/\1/p' testbed/kube/operator.go)
if [ ! -x "$OUT/opentelemetry-operator-${operator#*@}" ]; then
	omod=$OUT/src/operator
	mkdir -p "$omod"
	cat >"$omod/go.mod" <<EOM
module example.com/flowtel-operatorbuild

go 1.26.0
EOM
	log "building the OpenTelemetry Operator's manager ($operator; cold: ~3 min)"
	(cd "$omod" && GOFLAGS=-mod=mod go get -tool "$operator" >get.log 2>&1) || { cat "$omod/get.log" >&2; exit 1; }
	(cd "$omod" && GOFLAGS=-mod=mod CGO_ENABLED=0 nice -n "$NICE" go build -trimpath -o "$OUT/operator.tmp" "${operator%@*}")
	mv "$OUT/operator.tmp" "$OUT/opentelemetry-operator-${operator#*@}"
fi
echo "$OUT"
