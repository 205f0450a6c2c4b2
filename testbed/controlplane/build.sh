#!/usr/bin/env bash
# Builds a real kube-apiserver and etcd from Go modules, for integration tests
# and the testbed (docs/architecture.md §4: a real kube-apiserver and etcd).
#
# The binaries are built in throw-away Go modules OUTSIDE the project's go.mod
# graph (k8s.io/kubernetes never becomes a flowtel dependency) and cached in
#   ${FLOWTEL_CACHE:-${XDG_CACHE_HOME:-/var/cache}/flowtel}/controlplane/<version>/
# so the ~6 min cold build happens once per machine / CI cache. A second run
# with both binaries present does nothing and prints the directory.
#
# Usage: testbed/controlplane/build.sh        # prints the directory holding the binaries
# Env:   KUBE_VERSION (v1.37.2), ETCD_VERSION (v3.7.0), FLOWTEL_CACHE, BUILD_NICE (10)
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.7.0}
STAGING_VERSION=v0${KUBE_VERSION#v1}      # v1.37.2 -> v0.37.2
CACHE=${FLOWTEL_CACHE:-${XDG_CACHE_HOME:-/var/cache}/flowtel}
OUT=$CACHE/controlplane/$KUBE_VERSION
NICE=${BUILD_NICE:-10}

mkdir -p "$OUT"
# One builder at a time: the testbed and several test packages may call this concurrently.
exec 9>"$OUT/.lock"
flock 9

log() { echo "controlplane/build.sh: $*" >&2; }

build_apiserver() {
	local mod=$OUT/src/kube-apiserver
	mkdir -p "$mod"
	log "fetching k8s.io/kubernetes@$KUBE_VERSION module graph into $mod"
	# k8s.io/kubernetes replaces every staging module with ./staging/...; a
	# consumer must pin each of them to the published staging version instead.
	local replaces
	replaces=$(curl -fsSL "https://proxy.golang.org/k8s.io/kubernetes/@v/$KUBE_VERSION.mod" |
		sed -n '/^replace (/,/^)/p' |
		awk -v v="$STAGING_VERSION" '/=>/ && $1 !~ /sample-(cli-plugin|controller)$/ {print "\t" $1 " => " $1 " " v}')
	if [ -z "$replaces" ]; then
		log "could not read the replace block of k8s.io/kubernetes@$KUBE_VERSION from the module proxy"
		exit 1
	fi
	cat >"$mod/go.mod" <<EOF
module example.com/flowtel-kbuild

go 1.26.0

godebug default=go1.26

require k8s.io/kubernetes $KUBE_VERSION

replace (
$replaces
)
EOF
	local minor=${KUBE_VERSION#v1.}
	minor=${minor%%.*}
	(cd "$mod" && GOFLAGS=-mod=mod go get -tool k8s.io/kubernetes/cmd/kube-apiserver@"$KUBE_VERSION")
	log "building kube-apiserver $KUBE_VERSION (cold: 5-10 min on 2 cores)"
	(cd "$mod" && nice -n "$NICE" go build -trimpath \
		-ldflags "-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
		-o "$OUT/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
	mv "$OUT/kube-apiserver.tmp" "$OUT/kube-apiserver"
}

build_etcd() {
	local mod=$OUT/src/etcd
	mkdir -p "$mod"
	cat >"$mod/go.mod" <<EOF
module example.com/flowtel-etcdbuild

go 1.26.0
EOF
	(cd "$mod" && GOFLAGS=-mod=mod go get -tool go.etcd.io/etcd/server/v3@"$ETCD_VERSION")
	log "building etcd $ETCD_VERSION"
	(cd "$mod" && nice -n "$NICE" go build -trimpath -o "$OUT/etcd.tmp" go.etcd.io/etcd/server/v3)
	mv "$OUT/etcd.tmp" "$OUT/etcd"
}

# Build outside any enclosing module (this script lives in the flowtel repo).
export GOWORK=off GOFLAGS=-buildvcs=false
[ -x "$OUT/etcd" ] || build_etcd
[ -x "$OUT/kube-apiserver" ] || build_apiserver
"$OUT/kube-apiserver" --version >&2
"$OUT/etcd" --version | sed -n 1p >&2 # sed reads all: no SIGPIPE under pipefail
echo "$OUT"
