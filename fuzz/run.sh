#!/usr/bin/env bash
# Builds (fuzz/build.sh) and runs every libFuzzer target for SECONDS each (default 60), starting from the
# committed seeds in fuzz/corpus/<target>/ plus what earlier runs found (fuzz/out/corpus/<target>/, not
# committed). Prints per target: executions, coverage (at start -> at end) and new corpus units, crashes.
# Exits 1 when any target crashed, failed a property, timed out or ran out of memory; the input is kept in
# fuzz/out/crashes/<target>/ (see fuzz/README.md for turning it into a regression test).
#
# Usage: fuzz/run.sh [SECONDS]
# Env:   FUZZ_TARGETS="framer json"   only these targets (default: all)
#        FUZZ_JOBS=N                   targets fuzzed at the same time (default: number of CPUs)
#        FUZZ_OPT=-O                   passed to build.sh (default -Onone: ~25 s build instead of ~2.5 min)
#        FUZZ_TIMEOUT=10               seconds one input may take before it counts as a hang
#        FUZZ_ARGS="-only_ascii=1"     extra libFuzzer flags
set -uo pipefail
cd "$(dirname "$0")/.."

SECS=${1:-60}
read -r -a TARGETS <<<"${FUZZ_TARGETS:-framer json rpc url predicate activation association manifest journal}"
JOBS=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
OUT=fuzz/out
read -r -a EXTRA <<<"${FUZZ_ARGS:-}"

fuzz/build.sh "${TARGETS[@]}" || { echo "fuzz/run.sh: build failed" >&2; exit 2; }

# Swift's in-process backtracer would race libFuzzer's crash handler; ASan reports are enough. LeakSanitizer is
# off: it reports false leaks for Swift globals whose pointers carry enum tag bits (seen with AssociationPattern).
export SWIFT_BACKTRACE=enable=no
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=0:symbolize=1}
command -v llvm-symbolizer >/dev/null 2>&1 && export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer)}

run_one() {
    local t=$1
    mkdir -p "$OUT/corpus/$t" "$OUT/crashes/$t" "$OUT/logs"
    local args=(-max_total_time="$SECS" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=4096 -detect_leaks=0 -print_final_stats=1
        -artifact_prefix="$OUT/crashes/$t/")
    [ -f "fuzz/dict/$t.dict" ] && args+=(-dict="fuzz/dict/$t.dict")
    ls "$OUT/crashes/$t" >"$OUT/logs/$t.before" 2>/dev/null
    "fuzz/bin/$t" "${args[@]}" "${EXTRA[@]}" "$OUT/corpus/$t" "fuzz/corpus/$t" >"$OUT/logs/$t.log" 2>&1
    echo $? >"$OUT/logs/$t.rc"
}

echo "== fuzzing ${#TARGETS[@]} targets, ${SECS} s each, $JOBS at a time"
running=0
for t in "${TARGETS[@]}"; do
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait
# A crashed journal run leaves its scratch state directory behind (named after its pid).
for d in /dev/shm/sharebroker-fuzz-journal-* /tmp/sharebroker-fuzz-journal-*; do
    [ -d "$d" ] && ! kill -0 "${d##*-}" 2>/dev/null && rm -rf "$d"
done

failed=()
printf '%-12s %12s %9s %18s %9s  %s\n' target executions exec/s "cov start->end" "new units" result
for t in "${TARGETS[@]}"; do
    log=$OUT/logs/$t.log
    rc=$(cat "$OUT/logs/$t.rc" 2>/dev/null || echo 1)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    units=$(sed -n 's/^stat::new_units_added: *//p' "$log" | tail -1)
    cov0=$(grep -m1 -E '^#[0-9]+[[:space:]]+INITED' "$log" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    cov1=$(grep -E '^#[0-9]+[[:space:]]+[A-Z]+ .*cov: ' "$log" | tail -1 | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    new=$(comm -13 "$OUT/logs/$t.before" <(ls "$OUT/crashes/$t" 2>/dev/null) | sed "s|^|$OUT/crashes/$t/|" | tr '\n' ' ')
    if [ "$rc" = 0 ]; then
        result="ok, no crashes"
    else
        result="FAILED (exit $rc): ${new:-no artifact, see $log}"
        failed+=("$t")
    fi
    printf '%-12s %12s %9s %18s %9s  %s\n' "$t" "${execs:-?}" "${speed:-?}" "${cov0:-?}->${cov1:-?}" "${units:-?}" "$result"
done

if [ ${#failed[@]} -gt 0 ]; then
    for t in "${failed[@]}"; do
        echo
        echo "== $t: $OUT/logs/$t.log"
        grep -E -A3 'FUZZ PROPERTY FAILED|Fatal error|ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)' "$OUT/logs/$t.log" | head -20
        grep -E '^ *#[0-9]+ .* in ' "$OUT/logs/$t.log" | grep -v -E 'libFuzzer|fuzzer::|libc\.so|__sanitizer|asan' | head -12
        grep -E 'Test unit written to|SUMMARY' "$OUT/logs/$t.log" | head -3
    done
    echo
    echo "fuzz/run.sh: ${#failed[@]} target(s) failed: ${failed[*]} (reproduce: fuzz/bin/TARGET ARTIFACT)"
    exit 1
fi
echo "fuzz/run.sh: all targets ran without crashes"
