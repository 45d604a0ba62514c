#!/usr/bin/env bash
# Runs the Go interop tests in GOPATH mode against Debian's Go source packages
# (/usr/share/gocode: golang-github-sourcegraph-jsonrpc2-dev) and prints, last,
# "go-jsonrpc2: N passed, M failed" (the subtests: each scenario under each codec).
set -u
cd "$(dirname "$0")" || exit 1
gocache=${GOCACHE:-}
if [ -z "$gocache" ]; then
    if [ -n "${HOME:-}" ] && [ -w "${HOME:-/nonexistent}" ]; then gocache=$HOME/.cache/go-build; else gocache=${TMPDIR:-/tmp}/sbinterop-gocache; fi
fi
out=$(GO111MODULE=off GOPATH=${SHAREBROKER_INTEROP_GOPATH:-/usr/share/gocode} GOFLAGS= GOCACHE=$gocache \
    go test -count=1 -v . 2>&1)
rc=$?
printf '%s\n' "$out"
p=$(printf '%s\n' "$out" | grep -cE '^[[:space:]]+--- PASS: Test[^ ]+/')
f=$(printf '%s\n' "$out" | grep -cE '^[[:space:]]+--- FAIL: Test[^ ]+/')
if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
echo "go-jsonrpc2: $p passed, $f failed"
exit $rc
