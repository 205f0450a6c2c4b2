#!/usr/bin/env bash
# Builds, once per machine, the real peers flowtel's tests run against, so that
# no test's deadline covers a one-time build (a cold machine spends ~10 minutes
# here; a warm one a second). Each is built from the Go module proxy outside
# flowtel's module graph and cached (see each builder for where):
#   kube-apiserver + etcd   testbed/controlplane/build.sh        cold: 5-10 min
#   helm                    deploy/helm/build-helm.sh            cold: 1-2 min
#   go-ipfix collector      testbed/ipfixcollector/cmd/build-collector   cold: ~30 s
#   the Operator's module   go mod download (its CRD, for deploy/'s tests)   cold: ~10 s
#   kubelet, kube-proxy, kube-controller-manager, kube-scheduler, kubectl,
#   CoreDNS and the Operator's manager   testbed/kube/build.sh   cold: ~15 min
# `make test`, `make e2e`, `make demo` and `make load` run this first; .ci/run too.
set -euo pipefail
cd "$(dirname "$0")/.."

step() {
	local what=$1 cold=$2
	shift 2
	local t0=$SECONDS
	echo "peers: $what (once per machine; cold: $cold)…" >&2
	"$@" >/dev/null
	echo "peers: $what ready ($((SECONDS - t0)) s)" >&2
}

step "kube-apiserver and etcd" "5-10 min on 2 cores" testbed/controlplane/build.sh
step "the Kubernetes node components, CoreDNS and the Operator's manager" "~15 min on 2 cores" testbed/kube/build.sh
step "helm" "1-2 min" deploy/helm/build-helm.sh
step "the go-ipfix collector" "~30 s" go run ./testbed/ipfixcollector/cmd/build-collector
operator=$(sed -n 's/^const OperatorModule = "\(.*\)"$/\1/p' testbed/kube/operator.go)
step "the OpenTelemetry Operator's module ($operator)" "~10 s" \
	bash -c 'd=$(mktemp -d) && trap "rm -rf $d" EXIT && cd "$d" && GOFLAGS=-mod=mod go mod download "$1"' _ "$operator"
