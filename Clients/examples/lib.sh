# Shared by the examples' run.sh scripts (sourced, not run). Each example gets a private broker on a
# temporary state directory, its own socket, and a cleanup that stops everything it started.
#
#   . "$(dirname "$0")/../lib.sh"
#   example_begin "000-youtube-share" "a share extension hands a YouTube link to its app"
#   install_app apps/myapp.json                # into $STATE/apps/ (launch paths made absolute)
#   start_broker
#   ... run the example's programs ...
#   check "the share was completed" test -z "$(...)"
#   example_end                                # prints the outcome; exit status 1 on any failure
#
# Settings: SHAREBROKER_BIN (default <repo>/.build/debug/sharebroker), SHARECLIENT_BIN (default:
# shareclient next to the broker), PYTHON (default python3), KEEP=1 keeps the temporary directory.

set -u

EXAMPLES=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$EXAMPLES/../.." && pwd)
SHAREBROKER_BIN=${SHAREBROKER_BIN:-$REPO/.build/debug/sharebroker}
SHARECLIENT_BIN=${SHARECLIENT_BIN:-$(dirname "$SHAREBROKER_BIN")/shareclient}
PYTHON=${PYTHON:-python3}
# The programs import the standard-library Python client from the repository.
export PYTHONPATH="$REPO/Clients/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export PYTHONDONTWRITEBYTECODE=1

EXAMPLE_NAME=""
EXAMPLE_DIR=""
TMP=""
STATE=""
SOCK=""
BROKER_PID=""
BACKGROUND_PIDS=()
FAILURES=0
CHECKS=0

say() { printf '%s\n' "$*"; }

# example_begin NAME TITLE: temporary directory, traps, tool checks.
example_begin() {
    EXAMPLE_NAME=$1
    EXAMPLE_DIR=$(cd "$(dirname "$0")" && pwd)
    say "== $1: $2"
    if [ ! -x "$SHAREBROKER_BIN" ]; then
        say "error: sharebroker not found at $SHAREBROKER_BIN (run 'swift build' in $REPO, or set SHAREBROKER_BIN)" >&2
        exit 2
    fi
    if ! command -v "$PYTHON" >/dev/null 2>&1; then
        say "error: $PYTHON not found (the examples' programs are Python 3.9+, standard library only)" >&2
        exit 2
    fi
    # A short path: a Unix socket path must fit in ~108 bytes.
    TMP=$(mktemp -d "/tmp/sbex-XXXXXX")
    STATE=$TMP/state
    SOCK=$TMP/s.sock
    mkdir -p "$STATE/apps" "$STATE/associations"
    # Every client below (Python and shareclient) finds the private broker through this.
    export SHAREBROKER_SOCKET=$SOCK
    trap example_cleanup EXIT
    trap 'exit 130' INT TERM
}

# install_app FILE [NAME]: copies a manifest into STATE/apps/. A `launch` argument that names a file of
# the example folder (e.g. "app.py") is made absolute, since the broker starts it from its own directory.
install_app() {
    local src=$EXAMPLE_DIR/$1 name=${2:-$(basename "$1")}
    "$PYTHON" - "$src" "$STATE/apps/$name" "$EXAMPLE_DIR" <<'PY'
import json, os, sys
src, dst, here = sys.argv[1:4]
with open(src) as f:
    m = json.load(f)
launch = m.get("launch")
if isinstance(launch, list):
    m["launch"] = [os.path.join(here, a) if os.path.isfile(os.path.join(here, a)) else a for a in launch]
    if m["launch"] and m["launch"][0] == "python3":
        m["launch"][0] = os.environ.get("PYTHON", "python3")
with open(dst, "w") as f:
    json.dump(m, f, indent=2)
PY
}

# install_association FILE HOST: STATE/associations/HOST.json (the apple-app-site-association HOST serves).
install_association() {
    cp "$EXAMPLE_DIR/$1" "$STATE/associations/$2.json"
}

# start_broker: runs `sharebroker serve` on the private socket and state directory; waits until it answers.
start_broker() {
    "$SHAREBROKER_BIN" serve --socket "$SOCK" --state "$STATE" --log-level info >"$TMP/broker.log" 2>&1 &
    BROKER_PID=$!
    local i
    for i in $(seq 1 200); do
        if ! kill -0 "$BROKER_PID" 2>/dev/null; then
            say "error: the broker exited at start:" >&2
            cat "$TMP/broker.log" >&2
            exit 1
        fi
        if "$PYTHON" -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "$SOCK" 2>/dev/null; then
            say "   broker: pid $BROKER_PID, socket $SOCK, state $STATE"
            return 0
        fi
        sleep 0.02
    done
    say "error: the broker did not listen on $SOCK within 4 s" >&2
    cat "$TMP/broker.log" >&2
    exit 1
}

# background CMD...: starts a program of the example in the background; its pid is stopped at the end.
background() {
    "$@" &
    BACKGROUND_PIDS+=("$!")
    LAST_PID=$!
}

# wait_pid PID SECONDS: waits for a background program to exit; its status, or 124 after SECONDS.
wait_pid() {
    local pid=$1 limit=$2 waited=0
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$waited" -ge $((limit * 50)) ]; then return 124; fi
        sleep 0.02
        waited=$((waited + 1))
    done
    wait "$pid"
}

# wait_for_line FILE PATTERN SECONDS: waits until FILE has a line matching the grep -E PATTERN.
wait_for_line() {
    local file=$1 pattern=$2 limit=$3 waited=0
    while ! grep -Eq -- "$pattern" "$file" 2>/dev/null; do
        if [ "$waited" -ge $((limit * 50)) ]; then return 1; fi
        sleep 0.02
        waited=$((waited + 1))
    done
}

# app_log BUNDLE: the log of an app the broker launched on demand (its stderr).
app_log() { printf '%s\n' "$STATE/logs/$1.log"; }

# check LABEL CMD...: runs CMD; "ok - LABEL" when it succeeds, "FAIL - LABEL" otherwise.
check() {
    local label=$1
    shift
    CHECKS=$((CHECKS + 1))
    if "$@"; then
        say "ok - $label"
    else
        say "FAIL - $label"
        FAILURES=$((FAILURES + 1))
    fi
}

# contains FILE PATTERN: FILE has a line matching the grep -E PATTERN.
contains() { grep -Eq -- "$2" "$1" 2>/dev/null; }

# rpc [--as BUNDLE] [--role ROLE] METHOD [PARAMS]: one call through the Python client's command line.
rpc() { "$PYTHON" -m sharebroker "$@"; }

example_end() {
    if [ "$FAILURES" -eq 0 ]; then
        say "$EXAMPLE_NAME: passed ($CHECKS checks)"
        exit 0
    fi
    say "$EXAMPLE_NAME: FAILED ($FAILURES of $CHECKS checks)"
    say "--- broker log (last lines)"
    tail -n 30 "$TMP/broker.log" 2>/dev/null
    for f in "$STATE"/logs/*.log; do
        [ -f "$f" ] || continue
        say "--- $(basename "$f")"
        tail -n 30 "$f"
    done
    exit 1
}

example_cleanup() {
    local pid
    for pid in "${BACKGROUND_PIDS[@]+"${BACKGROUND_PIDS[@]}"}"; do
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    if [ -n "$BROKER_PID" ] && kill -0 "$BROKER_PID" 2>/dev/null; then
        kill -TERM "$BROKER_PID" 2>/dev/null
        local i
        for i in $(seq 1 300); do
            kill -0 "$BROKER_PID" 2>/dev/null || break
            sleep 0.02
        done
        kill -KILL "$BROKER_PID" 2>/dev/null
        wait "$BROKER_PID" 2>/dev/null
    fi
    if [ -n "$TMP" ] && [ -z "${TMP_DONE:-}" ]; then
        TMP_DONE=1  # (cleanup may run twice: explicitly, then on EXIT)
        if [ "${KEEP:-0}" = 1 ]; then
            say "   kept $TMP"
        else
            rm -rf "$TMP"
        fi
    fi
}

# need_shareclient: the example also uses the shareclient command line.
need_shareclient() {
    if [ ! -x "$SHARECLIENT_BIN" ]; then
        say "error: shareclient not found at $SHARECLIENT_BIN (run 'swift build', or set SHARECLIENT_BIN)" >&2
        exit 2
    fi
}
