#!/usr/bin/env bash
# Tests of sharebroker.sh against a real broker: starts `sharebroker serve` on a temporary state
# directory, then uses the helper for hello, broker.status, url.open/canOpen, app.subscribe/ack,
# share.send/get/complete, errors, a raw batch and header framing.
#
#   Clients/shell/test.sh            # needs socat (apt-get install -y socat) and python3
#   SB_TRANSPORT=nc Clients/shell/test.sh    # the same over `nc -U` (OpenBSD netcat)
#
# The broker binary: $SHAREBROKER_BIN, else <repo>/.build/debug/sharebroker (swift build).
# Prints one "ok N - ..." / "not ok N - ..." line per check, then "shell: N passed, M failed";
# exits non-zero on any failure. Installs nothing.
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
BIN=${SHAREBROKER_BIN:-$repo/.build/debug/sharebroker}
PY=${PYTHON:-python3}

transport=${SB_TRANSPORT:-socat}
if [ "$transport" = socat ] && ! command -v socat >/dev/null 2>&1; then
    echo "test.sh: socat is not installed; it is needed to talk to the broker's Unix socket." >&2
    echo "test.sh: install it (e.g. apt-get install -y socat), or run with SB_TRANSPORT=nc and OpenBSD netcat." >&2
    echo "shell: 0 passed, 1 failed"
    exit 1
fi
if [ "$transport" = nc ] && ! { command -v nc >/dev/null 2>&1 && nc -h 2>&1 | grep -q -e '-U'; }; then
    echo "test.sh: SB_TRANSPORT=nc needs nc with -U (OpenBSD netcat, e.g. apt-get install -y netcat-openbsd)." >&2
    echo "shell: 0 passed, 1 failed"
    exit 1
fi
if ! command -v "$PY" >/dev/null 2>&1; then
    echo "test.sh: $PY is needed to check the JSON answers (set PYTHON)" >&2
    echo "shell: 0 passed, 1 failed"
    exit 1
fi
# Resolve the interpreter once (a pyenv shim costs ~0.2 s per start).
PY=$("$PY" -c 'import sys; print(sys.executable)') || PY=${PYTHON:-python3}
if [ ! -x "$BIN" ]; then
    echo "test.sh: no sharebroker binary at $BIN: run 'swift build' in $repo or set SHAREBROKER_BIN" >&2
    echo "shell: 0 passed, 1 failed"
    exit 1
fi

# shellcheck source=sharebroker.sh
. "$here/sharebroker.sh"
export SB_TRANSPORT="$transport"

dir=$(mktemp -d "${TMPDIR:-/tmp}/sbsh-XXXXXX")
broker_pid=
small_pid=
one_pid=
hold_pid=
cleanup() {
    for pid in $hold_pid $broker_pid $small_pid $one_pid; do
        kill -TERM "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$dir/state/apps" "$dir/state/associations"
cat > "$dir/state/apps/myapp.json" <<'JSON'
{
  "bundleID": "com.mycompany.myapp",
  "teamID": "ABCDE12345",
  "name": "My App",
  "urlSchemes": ["deeplinkmyapp"],
  "associatedDomains": ["applinks:example.com"],
  "appGroups": ["group.com.mycompany.myapp"],
  "extensions": [
    {
      "bundleID": "com.mycompany.myapp.share",
      "point": "com.apple.share-services",
      "name": "Send to My App",
      "appGroups": ["group.com.mycompany.myapp"],
      "activationRule": { "NSExtensionActivationSupportsWebURLWithMaxCount": 1 }
    }
  ]
}
JSON
cat > "$dir/state/apps/secure.json" <<'JSON'
{ "bundleID": "com.example.secure", "urlSchemes": ["secureapp"], "token": "s3cret" }
JSON
cat > "$dir/state/associations/example.com.json" <<'JSON'
{ "applinks": { "details": [ { "appIDs": ["ABCDE12345.com.mycompany.myapp"], "components": [ { "/": "/computers/*" } ] } ] } }
JSON

export SB_SOCKET="$dir/s.sock"
"$BIN" serve --socket "$SB_SOCKET" --state "$dir/state" </dev/null >"$dir/broker.log" 2>&1 &
broker_pid=$!
for _ in $(seq 1 200); do
    [ -S "$SB_SOCKET" ] && break
    if ! kill -0 "$broker_pid" 2>/dev/null; then break; fi
    sleep 0.05
done
if [ ! -S "$SB_SOCKET" ]; then
    echo "test.sh: the broker did not start; its log:" >&2
    cat "$dir/broker.log" >&2
    broker_pid=
    echo "shell: 0 passed, 1 failed"
    exit 1
fi

passed=0
failed=0
n=0
ok() { n=$((n + 1)); passed=$((passed + 1)); echo "ok $n - $1"; }
not_ok() {
    n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"
    [ -n "${2:-}" ] && printf '#   %s\n' "$2"
    return 0
}
# check DESC JSON-LINE PYTHON-EXPR: passes when EXPR (on `d`, the parsed line) is true.
check() {
    if [ -n "$2" ] && "$PY" -c 'import json, sys; d = json.loads(sys.argv[1]); sys.exit(0 if eval(sys.argv[2]) else 1)' "$2" "$3" 2>/dev/null; then
        ok "$1"
    else
        not_ok "$1" "got: ${2:-<nothing>}  expected: $3"
    fi
}
# field JSON-LINE PYTHON-EXPR: print EXPR's value.
field() { "$PY" -c 'import json, sys; d = json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
# status_is DESC EXPECTED ACTUAL
status_is() { if [ "$3" -eq "$2" ]; then ok "$1"; else not_ok "$1" "exit status $3, expected $2"; fi; }

APP=com.mycompany.myapp
EXT=com.mycompany.myapp.share

# --- the default socket, as the broker computes it -------------------------------------------
got=$(SB_SOCKET= SHAREBROKER_SOCKET= XDG_RUNTIME_DIR=/run/user/7 sb_socket)
if [ "$got" = /run/user/7/sharebroker.sock ]; then ok "sb_socket: \$XDG_RUNTIME_DIR"; else not_ok "sb_socket: \$XDG_RUNTIME_DIR" "got $got"; fi
got=$(SB_SOCKET= SHAREBROKER_SOCKET= XDG_RUNTIME_DIR=run/user/7 TMPDIR=/var/tmp/ sb_socket)
want=/var/tmp/sharebroker-$(id -u)/sharebroker.sock
if [ "$got" = "$want" ]; then ok "sb_socket: a relative \$XDG_RUNTIME_DIR is ignored"; else not_ok "sb_socket: a relative \$XDG_RUNTIME_DIR is ignored" "got $got, expected $want"; fi

# --- sb_json_string: every string round-trips (backslash, control characters, trailing newline)
for s in 'C:\temp\new' 'a\\b\"' "$(printf 'bell\a form\f esc\033 nul-less\001')" "$(printf 'two\n\nlines')" 'é😀' ''; do
    enc=$(sb_json_string "$s")
    if "$PY" -c 'import json, sys; sys.exit(0 if json.loads(sys.argv[1]) == sys.argv[2] else 1)' "$enc" "$s" 2>/dev/null; then
        ok "sb_json_string round-trips $(printf '%s' "$s" | od -An -c | tr -s ' ' | head -c 60)"
    else
        not_ok "sb_json_string round-trips" "$s -> $enc"
    fi
done
nl='ends
'
enc=$(sb_json_string "$nl")
if [ "$enc" = '"ends\n"' ]; then ok "sb_json_string keeps a trailing newline"; else not_ok "sb_json_string keeps a trailing newline" "got $enc"; fi

# --- session -------------------------------------------------------------------------------
out=$(sb_status); rc=$?
status_is "broker.status before hello exits 0" 0 "$rc"
check "broker.status before hello: version, 2 apps, no subscriber" "$out" \
    'isinstance(d["result"]["version"], str) and d["result"]["apps"] == 2 and d["result"]["subscribers"] == 0'

out=$(sb_session)
check "hello as a tool" "$(printf '%s\n' "$out" | head -n 1)" \
    'd["id"] == "sb-hello" and d["result"]["role"] == "tool" and d["result"]["protocol"] == 1'

out=$(sb_call broker.status); rc=$?
status_is "sb_call broker.status exits 0" 0 "$rc"
check "broker.status after hello counts this tool session" "$out" 'd["result"]["sessions"]["tool"] >= 1'

out=$(SB_ROLE=app SB_BUNDLE_ID=com.nobody.here sb_call broker.status 2>/dev/null); rc=$?
status_is "hello with an unknown bundle ID fails (exit 1)" 1 "$rc"
check "... with -32001" "$out" 'd["error"]["code"] == -32001'

out=$(SB_ROLE=app SB_BUNDLE_ID=com.example.secure SB_TOKEN=wrong sb_call broker.status 2>/dev/null)
check "a wrong token is -32001" "$out" 'd["error"]["code"] == -32001'
out=$(SB_ROLE=app SB_BUNDLE_ID=com.example.secure SB_TOKEN=s3cret sb_session)
check "the right token says hello as the app" "$(printf '%s\n' "$out" | head -n 1)" \
    'd["result"]["bundleID"] == "com.example.secure" and d["result"]["role"] == "app"'

out=$(SB_ROLE=none sb_call url.open '{"url":"deeplinkmyapp://x"}' 2>/dev/null)
check "url.open before hello is -32001" "$out" 'd["error"]["code"] == -32001'
out=$(sb_call no.such.method 2>/dev/null)
check "an unknown method is -32601" "$out" 'd["error"]["code"] == -32601'

# --- URLs ----------------------------------------------------------------------------------
out=$(sb_call url.canOpen '{"url":"https://example.com/computers/raspberry-pi"}')
check "url.canOpen: a universal link" "$out" \
    'd["result"] == {"canOpen": True, "app": "com.mycompany.myapp", "via": "universalLink"}'

out=$(sb_open 'deeplinkmyapp://customerdetail?id=42'); rc=$?
status_is "url.open exits 0" 0 "$rc"
check "url.open queues an event for the app (no subscriber yet)" "$out" \
    'd["result"]["app"] == "com.mycompany.myapp" and d["result"]["via"] == "scheme" and d["result"]["queued"] is True and d["result"]["delivered"] is False'
event1=$(field "$out" 'd["result"]["eventID"]')

out=$(sb_open 'nosuchscheme://thing' 2>/dev/null); rc=$?
status_is "url.open with no handler exits 1" 1 "$rc"
check "... with -32004 naming the URL" "$out" 'd["error"]["code"] == -32004 and "nosuchscheme://thing" in d["error"]["message"]'

out=$(sb_open 'nosuchscheme://thing' 'deeplinkmyapp://fallback')
check "url.open with a fallback" "$out" 'd["result"]["via"] == "fallback"'
event2=$(field "$out" 'd["result"]["eventID"]')

# --- events --------------------------------------------------------------------------------
out=$(SB_ROLE=app SB_BUNDLE_ID=$APP sb_listen 0.5); rc=$?
status_is "app.subscribe (sb_listen) exits 0" 0 "$rc"
first=$(printf '%s\n' "$out" | head -n 1)
check "the pending event arrives first, with its id and URL" "$first" \
    "d['method'] == 'app.event' and d['params']['id'] == '$event1' and d['params']['kind'] == 'openURL' and d['params']['url'] == 'deeplinkmyapp://customerdetail?id=42'"
count=$(printf '%s\n' "$out" | grep -c '"method":"app.event"')
if [ "$count" -eq 2 ]; then ok "both pending events arrive"; else not_ok "both pending events arrive" "got $count: $out"; fi

out=$(SB_ROLE=app SB_BUNDLE_ID=$APP sb_ack "$event1" "$event2")
check "app.ack acks both" "$out" 'd["result"]["acked"] == 2'
out=$(SB_ROLE=app SB_BUNDLE_ID=$APP sb_listen 0.3)
if [ -z "$out" ]; then ok "nothing is pending after the ack"; else not_ok "nothing is pending after the ack" "$out"; fi

# A live subscriber: listen in the background, open, and the event is delivered.
SB_ROLE=app SB_BUNDLE_ID=$APP sb_listen 2 >"$dir/listen.out" &
listener=$!
delivered=
for _ in $(seq 1 40); do
    sleep 0.05
    st=$(sb_status)
    [ "$(field "$st" 'd["result"]["subscribers"]')" = 1 ] && break
done
out=$(sb_open 'deeplinkmyapp://live')
check "url.open with a live subscriber: delivered" "$out" 'd["result"]["delivered"] is True and d["result"]["queued"] is False'
live=$(field "$out" 'd["result"]["eventID"]')
wait "$listener"
check "the subscriber received it" "$(grep -F "\"$live\"" "$dir/listen.out" | head -n 1)" \
    "d['params']['id'] == '$live' and d['params']['url'] == 'deeplinkmyapp://live'"
SB_ROLE=app SB_BUNDLE_ID=$APP sb_ack "$live" >/dev/null

# A takeover: another connection of the app subscribes while sb_listen listens; the broker tells
# the old one (app.subscriptionEnded), and sb_listen stops at once (not after its 20 s) with 75.
started=$(date +%s)
SB_ROLE=app SB_BUNDLE_ID=$APP sb_listen 20 >"$dir/taken.out" 2>"$dir/taken.err" &
listener=$!
for _ in $(seq 1 40); do
    sleep 0.05
    st=$(sb_status)
    [ "$(field "$st" 'd["result"]["subscribers"]')" = 1 ] && break
done
out=$(sb_open 'deeplinkmyapp://before-takeover')
check "url.open before the takeover: delivered to sb_listen" "$out" 'd["result"]["delivered"] is True'
before=$(field "$out" 'd["result"]["eventID"]')
out=$(SB_ROLE=app SB_BUNDLE_ID=$APP sb_session 'app.subscribe {}' | grep -F '"id":1')
check "another connection of the app subscribes" "$out" '"pending" in d["result"]'
wait "$listener"; rc=$?
elapsed=$(( $(date +%s) - started ))
status_is "sb_listen taken over: exit 75" 75 "$rc"
if [ "$elapsed" -lt 15 ]; then ok "... at once, not after its SECONDS"; else not_ok "... at once, not after its SECONDS" "took ${elapsed} s"; fi
check "... printing the event that came before" "$(head -n 1 "$dir/taken.out")" "d['params']['id'] == '$before'"
if grep -q -F 'took its events over' "$dir/taken.err" && grep -q -F '"method":"app.subscriptionEnded"' "$dir/taken.err" \
        && grep -q -F '"reason":"another connection of com.mycompany.myapp subscribed' "$dir/taken.err"; then
    ok "... and the broker's notice, with its reason, on stderr"
else
    not_ok "... and the broker's notice, with its reason, on stderr" "stderr: $(cat "$dir/taken.err")"
fi
SB_ROLE=app SB_BUNDLE_ID=$APP sb_ack "$before" >/dev/null
# There is no sb_unsubscribe: a one-shot connection's subscription ends with it, and another
# connection is never the subscriber.
out=$(SB_ROLE=app SB_BUNDLE_ID=$APP sb_call app.unsubscribe '{}')
check "app.unsubscribe on a connection of its own: unsubscribed false" "$out" 'd["result"] == {"unsubscribed": False}'
out=$(SB_ROLE=app SB_BUNDLE_ID=$APP sb_session 'app.subscribe {}' 'app.unsubscribe {}' | grep -F '"id":2')
check "app.subscribe then app.unsubscribe on one connection (sb_session): unsubscribed true" "$out" 'd["result"] == {"unsubscribed": True}'

out=$(sb_call app.subscribe 2>/dev/null)
check "app.subscribe as a tool is -32001" "$out" 'd["error"]["code"] == -32001'

# --- shares --------------------------------------------------------------------------------
out=$(SB_ROLE=extension SB_BUNDLE_ID=$EXT sb_call share.send '{"items":[{"url":"https://youtu.be/dQw4w9WgXcQ"}],"open":true}')
check "share.send as the extension with open: true" "$out" \
    'd["result"]["extension"] == "com.mycompany.myapp.share" and d["result"]["group"] == "group.com.mycompany.myapp" and d["result"]["eventID"]'
share=$(field "$out" 'd["result"]["shareID"]')
out=$(SB_ROLE=app SB_BUNDLE_ID=$APP sb_listen 0.3 | head -n 1)
check "the app is told through its URL scheme" "$out" \
    "d['params']['url'] == 'deeplinkmyapp://open-from-share?share=$share'"
opened=$(field "$out" 'd["params"]["id"]')
out=$(SB_ROLE=app SB_BUNDLE_ID=$APP sb_call share.get "{\"shareID\":\"$share\"}")
check "share.get gives the link" "$out" 'd["result"]["items"][0]["url"] == "https://youtu.be/dQw4w9WgXcQ"'
out=$(SB_ROLE=app SB_BUNDLE_ID=$APP sb_call share.complete "{\"shareID\":\"$share\"}")
check "share.complete" "$out" 'd["result"] == {"completed": True}'
out=$(SB_ROLE=app SB_BUNDLE_ID=$APP sb_call share.get "{\"shareID\":\"$share\"}" 2>/dev/null)
check "a completed share is -32002" "$out" 'd["error"]["code"] == -32002'
out=$(SB_ROLE=app SB_BUNDLE_ID=$APP sb_ack "$opened")
check "the app acks the open-from-share event" "$out" 'd["result"]["acked"] == 1'
out=$(SB_ROLE=extension SB_BUNDLE_ID=$EXT sb_call share.send '{"items":[{"text":"not a link"}]}' 2>/dev/null)
check "a share the activation rule refuses is -32003" "$out" 'd["error"]["code"] == -32003'

# --- raw: batch, notification, header framing ----------------------------------------------
out=$(printf '%s\n' '[{"jsonrpc":"2.0","id":1,"method":"broker.status"},{"jsonrpc":"2.0","method":"broker.status"},{"jsonrpc":"2.0","id":2,"method":"no.such"}]' | sb_raw)
check "a raw batch: two answers, notification left out" "$out" \
    'isinstance(d, list) and [x["id"] for x in d] == [1, 2] and d[1]["error"]["code"] == -32601'
out=$(printf '%s\n' '{"jsonrpc":"2.0","method":"foobar, "params": "bar", "baz]' | sb_raw)
check "invalid JSON is -32700 with id null" "$out" 'd["id"] is None and d["error"]["code"] == -32700'
body='{"jsonrpc":"2.0","id":7,"method":"broker.status"}'
out=$(printf 'Content-Length: %d\r\n\r\n%s' "${#body}" "$body" | sb_raw | tr -d '\r')
case $out in
    Content-Length:*'"id":7,"result"'*) ok "Content-Length framing is answered in kind" ;;
    *) not_ok "Content-Length framing is answered in kind" "$out" ;;
esac

# --- an error without an id is the broker's answer, not "unreachable" ------------------------
out=$(sb_call url.open '{"url": "deeplinkmyapp://x?q=a\zb"}' 2>/dev/null); rc=$?
status_is "sb_call: PARAMS the broker cannot parse exit 1 (not 69)" 1 "$rc"
check "... printing the -32700 without an id" "$out" 'd["id"] is None and d["error"]["code"] == -32700'

# --- the error the broker closes the connection with answers no request ----------------------
# A second broker with a small message limit: over it, the broker says why it closes (-32600 with
# id null and data.closing) and hangs up. That is no answer to the call: 69, the reason on stderr.
mkdir -p "$dir/small-state/apps"
"$BIN" serve --socket "$dir/small.sock" --state "$dir/small-state" --max-message 1024 </dev/null >"$dir/small.log" 2>&1 &
small_pid=$!
for _ in $(seq 1 200); do
    [ -S "$dir/small.sock" ] && break
    kill -0 "$small_pid" 2>/dev/null || break
    sleep 0.05
done
[ -S "$dir/small.sock" ] || not_ok "a broker with --max-message 1024 starts" "$(cat "$dir/small.log")"
pad=$(printf '%02000d' 0)
out=$(SB_SOCKET="$dir/small.sock" sb_call url.open "{\"url\":\"deeplinkmyapp://x?p=$pad\"}" 2>"$dir/err"); rc=$?
status_is "sb_call over the message limit: no answer, exit 69 (not 1)" 69 "$rc"
if [ -z "$out" ]; then ok "... nothing on stdout"; else not_ok "... nothing on stdout" "$out"; fi
case $(cat "$dir/err") in
    *'closed the connection'*'"closing":true'*'larger than the limit of 1024 bytes'*|*'closed the connection'*'larger than the limit of 1024 bytes'*'"closing":true'*)
        ok "... the broker's reason on stderr" ;;
    *) not_ok "... the broker's reason on stderr" "$(cat "$dir/err")" ;;
esac
out=$(SB_SOCKET="$dir/small.sock" SB_ROLE=app SB_BUNDLE_ID="com.example.$pad" sb_listen 0.2 2>"$dir/err"); rc=$?
status_is "sb_listen with a hello over the message limit: exit 69 (not 1)" 69 "$rc"
case $(cat "$dir/err") in
    *'no answer to app.subscribe'*'"closing":true'*) ok "... the broker's reason on stderr" ;;
    *) not_ok "... the broker's reason on stderr" "$(cat "$dir/err")" ;;
esac
out=$(SB_SOCKET="$dir/small.sock" sb_call url.open '{"url": "deeplinkmyapp://x?q=a\zb"}' 2>/dev/null); rc=$?
status_is "... while an error without an id and no data.closing still answers the call (exit 1)" 1 "$rc"
check "... printing it" "$out" 'd["id"] is None and d["error"]["code"] == -32700 and "data" not in d["error"]'

# race_checked DESC LOST TOTAL WHY: passes when no try of TOTAL lost the broker's closing reason.
# Over nc it is only reported: OpenBSD nc stops reading the socket at the error the kernel flags
# on it (POLLERR, ECONNRESET) once the broker has closed with the request unread, so with nc the
# reason can be lost whatever this helper does (README: "Errors without an id").
race_checked() {
    if [ "$2" -eq 0 ]; then ok "$1"
    elif [ "$transport" = nc ]; then ok "$1 # SKIP nc drops what the broker sent once it closed with the request unread (lost $2 of $3)"
    else not_ok "$1" "lost $2 of $3, e.g. $4"; fi
}

# A message far over the limit: the broker closes while socat is still writing it, and the write
# fails (broken pipe). socat must still read the reason the broker sent first (it used to exit on
# the failed write, and sb_call said "cannot reach the broker" most times). Several tries: it is a
# race.
big=$(printf '%0300000d' 0)
lost=0
for _ in 1 2 3 4 5 6 7 8 9 10; do
    SB_SOCKET="$dir/small.sock" sb_call url.open "{\"url\":\"deeplinkmyapp://x?p=$big\"}" >"$dir/out" 2>"$dir/err"; rc=$?
    case $rc:$(cat "$dir/out"):$(cat "$dir/err") in
        69::*'closed the connection'*'larger than the limit of 1024 bytes'*) ;;
        *) lost=$((lost + 1)); why="exit $rc: $(cat "$dir/out" "$dir/err" | head -c 300)" ;;
    esac
done
race_checked "sb_call with a message far over the limit (a failed write): exit 69 and the reason, 10 of 10" "$lost" 10 "${why:-}"

# --- a connection refused at once (the per-user connection limit) ----------------------------
# A broker that lets a user hold one connection; a process holds it, so each sb_call is refused
# at once: the broker says why (-32001, data.closing) and closes, often before socat has written
# the request. Exit 69 with that reason, every time, never "cannot reach the broker".
mkdir -p "$dir/one-state/apps"
"$BIN" serve --socket "$dir/one.sock" --state "$dir/one-state" --max-connections-per-user 1 </dev/null >"$dir/one.log" 2>&1 &
one_pid=$!
for _ in $(seq 1 200); do
    [ -S "$dir/one.sock" ] && break
    kill -0 "$one_pid" 2>/dev/null || break
    sleep 0.05
done
[ -S "$dir/one.sock" ] || not_ok "a broker with --max-connections-per-user 1 starts" "$(cat "$dir/one.log")"
# The holder says "held" once the broker has answered it (so it counts), then keeps the connection.
"$PY" -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"broker.status\"}\n")
s.recv(65536)
print("held", flush=True)
time.sleep(120)
' "$dir/one.sock" >"$dir/hold.out" 2>&1 &
hold_pid=$!
for _ in $(seq 1 200); do
    grep -q held "$dir/hold.out" 2>/dev/null && break
    kill -0 "$hold_pid" 2>/dev/null || break
    sleep 0.05
done
lost=0
for _ in $(seq 1 20); do
    SB_SOCKET="$dir/one.sock" sb_call broker.status >"$dir/out" 2>"$dir/err"; rc=$?
    case $rc:$(cat "$dir/out"):$(cat "$dir/err") in
        69::*'closed the connection'*'per-user limit'*'"closing":true'*) ;;
        *) lost=$((lost + 1)); why="exit $rc: $(cat "$dir/out" "$dir/err" | head -c 300)" ;;
    esac
done
race_checked "sb_call refused at once by the per-user limit: exit 69 and the broker's reason, 20 of 20" "$lost" 20 "${why:-}"
lost=0
for _ in 1 2 3 4 5; do
    SB_SOCKET="$dir/one.sock" SB_ROLE=app SB_BUNDLE_ID=$APP sb_listen 0 >"$dir/out" 2>"$dir/err"; rc=$?
    case $rc:$(cat "$dir/out"):$(cat "$dir/err") in
        69::*'no answer to app.subscribe'*'per-user limit'*) ;;
        *) lost=$((lost + 1)); why="exit $rc: $(cat "$dir/out" "$dir/err" | head -c 300)" ;;
    esac
done
race_checked "sb_listen refused at once: exit 69 and the broker's reason, 5 of 5" "$lost" 5 "${why:-}"
kill -TERM "$hold_pid" 2>/dev/null; wait "$hold_pid" 2>/dev/null; hold_pid=

# --- unreachable -----------------------------------------------------------------------------
out=$(SB_SOCKET="$dir/missing.sock" sb_status 2>&1); rc=$?
status_is "an unreachable broker exits 69" 69 "$rc"
case $out in *"$dir/missing.sock"*) ok "... naming the socket" ;; *) not_ok "... naming the socket" "$out" ;; esac

out=$(sb_status)
check "no event left pending" "$out" 'd["result"]["pendingEvents"] == 0 and d["result"]["pendingShares"] == 0'

echo "shell: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
