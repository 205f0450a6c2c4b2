#!/usr/bin/env bash
# The first run, as a new user has it: a clean clone of HEAD with every cache
# empty (its own GOCACHE, GOMODCACHE, flowtel cache and XDG cache), then the
# README's two commands, `make demo` and `make check`, each timed. Run it as
# root before a release; it takes about 70 min on 2 cores, a third of it one-time
# builds. Usage: scripts/fresh-run.sh [workdir]   (default: a new temp dir, kept
# on failure for its logs, removed on success)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/flowtel-fresh-XXXXXX)}
mkdir -p "$work"
git clone -q "$repo" "$work/flowtel"
export GOCACHE=$work/cache/go-build GOMODCACHE=$work/cache/gomod \
	FLOWTEL_CACHE=$work/cache/flowtel XDG_CACHE_HOME=$work/cache/xdg GOFLAGS=-modcacherw
cd "$work/flowtel"

timed() {
	local t0=$SECONDS
	echo "fresh-run: $* …"
	if ! "$@" >"$work/$1-$2.log" 2>&1; then
		echo "fresh-run: $* FAILED after $((SECONDS - t0)) s; log: $work/$1-$2.log"
		tail -40 "$work/$1-$2.log"
		exit 1
	fi
	echo "fresh-run: $* passed in $((SECONDS - t0)) s"
}
timed make demo
timed make check
rm -rf "$work"
