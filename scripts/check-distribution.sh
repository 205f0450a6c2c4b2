#!/usr/bin/env bash
# Checks that a built distribution contains exactly the components its OCB
# manifest lists: compares the modules printed by `<binary> components` with the
# manifest's gomod entries, then validates the distribution's default config,
# alone and with each overlay given after it.
set -euo pipefail
manifest=$1 binary=$2 config=$3
shift 3

want=$(grep -E '^\s*-\s*gomod:' "$manifest" | sed -E 's/.*gomod:\s*//' | sort -u)
got=$("$binary" components | grep -E '^\s*module:' | sed -E 's/.*module:\s*//' | sort -u)
if [ "$want" != "$got" ]; then
  echo "$binary: components differ from $manifest" >&2
  diff <(echo "$want") <(echo "$got") >&2 || true
  exit 1
fi
echo "$binary: $(echo "$got" | wc -l) components as in $manifest"
K8S_NODE_NAME=${K8S_NODE_NAME:-validate-node} POD_NAMESPACE=${POD_NAMESPACE:-flowtel} "$binary" validate --config "$config"
echo "$binary: $config is valid"
for overlay in "$@"; do
  KUBECONFIG_PATH=${KUBECONFIG_PATH:-/nonexistent/kubeconfig} K8S_NODE_NAME=${K8S_NODE_NAME:-validate-node} \
    "$binary" validate --config "$config" --config "$overlay"
  echo "$binary: $config with $overlay is valid"
done
