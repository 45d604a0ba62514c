#!/usr/bin/env bash
# Builds sharebroker and sharebroker-bench in release mode and runs every bench scenario
# (status, idle, routing, open, recovery, share, defaults) against private brokers on temporary state
# directories; each scenario line is followed by the CPU other processes used meanwhile.
#
# usage: bench/run.sh [sharebroker-bench options...]
#   bench/run.sh                              # all scenarios, defaults (recovery at 100,000 takes minutes)
#   bench/run.sh --scenario open --json       # one scenario, with JSON lines
#   bench/run.sh --scenario recovery --pending 10000 --pending 20000
# Output is also kept in bench/results/run-<time>.txt.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build() {
    # Other people edit the package concurrently: a half-edited file can break the build for a
    # moment, so retry a few times before giving up.
    for attempt in 1 2 3 4 5; do
        if swift build -c release --product sharebroker && swift build -c release --product sharebroker-bench; then
            return 0
        fi
        echo "build failed (attempt $attempt); retrying in 30 s" >&2
        sleep 30
    done
    return 1
}

build >&2
bin="$(swift build -c release --show-bin-path)"
mkdir -p bench/results
out="bench/results/run-$(date +%Y%m%d-%H%M%S).txt"
{
    echo "# $(date -Iseconds) $(uname -srm), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo "# $bin/sharebroker-bench --json $*"
} | tee "$out"
"$bin/sharebroker-bench" --broker "$bin/sharebroker" --json "$@" | tee -a "$out"
echo "results: $out" >&2
