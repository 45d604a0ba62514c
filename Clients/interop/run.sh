#!/usr/bin/env bash
# Interop suites: real third-party JSON-RPC client libraries against a real sharebroker.
#
#   bash Clients/interop/run.sh
#
# Builds the debug broker (`swift build --product sharebroker`; skipped when SHAREBROKER_BIN is set
# or SHAREBROKER_INTEROP_NO_BUILD=1), installs what the suites need when it is missing (Debian
# packages with apt-get, PyPI packages from requirements.txt with pip), runs each suite, prints a
# summary and, last, one line "interop: N passed, M failed".
#
# Exits non-zero when a test failed, or when a suite could not be run at all (its library could not
# be installed: reported as NOT RUN) unless SHAREBROKER_INTEROP_ALLOW_MISSING=1.
#
# Environment: PYTHON (the Python for the PyPI suites; default python3), SHAREBROKER_INTEROP_
# SYSTEM_PYTHON (Debian's Python for jsonrpc-glib; default /usr/bin/python3),
# SHAREBROKER_INTEROP_SUITES (space-separated names to run only those), SHAREBROKER_INTEROP_ONLY
# (a substring of test names, for the Python suites).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
PY=${PYTHON:-python3}
SYS_PY=${SHAREBROKER_INTEROP_SYSTEM_PYTHON:-/usr/bin/python3}
allow_missing=${SHAREBROKER_INTEROP_ALLOW_MISSING:-0}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sbinterop-run-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore DEBIAN_FRONTEND=noninteractive

echo "== interop: broker"
if [ -n "${SHAREBROKER_BIN:-}" ]; then
    bin=$SHAREBROKER_BIN
else
    if [ "${SHAREBROKER_INTEROP_NO_BUILD:-0}" != 1 ]; then
        (cd "$repo" && swift build --product sharebroker) || { echo "interop: swift build failed"; echo "interop: 0 passed, 1 failed"; exit 1; }
    fi
    bin=$repo/.build/debug/sharebroker
fi
if [ ! -x "$bin" ]; then
    echo "interop: no broker binary at $bin"
    echo "interop: 0 passed, 1 failed"
    exit 1
fi
# A private copy: a rebuild while the suites run ("Text file busy") does not disturb them.
cp "$bin" "$tmp/sharebroker"
export SHAREBROKER_BIN=$tmp/sharebroker
echo "broker: $bin ($("$SHAREBROKER_BIN" --version 2>/dev/null || echo '?'))"

# ---------------------------------------------------------------------------------------------
echo "== interop: dependencies"
apt_packages="golang-go golang-github-sourcegraph-jsonrpc2-dev python3-gi gir1.2-jsonrpc-1.0 gir1.2-json-1.0 g++ libjsonrpccpp-dev"
missing_apt=""
for p in $apt_packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing_apt="$missing_apt $p"
done
if [ -n "$missing_apt" ]; then
    echo "installing Debian packages:$missing_apt"
    if command -v apt-get >/dev/null 2>&1; then
        sudo=""
        [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo="sudo -n"
        # One at a time, so that a package that cannot be had does not keep the others out.
        $sudo apt-get update -qq >/dev/null 2>&1 || echo "warning: apt-get update failed"
        for p in $missing_apt; do
            $sudo apt-get install -y -qq --no-install-recommends "$p" >"$tmp/apt-$p.log" 2>&1 \
                || { echo "warning: apt-get install $p failed:"; tail -n 3 "$tmp/apt-$p.log"; }
        done
    else
        echo "warning: no apt-get here"
    fi
fi
pip_needed=0
"$PY" -c "import pylsp_jsonrpc, jsonrpcclient, jsonrpc, jsonrpclib, tinyrpc, openrpc, jsonschema" 2>/dev/null || pip_needed=1
if [ "$pip_needed" = 1 ]; then
    echo "installing PyPI packages (requirements.txt) for $PY"
    "$PY" -m pip install -q -r "$here/requirements.txt" 2>&1 | grep -v -i "warning" | tail -n 5
fi

# ---------------------------------------------------------------------------------------------
total_passed=0
total_failed=0
summary=()
not_run=0

wanted() {
    [ -z "${SHAREBROKER_INTEROP_SUITES:-}" ] && return 0
    case " $SHAREBROKER_INTEROP_SUITES " in *" $1 "*) return 0 ;; esac
    return 1
}

skip_suite() {  # NAME REASON
    summary+=("NOT RUN  $1: $2")
    not_run=$((not_run + 1))
    echo "!! NOT RUN $1: $2"
}

# run_suite NAME PREFIX COMMAND...: runs it (at most 5 minutes), streams its output and adds up
# its summary line "PREFIX: N passed, M failed"; a suite that fails without one counts 1 failure.
run_suite() {
    name=$1 prefix=$2
    shift 2
    echo "== interop: $name"
    started=$(date +%s)
    timeout 300 "$@" >"$tmp/$name.out" 2>&1
    status=$?
    cat "$tmp/$name.out"
    line=$(grep -E "^$prefix: [0-9]+ passed, [0-9]+ failed" "$tmp/$name.out" | tail -n 1)
    p=0 f=0
    if [ -n "$line" ]; then
        p=$(printf '%s\n' "$line" | sed -E 's/^.*: ([0-9]+) passed, ([0-9]+) failed.*/\1/')
        f=$(printf '%s\n' "$line" | sed -E 's/^.*: ([0-9]+) passed, ([0-9]+) failed.*/\2/')
    fi
    if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "$name: exited with status $status$([ "$status" -eq 124 ] && echo ' (timed out)')"
        f=1
    fi
    secs=$(( $(date +%s) - started ))
    total_passed=$((total_passed + p))
    total_failed=$((total_failed + f))
    if [ "$f" -eq 0 ]; then
        summary+=("PASS     $name: $p passed (${secs}s)")
    else
        summary+=("FAIL     $name: $p passed, $f failed (${secs}s)")
    fi
}

py_suite() {  # NAME PREFIX MODULES SCRIPT
    name=$1 prefix=$2 modules=$3 script=$4
    wanted "$name" || return 0
    if ! "$PY" -c "import $modules" 2>"$tmp/$name.import"; then
        skip_suite "$name" "cannot import $modules with $PY ($(tail -n 1 "$tmp/$name.import"))"
        return 0
    fi
    run_suite "$name" "$prefix" "$PY" "$here/$script"
}

cd "$here" || exit 1

py_suite pylsp_jsonrpc pylsp_jsonrpc pylsp_jsonrpc test_pylsp_jsonrpc.py
py_suite jsonrpcclient jsonrpcclient jsonrpcclient test_jsonrpcclient.py
py_suite json-rpc json-rpc jsonrpc test_json_rpc.py
py_suite jsonrpclib-pelix jsonrpclib-pelix jsonrpclib test_jsonrpclib_pelix.py
py_suite tinyrpc tinyrpc tinyrpc test_tinyrpc.py
py_suite openrpc-conformance openrpc-conformance "openrpc, jsonschema, jsonrpcclient" test_openrpc_conformance.py

if wanted jsonrpc-glib; then
    glib_check="import gi; gi.require_version('Jsonrpc', '1.0'); gi.require_version('Json', '1.0'); from gi.repository import Jsonrpc, Json"
    if [ ! -x "$SYS_PY" ]; then
        skip_suite jsonrpc-glib "no $SYS_PY (Debian's python3, for python3-gi)"
    elif ! "$SYS_PY" -c "$glib_check" 2>"$tmp/glib.import"; then
        skip_suite jsonrpc-glib "python3-gi / gir1.2-jsonrpc-1.0 / gir1.2-json-1.0 not usable ($(tail -n 1 "$tmp/glib.import"))"
    else
        run_suite jsonrpc-glib jsonrpc-glib "$SYS_PY" "$here/test_jsonrpc_glib.py"
    fi
fi

if wanted go-jsonrpc2; then
    gopath=/usr/share/gocode
    if ! command -v go >/dev/null 2>&1; then
        skip_suite go-jsonrpc2 "no go toolchain (golang-go)"
    elif [ ! -f "$gopath/src/github.com/sourcegraph/jsonrpc2/jsonrpc2.go" ]; then
        skip_suite go-jsonrpc2 "no $gopath/src/github.com/sourcegraph/jsonrpc2 (golang-github-sourcegraph-jsonrpc2-dev)"
    else
        run_suite go-jsonrpc2 go-jsonrpc2 bash "$here/go/run.sh"
    fi
fi

if wanted libjsonrpccpp; then
    if ! command -v g++ >/dev/null 2>&1; then
        skip_suite libjsonrpccpp "no g++"
    elif [ ! -f /usr/include/jsonrpccpp/client/connectors/unixdomainsocketclient.h ]; then
        skip_suite libjsonrpccpp "no libjsonrpccpp-dev"
    elif ! g++ -std=c++11 -Wall -Wno-deprecated -o "$tmp/interop-cpp" "$here/cpp/interop.cpp" \
            -ljsonrpccpp-client -ljsonrpccpp-common -ljsoncpp >"$tmp/cpp-build.log" 2>&1; then
        cat "$tmp/cpp-build.log"
        summary+=("FAIL     libjsonrpccpp: does not compile")
        total_failed=$((total_failed + 1))
    else
        run_suite libjsonrpccpp libjsonrpccpp "$PY" "$here/fixture.py" run -- "$tmp/interop-cpp"
    fi
fi

# ---------------------------------------------------------------------------------------------
echo
echo "== interop summary"
for line in "${summary[@]}"; do
    echo "$line"
done
if [ "$not_run" -gt 0 ]; then
    echo
    echo "!! $not_run suite(s) NOT RUN: their library could not be installed or loaded (see above)."
    if [ "$allow_missing" != 1 ]; then
        echo "!! failing for that; set SHAREBROKER_INTEROP_ALLOW_MISSING=1 to let missing libraries pass."
    fi
fi
echo "interop: $total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ] || exit 1
# Even with missing libraries allowed, a run that tested nothing is no pass (an install step that
# broke for every library would look the same as a mirror outage).
if [ "$total_passed" -eq 0 ]; then echo "!! no interop test ran at all"; exit 1; fi
[ "$not_run" -eq 0 ] || [ "$allow_missing" = 1 ] || exit 1
exit 0
