#!/usr/bin/env bash
# Generates api/flowstreampb (the directory above this one) from the .proto files with protoc (Debian
# protobuf-compiler, scripts/deps.sh) and the protoc-gen-go and
# protoc-gen-go-grpc versions pinned in internal/tools/go.mod.
# Usage: generate.sh [output directory] (default: ..).
# TestGeneratedCodeIsCurrent runs it into a temporary directory and compares.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:-$here/..}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
for p in google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc; do
  (cd "$root" && go build -modfile=internal/tools/go.mod -o "$bin/" "$p")
done
cd "$here"
PATH="$bin:$PATH" protoc -I . \
  --go_out="$out" --go_opt=paths=source_relative,Mflowstream/v1alpha1/flow.proto=github.com/flowtel/flowtel/api/flowstreampb \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
  flowstream/v1alpha1/flow.proto flowstream/v1alpha1/service.proto flowstream/v1alpha1/top.proto
# source_relative keeps the proto directory; the package is flat.
mv "$out"/flowstream/v1alpha1/*.go "$out"/
rm -r "$out/flowstream"
