#!/usr/bin/env bash
# Runs every example (NNN-*/run.sh) end to end, each on its own private broker, and prints, last,
# one line:
#     N passed, M failed
# Exits non-zero when any example failed. Needs the built broker ('swift build'; or SHAREBROKER_BIN)
# and python3 (standard library only). Run one example alone with: bash Clients/examples/000-youtube-share/run.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
passed=0
failed=0
failed_names=()
for script in "$here"/[0-9][0-9][0-9]-*/run.sh; do
    name=$(basename "$(dirname "$script")")
    start=$(date +%s)
    if command -v timeout >/dev/null 2>&1; then
        timeout 60 bash "$script"
    else
        bash "$script"
    fi
    status=$?
    took=$(( $(date +%s) - start ))
    if [ "$status" -eq 0 ]; then
        passed=$((passed + 1))
        echo "-> $name: passed in ${took}s"
    else
        failed=$((failed + 1))
        failed_names+=("$name")
        echo "-> $name: FAILED (exit $status) in ${took}s"
    fi
    echo
done
if [ "$failed" -gt 0 ]; then echo "failed: ${failed_names[*]}"; fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
