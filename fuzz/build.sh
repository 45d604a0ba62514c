#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/targets/ with swiftc directly (Package.swift is not involved):
# every library module a target needs is compiled once from Sources/<Module>/ with -sanitize=fuzzer,address
# into fuzz/bin/obj + fuzz/bin/modules (as its own module, so `import ShareProtocol` etc. work unchanged),
# then each target (targets/<name>.swift + targets/Common.swift) is linked against them into fuzz/bin/<name>.
#
# Usage: fuzz/build.sh [TARGET...]        (no arguments: every target)
# Env:   FUZZ_OPT=-Onone (default) | -O   (-O takes ~2.5 min instead of ~25 s, for 10-50% more executions/s)
#        FUZZ_JOBS=N                       parallel link jobs (default: number of CPUs)
# A module is rebuilt only when its sources, its dependencies or the flags changed (stamp files).
set -euo pipefail
cd "$(dirname "$0")/.."

OPT=${FUZZ_OPT:--Onone}
JOBS=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
BIN=fuzz/bin
OBJ=$BIN/obj$OPT       # per optimization level, so switching FUZZ_OPT does not rebuild from scratch
MODS=$BIN/modules$OPT
LOGS=$BIN/logs
mkdir -p "$OBJ" "$MODS" "$LOGS"

SWIFT_FLAGS=(-parse-as-library "$OPT" -gline-tables-only -sanitize=fuzzer,address -swift-version 6)
CLANG_FLAGS=(-O1 -gline-tables-only -fsanitize=fuzzer-no-link,address)

ALL_TARGETS=(framer json rpc url predicate activation association manifest journal)

# The library modules each target links, dependencies first.
modules_for() {
    case "$1" in
        framer | json | rpc) echo "ShareProtocol" ;;
        url | predicate | activation | association | manifest) echo "ShareProtocol CShareSystem ShareSystem ShareRouting" ;;
        journal) echo "ShareProtocol CShareSystem ShareSystem ShareStore" ;;
        *) echo "unknown target '$1' (targets: ${ALL_TARGETS[*]})" >&2; return 1 ;;
    esac
}

# Module map for the C target (SwiftPM generates one; swiftc needs it spelled out).
MODULEMAP=$PWD/$BIN/CShareSystem.modulemap
cat >"$MODULEMAP.tmp" <<EOF
module CShareSystem {
    header "$PWD/Sources/CShareSystem/include/CShareSystem.h"
    export *
}
EOF
if cmp -s "$MODULEMAP.tmp" "$MODULEMAP"; then rm "$MODULEMAP.tmp"; else mv "$MODULEMAP.tmp" "$MODULEMAP"; fi
IMPORT_FLAGS=(-I "$MODS" -Xcc "-fmodule-map-file=$MODULEMAP")

sources_of() { find "Sources/$1" -name "*.$2" | LC_ALL=C sort; }

# stamp NAME EXT DEPS...: a hash of the sources, the flags and the dependencies' stamps.
stamp() {
    local name=$1 ext=$2
    shift 2
    {
        echo "$OPT ${SWIFT_FLAGS[*]} ${CLANG_FLAGS[*]}"
        sources_of "$name" "$ext" | while read -r f; do echo "$f"; cat "$f"; done
        [ "$ext" = c ] && cat "Sources/$name"/include/*.h
        for d in "$@"; do cat "$OBJ/$d.stamp" 2>/dev/null || echo missing; done
    } | sha256sum | cut -d' ' -f1
}

# build_module NAME DEPS...: compiles Sources/NAME/*.swift into one object and a .swiftmodule.
build_module() {
    local name=$1
    shift
    local want
    want=$(stamp "$name" swift "$@")
    if [ -f "$OBJ/$name.o" ] && [ "$(cat "$OBJ/$name.stamp" 2>/dev/null)" = "$want" ]; then return 0; fi
    local start=$SECONDS
    local srcs=()
    mapfile -t srcs < <(sources_of "$name" swift)
    rm -f "$OBJ/$name.stamp"
    if ! swiftc "${SWIFT_FLAGS[@]}" "${IMPORT_FLAGS[@]}" -wmo -module-name "$name" \
        -emit-module -emit-module-path "$MODS/$name.swiftmodule" \
        -c "${srcs[@]}" -o "$OBJ/$name.o" >"$LOGS/$name.log" 2>&1; then
        echo "build.sh: module $name failed:" >&2
        cat "$LOGS/$name.log" >&2
        return 1
    fi
    echo "$want" >"$OBJ/$name.stamp"
    echo "  module $name ($((SECONDS - start)) s)"
}

build_c_module() {
    local name=$1
    local want
    want=$(stamp "$name" c)
    if [ -f "$OBJ/$name.o" ] && [ "$(cat "$OBJ/$name.stamp" 2>/dev/null)" = "$want" ]; then return 0; fi
    local srcs=()
    mapfile -t srcs < <(sources_of "$name" c)
    rm -f "$OBJ/$name.stamp"
    # One C file today; combine several with ld -r if more appear.
    if [ "${#srcs[@]}" -ne 1 ]; then echo "build.sh: expected one .c file in Sources/$name" >&2; return 1; fi
    if ! clang "${CLANG_FLAGS[@]}" -I "Sources/$name/include" -c "${srcs[0]}" -o "$OBJ/$name.o" \
        >"$LOGS/$name.log" 2>&1; then
        echo "build.sh: C module $name failed:" >&2
        cat "$LOGS/$name.log" >&2
        return 1
    fi
    echo "$want" >"$OBJ/$name.stamp"
    echo "  module $name (C)"
}

link_target() {
    local target=$1
    local objs=()
    for m in $(modules_for "$target"); do objs+=("$OBJ/$m.o"); done
    local start=$SECONDS
    if ! swiftc "${SWIFT_FLAGS[@]}" "${IMPORT_FLAGS[@]}" -module-name "Fuzz_$target" \
        fuzz/targets/Common.swift "fuzz/targets/$target.swift" "${objs[@]}" \
        -o "$BIN/$target.tmp" >"$LOGS/target-$target.log" 2>&1; then
        echo "build.sh: target $target failed:" >&2
        cat "$LOGS/target-$target.log" >&2
        return 1
    fi
    mv "$BIN/$target.tmp" "$BIN/$target"
    echo "  target $target ($((SECONDS - start)) s)"
}

TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${ALL_TARGETS[@]}")
NEEDED=" "
for t in "${TARGETS[@]}"; do
    for m in $(modules_for "$t"); do NEEDED+="$m "; done
done
needs() { [[ "$NEEDED" == *" $1 "* ]]; }

echo "== fuzz build ($OPT): ${TARGETS[*]}"
begin=$SECONDS
build_module ShareProtocol
if needs ShareSystem; then
    build_c_module CShareSystem && build_module ShareSystem CShareSystem || exit 1
fi
# The two modules above those build side by side (ShareRouting is the slow one).
pids=()
if needs ShareRouting; then
    build_module ShareRouting ShareProtocol ShareSystem CShareSystem &
    pids+=($!)
fi
if needs ShareStore; then
    build_module ShareStore ShareProtocol ShareSystem CShareSystem &
    pids+=($!)
fi
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
[ $status -eq 0 ] || exit 1

running=0
pids=()
for t in "${TARGETS[@]}"; do
    link_target "$t" &
    pids+=($!)
    running=$((running + 1))
    if [ $running -ge "$JOBS" ]; then
        wait -n || status=1
        running=$((running - 1))
    fi
done
while [ $running -gt 0 ]; do
    wait -n || status=1
    running=$((running - 1))
done
[ $status -eq 0 ] || exit 1
echo "== fuzz build done in $((SECONDS - begin)) s"
