#!/usr/bin/env bash
# Runs the Node.js client's tests (node --test) against a real broker and prints, as its last
# line, exactly:
#     node: N passed, M failed
# Exits non-zero when anything failed (or the run did not finish).
#
# The broker binary: $SHAREBROKER_BIN, else ../../.build/debug/sharebroker (relative to this
# directory) when it exists, else /tmp/node-client-bin/sharebroker. Node.js 20+ ($NODE, else node).
set -u
here=$(cd "$(dirname "$0")" && pwd)
NODE=${NODE:-node}
if [ -z "${SHAREBROKER_BIN:-}" ]; then
    if [ -x "$here/../../.build/debug/sharebroker" ]; then
        SHAREBROKER_BIN=$(cd "$here/../../.build/debug" && pwd)/sharebroker
    else
        SHAREBROKER_BIN=/tmp/node-client-bin/sharebroker
    fi
fi
export SHAREBROKER_BIN
major=$("$NODE" -p 'process.versions.node.split(".")[0]' 2>/dev/null)
if [ -z "$major" ] || [ "$major" -lt 20 ]; then
    echo "node: Node.js 20 or later is needed to run these tests (found: ${major:-none} as '$NODE')" >&2
    echo "node: 0 passed, 1 failed"
    exit 1
fi
echo "== node client tests: node $("$NODE" --version), broker $SHAREBROKER_BIN"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sbnode-run-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

watchdog=()
if command -v timeout >/dev/null 2>&1; then watchdog=(timeout -k 10 300); fi

cd "$here" || exit 1
# spec for people (stdout), TAP for the count (file). Each test may take at most 2 minutes.
${watchdog[@]+"${watchdog[@]}"} "$NODE" --test --test-timeout=120000 \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="$tmp/tap" \
    test/*.test.js
status=$?

count() { sed -n -E "s/^# $1 ([0-9]+)\$/\\1/p" "$tmp/tap" 2>/dev/null | tail -n 1; }
passed=$(count pass)
failed=$(count fail)
cancelled=$(count cancelled)
if [ -z "$passed" ] || [ -z "$failed" ]; then
    echo "node: the test run left no summary (exit status $status)" >&2
    passed=${passed:-0}
    failed=$(( ${failed:-0} + 1 ))
fi
failed=$((failed + ${cancelled:-0}))
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    echo "node: node --test exited with status $status" >&2
    failed=1
fi
echo "node: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$status" -eq 0 ]
