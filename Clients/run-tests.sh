#!/usr/bin/env bash
# Runs the non-Swift clients' test suites against a real broker and prints, last, one line:
#     N passed, M failed
# Exits non-zero when anything failed. Needs the built broker (`swift build`; or set
# SHAREBROKER_BIN), python3 (standard library only), socat for the shell suite and node (20+) for
# the Node.js suite.
set -u
here=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sbclients-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

total_passed=0
total_failed=0

# run_suite NAME PREFIX COMMAND...: runs the suite, streams its output, adds up its summary line
# "PREFIX: N passed, M failed". A suite that fails without such a line counts as one failure.
run_suite() {
    name=$1 prefix=$2
    shift 2
    echo "== $name"
    "$@" 2>&1 | tee "$tmp/$name.out"
    status=${PIPESTATUS[0]}
    line=$(grep -E "^$prefix: [0-9]+ passed, [0-9]+ failed" "$tmp/$name.out" | tail -n 1)
    if [ -n "$line" ]; then
        p=$(printf '%s\n' "$line" | sed -E 's/^[^:]+: ([0-9]+) passed, ([0-9]+) failed.*/\1/')
        f=$(printf '%s\n' "$line" | sed -E 's/^[^:]+: ([0-9]+) passed, ([0-9]+) failed.*/\2/')
    else
        p=0 f=0
    fi
    if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "$name: exited with status $status" >&2
        f=1
    fi
    total_passed=$((total_passed + p))
    total_failed=$((total_failed + f))
}

run_suite python python "$PY" "$here/python/tests/run.py"
run_suite shell shell bash "$here/shell/test.sh"
run_suite node node bash "$here/node/test.sh"
run_suite typecheck typecheck bash "$here/node/typecheck/check.sh"

echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
