#!/usr/bin/env bash
# Start-up of the command-line client: `shareclient open URL` end to end (process start, hello,
# a durable url.open answered, exit) against a private release broker, beside a static Swift
# Foundation hello-world (bench/hello_foundation.swift, swiftc -O -static-stdlib), with hyperfine.
# Issue 8's target: shareclient open at most 1.5x the hello-world's time.
#
# usage: bench/startup.sh [runs]      (default 300; needs hyperfine: apt-get install hyperfine)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs=${1:-300}
command -v hyperfine >/dev/null || { echo "startup: needs hyperfine (apt-get install hyperfine)" >&2; exit 2; }

swift build -c release --product sharebroker >&2
swift build -c release --product shareclient >&2
bin="$(swift build -c release --show-bin-path)"
work=$(mktemp -d "${TMPDIR:-/tmp}/sbstartup-XXXXXX")
chmod 700 "$work"
broker=""
cleanup() {
    if [ -n "$broker" ]; then kill "$broker" 2>/dev/null || true; wait "$broker" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

swiftc -O -static-stdlib bench/hello_foundation.swift -o "$work/hello_foundation_static" 2>/dev/null
mkdir -p "$work/state/apps"
chmod 700 "$work/state"
echo '{"bundleID": "com.sharebroker.startup", "urlSchemes": ["startupapp"]}' >"$work/state/apps/startup.json"
"$bin/sharebroker" serve --socket "$work/s.sock" --state "$work/state" --log-level warning &
broker=$!
for _ in $(seq 1 100); do [ -S "$work/s.sock" ] && break; sleep 0.05; done

echo "# $(date -Iseconds) $(uname -srm), $(nproc) CPUs; ldd shareclient: $(ldd "$bin/shareclient" | grep -c swift) Swift libraries"
hyperfine -N --warmup 20 --runs "$runs" \
    -n "static Foundation hello-world" "$work/hello_foundation_static" \
    -n "shareclient open URL" "$bin/shareclient --socket $work/s.sock open startupapp://item/42"
