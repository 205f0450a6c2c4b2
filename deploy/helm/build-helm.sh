#!/usr/bin/env bash
# Builds the helm CLI from the Go module proxy, for `helm lint` / `helm template`
# in deploy/'s tests (the machines have no other way to get helm).
#
# Built in a throw-away Go module OUTSIDE flowtel's go.mod graph (helm's
# k8s.io dependencies never become flowtel's) and cached in
#   ${FLOWTEL_CACHE:-${XDG_CACHE_HOME:-/var/cache}/flowtel}/helm/<version>/helm
# A second run with the binary present does nothing and prints its path.
#
# Usage: deploy/helm/build-helm.sh      # prints the path of the helm binary
# Env:   HELM_VERSION (v3.21.4), FLOWTEL_CACHE, BUILD_NICE (10)
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-v3.21.4}
CACHE=${FLOWTEL_CACHE:-${XDG_CACHE_HOME:-/var/cache}/flowtel}
OUT=$CACHE/helm/$HELM_VERSION
NICE=${BUILD_NICE:-10}

mkdir -p "$OUT"
# One builder at a time: several test runs may call this concurrently.
exec 9>"$OUT/.lock"
flock 9

if [ ! -x "$OUT/helm" ]; then
	mod=$OUT/src
	mkdir -p "$mod"
	cat >"$mod/go.mod" <<MOD
module example.com/flowtel-helmbuild

go 1.26.0
MOD
	export GOWORK=off GOFLAGS=-buildvcs=false
	echo "build-helm.sh: fetching helm.sh/helm/v3@$HELM_VERSION into $mod" >&2
	(cd "$mod" && GOFLAGS=-mod=mod go get -tool helm.sh/helm/v3/cmd/helm@"$HELM_VERSION")
	echo "build-helm.sh: building helm $HELM_VERSION" >&2
	(cd "$mod" && CGO_ENABLED=0 nice -n "$NICE" go build -trimpath \
		-ldflags "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
		-o "$OUT/helm.tmp" helm.sh/helm/v3/cmd/helm)
	mv "$OUT/helm.tmp" "$OUT/helm"
fi
"$OUT/helm" version --short >&2
echo "$OUT/helm"
