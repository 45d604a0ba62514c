#!/usr/bin/env bash
# Runs the test suite under AddressSanitizer (with LeakSanitizer) and under ThreadSanitizer,
# and prints one summary line per sanitizer.
#
#   scripts/sanitizers.sh            # both
#   scripts/sanitizers.sh address    # or: thread
#
# Each sanitizer builds into its own scratch directory (.build/sanitize-<name>), so the ordinary
# .build/debug is left alone and a second run only rebuilds what changed. The executables the
# end-to-end tests spawn (sharebroker, shareclient) are built there too, sanitized as well.
# Logs: .build/sanitize-<name>.log. Exit status: 0 when every suite passed.
# Environment: JOBS (default 2) is passed to `swift build -j`.
#
# The builds run one after the other (each takes every core), but a suite's test run overlaps
# the next sanitizer's build and test run: the suite mostly waits (brokers, timeouts, clients;
# about a third of one core without a sanitizer), so two runs side by side take little longer
# than the slower one. OVERLAP=0 runs everything one after the other.
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
here="$root/scripts/sanitizers"
jobs=${JOBS:-2}
sanitizers=("$@")
[ ${#sanitizers[@]} -eq 0 ] && sanitizers=(address thread)

# ASan: leaks are checked (LeakSanitizer), minus the toolchain false positives in lsan.supp.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
# TSan: halt_on_error=0 so one report does not hide the next; the exit code is still non-zero.
export TSAN_OPTIONS="suppressions=$here/tsan.supp:halt_on_error=0:second_deadlock_stack=1:${TSAN_OPTIONS:-}"

summary=()
status=0
overlap=${OVERLAP:-1}

# Builds the suite under sanitizer $1 (its log restarted), recording the times in the log's
# directory; returns the build's status.
build_with() {
    local s=$1 scratch="$root/.build/sanitize-$1" log="$root/.build/sanitize-$1.log"
    mkdir -p "$root/.build"
    rm -f "$scratch.rc" "$scratch.end"
    date +%s >"$scratch.start"
    {
        echo "== swift build --build-tests --sanitize=$s --scratch-path $scratch -j $jobs"
        swift build --build-tests --sanitize="$s" --scratch-path "$scratch" -j "$jobs"
    } >"$log" 2>&1
    local build=$?
    echo $build >"$scratch.build"
    date +%s >"$scratch.built"
    return $build
}

# Runs the suite built by build_with $1; its status goes to the scratch directory's `.rc`.
test_with() {
    local s=$1 scratch="$root/.build/sanitize-$1" log="$root/.build/sanitize-$1.log"
    echo "== swift test --skip-build --sanitize=$s --scratch-path $scratch" >>"$log"
    swift test --skip-build --sanitize="$s" --scratch-path "$scratch" >>"$log" 2>&1
    echo $? >"$scratch.rc"
    date +%s >"$scratch.end"
}

# Reads the outcome of sanitizer $1's build and run, re-runs a few tests that failed without a
# sanitizer report alone, and prints (and keeps) its summary line.
report_on() {
    local s=$1 scratch="$root/.build/sanitize-$1" log="$root/.build/sanitize-$1.log"
    local start built end build rc
    start=$(cat "$scratch.start")
    built=$(cat "$scratch.built")
    build=$(cat "$scratch.build")
    rc=0
    end=$built
    if [ "$build" -eq 0 ]; then
        rc=$(cat "$scratch.rc" 2>/dev/null || echo 1)
        end=$(cat "$scratch.end" 2>/dev/null || echo "$built")
    fi
    xc=$(grep -E "^[[:space:]]*Executed [0-9]+ tests?, with" "$log" | tail -1 | sed -E 's/^[[:space:]]*Executed ([0-9]+) tests?, with ([0-9]+) failures?.*/\1 \2/')
    st=$(grep -E "Test run with [0-9]+ tests" "$log" | tail -1 | sed -E 's/.*Test run with ([0-9]+) tests.* (passed|failed).*/\1 \2/')
    reports=$(grep -cE "^(==[0-9]+==ERROR: [A-Za-z]+Sanitizer|WARNING: ThreadSanitizer)" "$log")
    # The failed tests by name (a CI log keeps only its tail), and their first assertion messages.
    failedXCT=$(grep -oE "Test Case '[^']+' failed" "$log" | sed -E "s/^Test Case '([^']+)' failed$/\1/" | sort -u)
    failedST=$(grep -oE "✘ Test [^ ]+ failed" "$log" | sed -E 's/^✘ Test ([^ ]+) failed$/\1/' | sort -u)
    if [ -n "$failedXCT$failedST" ]; then
        grep -E ": error: |✘ .*recorded an issue" "$log" | cut -c1-400 | head -6
    fi
    # A test that fails under the sanitizer's slowdown without a sanitizer report is run once
    # more, alone: passing then, it is named as flaky (its timing) rather than failing the run.
    # Only when the run itself ended normally: every XCTest started also finished (a crash leaves
    # one unfinished, and the tests after it unrun), the suite's last summary line is there, the
    # Swift Testing tests all passed; and the re-run must report exactly those tests, 0 failures.
    # The sanitizers' own findings always fail it.
    rerun=""
    started=$(grep -cE "^Test Case '[^']+' started" "$log")
    finished=$(grep -cE "^Test Case '[^']+' (passed|failed|skipped)" "$log")
    nfailed=$(printf '%s\n' "$failedXCT" | grep -c .)
    if [ $build -eq 0 ] && [ $rc -ne 0 ] && [ "$reports" -eq 0 ] && [ "$nfailed" -ge 1 ] && [ "$nfailed" -le 5 ] \
        && [ -z "$failedST" ] && [ "${st##* }" = passed ] && [ -n "$xc" ] && [ "$started" -eq "$finished" ]; then
        filter=$(printf '%s\n' "$failedXCT" | sed -E 's/^([^.]+)\.(.+)$/\1\/\2$/' | paste -sd '|' -)
        relog="$log.rerun"
        echo "== re-running alone: $filter" >>"$log"
        swift test --skip-build --sanitize="$s" --scratch-path "$scratch" --filter "$filter" >"$relog" 2>&1
        rerc=$?
        cat "$relog" >>"$log"
        rereports=$(grep -cE "^(==[0-9]+==ERROR: [A-Za-z]+Sanitizer|WARNING: ThreadSanitizer)" "$relog")
        reexec=$(grep -E "^[[:space:]]*Executed [0-9]+ tests?, with" "$relog" | tail -1 | sed -E 's/^[[:space:]]*Executed ([0-9]+) tests?, with ([0-9]+) failures?.*/\1 \2/')
        if [ $rerc -eq 0 ] && [ "$rereports" -eq 0 ] && [ "$reexec" = "$nfailed 0" ]; then
            rerun="flaky under the sanitizer (failed, then passed alone): $(printf '%s\n' "$failedXCT" | paste -sd ' ' -)"
            rc=0
        else
            rerun="failed again alone (exit $rerc, executed/failed: ${reexec:-none})"
        fi
    fi
    if [ $build -ne 0 ]; then
        line="sanitize=$s: BUILD FAILED (see $log)"
        status=1
    else
        set -- $xc
        xct="XCTest ${1:-?} run, ${2:-?} failed"
        set -- $st
        swt="swift-testing ${1:-?} run, ${2:-not run}"
        verdict=PASS
        if [ $rc -ne 0 ] || [ "$reports" -ne 0 ]; then verdict=FAIL; status=1; fi
        line="sanitize=$s: $verdict — $xct; $swt; $reports sanitizer report(s); exit $rc; build $((built - start)) s, tests $((end - built)) s; log $log"
    fi
    failed=$(printf '%s\n%s\n' "$failedXCT" "$failedST" | grep -v '^$' | head -12 | paste -sd ' ' -)
    [ -n "$failed" ] && line="$line; failed: $failed"
    [ -n "$rerun" ] && line="$line; $rerun"
    summary+=("$line")
    echo "$line"
}

# With OVERLAP (the default), each suite's run goes to the background once it is built, and
# the outcomes are read once every run has ended, in order (a flaky test is re-run alone then,
# with nothing else running).
pids=()
for s in "${sanitizers[@]}"; do
    if build_with "$s"; then
        if [ "$overlap" = 1 ]; then
            test_with "$s" &
            pids+=($!)
            continue
        fi
        test_with "$s"
    fi
    [ "$overlap" = 1 ] || report_on "$s"
done
if [ "$overlap" = 1 ]; then
    [ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
    for s in "${sanitizers[@]}"; do report_on "$s"; done
fi
echo "---"
printf '%s\n' "${summary[@]}"
exit $status
