# sharebroker.sh: talk to sharebroker (JSON-RPC 2.0 over a Unix socket) from a POSIX shell.
#
# Source it, then call the functions:
#
#   . Clients/shell/sharebroker.sh
#   sb_call broker.status                                   # hello as a tool, then the call
#   sb_call url.open '{"url":"deeplinkmyapp://item?id=42"}'
#   SB_ROLE=app SB_BUNDLE_ID=com.mycompany.myapp sb_listen 5
#
# Transport: `socat` (preferred) or `nc -U` (OpenBSD netcat). Every function opens a new
# connection, and a session lives as long as its connection, so each one sends `hello` and its
# request(s) together, one JSON text per line (the broker's default newline framing).
#
# Settings (environment variables):
#   SB_SOCKET      the socket; default $SHAREBROKER_SOCKET, else $XDG_RUNTIME_DIR/sharebroker.sock
#                  (when absolute),
#                  else ${TMPDIR:-/tmp}/sharebroker-UID/sharebroker.sock (the broker's default)
#   SB_ROLE        role for hello: tool (default), app, extension; "none" sends no hello
#   SB_BUNDLE_ID   bundle ID for role app/extension
#   SB_TOKEN       token, when the manifest sets one
#   SB_TRANSPORT   socat or nc (default: socat when installed, else nc)
#   SB_WAIT        seconds to wait for answers after the requests are sent (default 5; the
#                  broker closes the connection as soon as it has answered, so this is a cap;
#                  socat only: with nc the connection ends when the broker closes it)
#
# Exit status of sb_call and friends: 0 ok, 1 the broker answered an error, 64 usage error,
# 69 broker unreachable (or no socat/nc), or it closed the connection without an answer (its
# reason, when it gave one, on stderr); sb_listen: 75 when another connection of the app
# subscribed and took its events over (app.subscriptionEnded, on stderr).

# The socket path the functions use.
sb_socket() {
    if [ -n "${SB_SOCKET:-}" ]; then
        printf '%s\n' "$SB_SOCKET"
    elif [ -n "${SHAREBROKER_SOCKET:-}" ]; then
        printf '%s\n' "$SHAREBROKER_SOCKET"
    elif case "${XDG_RUNTIME_DIR:-}" in /*) true ;; *) false ;; esac; then  # absolute (a relative one is ignored)
        printf '%s\n' "$XDG_RUNTIME_DIR/sharebroker.sock"
    else
        _sb_tmp=${TMPDIR:-/tmp}
        while [ "${#_sb_tmp}" -gt 1 ] && [ "${_sb_tmp%/}" != "$_sb_tmp" ]; do _sb_tmp=${_sb_tmp%/}; done
        printf '%s/sharebroker-%s/sharebroker.sock\n' "$_sb_tmp" "$(id -u)"
    fi
}

# The transport to use: $SB_TRANSPORT (socat or nc) when set, else socat, else nc; status 69
# and a message when there is none.
sb_transport() {
    case ${SB_TRANSPORT:-} in
        socat|'')
            if command -v socat >/dev/null 2>&1; then echo socat; return 0; fi
            if [ -n "${SB_TRANSPORT:-}" ]; then
                echo "sharebroker.sh: socat is not installed (e.g. apt-get install -y socat)" >&2
                return 69
            fi ;;
        nc) ;;
        *) echo "sharebroker.sh: SB_TRANSPORT must be socat or nc, not '$SB_TRANSPORT'" >&2; return 69 ;;
    esac
    if command -v nc >/dev/null 2>&1 && nc -h 2>&1 | grep -q -e '-U'; then
        echo nc
        return 0
    fi
    if [ "${SB_TRANSPORT:-}" = nc ]; then
        echo "sharebroker.sh: SB_TRANSPORT=nc needs nc with -U (OpenBSD netcat, e.g. apt-get install -y netcat-openbsd)" >&2
        return 69
    fi
    echo "sharebroker.sh: neither socat nor nc (with -U, e.g. OpenBSD netcat) is installed; install socat (e.g. apt-get install -y socat)" >&2
    return 69
}

# A JSON string literal for $1 (escapes backslash, double quote and every control character;
# a trailing newline is kept). Character by character, with no gsub: awks differ in what a
# backslash in gsub's replacement means (with mawk, a\b came out as "a\b": a backspace).
sb_json_string() {
    # The "." keeps a trailing newline as a record separator; it is dropped again in END.
    printf '%s.' "$1" | awk '
        function emit(s,    i, n, c) {
            n = length(s)
            for (i = 1; i <= n; i++) {
                c = substr(s, i, 1)
                if (c == "\\") print "\\\\"
                else if (c == "\"") print "\\\""
                else if (c in ctl) print ctl[c]
                else print c
            }
        }
        BEGIN {
            ORS = ""
            for (i = 1; i < 32; i++) ctl[sprintf("%c", i)] = sprintf("\\u%04x", i)
            ctl["\t"] = "\\t"; ctl["\r"] = "\\r"
            print "\""
        }
        { if (NR > 1) { emit(prev); print "\\n" } prev = $0 }
        END { emit(substr(prev, 1, length(prev) - 1)); print "\"" }'
}

# sb_request ID METHOD [PARAMS-JSON]: print one request line. ID is printed as given, so quote
# string ids yourself ('"a"') or pass a number.
sb_request() {
    if [ -n "${3:-}" ]; then
        printf '{"jsonrpc":"2.0","id":%s,"method":"%s","params":%s}\n' "$1" "$2" "$3"
    else
        printf '{"jsonrpc":"2.0","id":%s,"method":"%s"}\n' "$1" "$2"
    fi
}

# sb_notification METHOD [PARAMS-JSON]: print one notification line (no id, never answered).
sb_notification() {
    if [ -n "${2:-}" ]; then
        printf '{"jsonrpc":"2.0","method":"%s","params":%s}\n' "$1" "$2"
    else
        printf '{"jsonrpc":"2.0","method":"%s"}\n' "$1"
    fi
}

# The hello request for SB_ROLE/SB_BUNDLE_ID/SB_TOKEN (id "sb-hello"); nothing for SB_ROLE=none.
sb_hello_request() {
    _sb_role=${SB_ROLE:-tool}
    [ "$_sb_role" = none ] && return 0
    _sb_params="{\"role\":$(sb_json_string "$_sb_role")"
    [ -n "${SB_BUNDLE_ID:-}" ] && _sb_params="$_sb_params,\"bundleID\":$(sb_json_string "$SB_BUNDLE_ID")"
    [ -n "${SB_TOKEN:-}" ] && _sb_params="$_sb_params,\"token\":$(sb_json_string "$SB_TOKEN")"
    sb_request '"sb-hello"' hello "$_sb_params}"
}

# sb_raw [WAIT]: send stdin (JSON lines) on one connection and print every line the broker sends
# (responses and notifications), waiting up to WAIT seconds (default $SB_WAIT or 5) after stdin
# ends. Status 69 when the broker cannot be reached.
sb_raw() {
    _sb_wait=${1:-${SB_WAIT:-5}}
    _sb_sock=$(sb_socket)
    _sb_tr=$(sb_transport) || return 69
    if [ ! -S "$_sb_sock" ]; then
        echo "sharebroker.sh: no broker socket at $_sb_sock (is 'sharebroker serve' running? set SB_SOCKET)" >&2
        return 69
    fi
    if [ "$_sb_tr" = socat ]; then
        # cool-write: a write that fails because the broker has closed the connection (EPIPE,
        # ECONNRESET: it refused the connection at once, or a message was over its size limit)
        # does not end socat with an error; it stops sending and still reads, up to WAIT seconds,
        # what the broker said before closing: the error saying why (data.closing). Without it
        # socat exited on the broken pipe and that reason was lost.
        socat -t "$_sb_wait" - "UNIX-CONNECT:$_sb_sock,cool-write" || {
            echo "sharebroker.sh: cannot reach the broker at $_sb_sock" >&2
            return 69
        }
    else
        # -N: shut the write side down at the end of stdin; the broker then answers and closes.
        # (-q would wait its full time even after the broker closed.) WAIT does not apply.
        nc -U -N "$_sb_sock" || {
            echo "sharebroker.sh: cannot reach the broker at $_sb_sock" >&2
            return 69
        }
    fi
}

# sb_session 'METHOD [PARAMS-JSON]'...: hello, then each request (ids 1, 2, ...) on one
# connection; prints every line the broker sends (hello's answer first).
sb_session() {
    {
        sb_hello_request
        _sb_n=0
        for _sb_req in "$@"; do
            _sb_n=$((_sb_n + 1))
            _sb_m=${_sb_req%% *}
            _sb_p=
            [ "$_sb_m" != "$_sb_req" ] && _sb_p=${_sb_req#* }
            sb_request "$_sb_n" "$_sb_m" "$_sb_p"
        done
    } | sb_raw
}

# _sb_closing OUTPUT: the error without an id the broker says last when it closes the connection
# (its data is {"closing":true}: a connection refused at once, a message over its size limit, a
# session a manifest reload ended), if OUTPUT has one. It answers no request.
_sb_closing() {
    printf '%s\n' "$1" | grep -F '"id":null,"error"' | grep -F '"closing":true' | head -n 1
}

# sb_call METHOD [PARAMS-JSON]: say hello (SB_ROLE, default tool), call METHOD and print its
# response line. Status 0 for a result, 1 for an error (the error line is printed on stdout
# and its message on stderr), 69 unreachable. A failed hello is reported the same way.
sb_call() {
    if [ $# -lt 1 ] || [ $# -gt 2 ]; then
        echo "usage: sb_call METHOD [PARAMS-JSON]" >&2
        return 64
    fi
    _sb_out=$({ sb_hello_request; sb_request '"sb-call"' "$1" "${2:-}"; } | sb_raw)
    # A transport that failed after the broker said why it closed the connection still gives
    # that reason (below); without one, the broker was unreachable.
    if [ $? -ne 0 ] && [ -z "$(_sb_closing "$_sb_out")" ]; then return 69; fi
    _sb_hello=$(printf '%s\n' "$_sb_out" | grep -F '"id":"sb-hello"')
    case $_sb_hello in
        *'"id":"sb-hello","error"'*)
            printf '%s\n' "$_sb_hello"
            echo "sharebroker.sh: hello refused: $_sb_hello" >&2
            return 1 ;;
    esac
    _sb_line=$(printf '%s\n' "$_sb_out" | grep -F '"id":"sb-call"')
    if [ -z "$_sb_line" ]; then
        # The broker answers a request it cannot parse (e.g. PARAMS that are not JSON) with an
        # error whose id is null: an error (1), not an unreachable broker. The one it closes the
        # connection with (data.closing: a message over its size limit, a connection refused at
        # once) answers no request: no answer (69), that error the reason.
        _sb_line=$(printf '%s\n' "$_sb_out" | grep -F '"id":null,"error"' | grep -v -F '"closing":true' | head -n 1)
        if [ -n "$_sb_line" ]; then
            printf '%s\n' "$_sb_line"
            echo "sharebroker.sh: $1 failed: $_sb_line" >&2
            return 1
        fi
        _sb_why=$(_sb_closing "$_sb_out")
        if [ -n "$_sb_why" ]; then
            echo "sharebroker.sh: no answer to $1: the broker at $(sb_socket) closed the connection: $_sb_why" >&2
            return 69
        fi
        echo "sharebroker.sh: no answer to $1 from the broker at $(sb_socket)" >&2
        return 69
    fi
    printf '%s\n' "$_sb_line"
    case $_sb_line in
        *'"id":"sb-call","result"'*) return 0 ;;
        *) echo "sharebroker.sh: $1 failed: $_sb_line" >&2; return 1 ;;
    esac
}

# sb_status: broker.status without hello (allowed before hello).
sb_status() {
    SB_ROLE=none sb_call broker.status
}

# sb_open URL [FALLBACK]: url.open as the current role.
sb_open() {
    if [ -n "${2:-}" ]; then
        sb_call url.open "{\"url\":$(sb_json_string "$1"),\"fallback\":$(sb_json_string "$2")}"
    else
        sb_call url.open "{\"url\":$(sb_json_string "$1")}"
    fi
}

# sb_listen SECONDS: hello as SB_ROLE=app/SB_BUNDLE_ID, app.subscribe, and print the app.event
# lines that arrive within SECONDS (pending ones first). Events stay pending until acked:
# sb_ack ID... (any connection of the app may ack). When another connection of the app subscribes
# meanwhile, it takes the events over and the broker says so (app.subscriptionEnded): sb_listen
# then stops at once (nothing more would come), prints the events that came before, and exits 75
# with the notice on stderr. (The subscription ends with the connection, when sb_listen returns:
# there is no sb_unsubscribe.)
sb_listen() {
    _sb_secs=${1:-5}
    _sb_file=$(mktemp "${TMPDIR:-/tmp}/sb_listen-XXXXXX") || {
        echo "sharebroker.sh: sb_listen: cannot create a temporary file" >&2
        return 69
    }
    {
        sb_hello_request
        sb_request '"sb-subscribe"' app.subscribe '{"takeoverNotice":true}'
        # Keep the connection open for SECONDS, or until the broker says another subscriber
        # took the events over (the end of stdin then closes the connection).
        sleep "$_sb_secs" >/dev/null 2>&1 &
        _sb_sleep=$!
        while kill -0 "$_sb_sleep" 2>/dev/null; do
            if grep -q -F '"method":"app.subscriptionEnded"' "$_sb_file" 2>/dev/null; then
                kill "$_sb_sleep" 2>/dev/null
                break
            fi
            sleep 0.2
        done
        wait "$_sb_sleep" 2>/dev/null
    } | sb_raw 1 >"$_sb_file"
    _sb_rc=$?
    _sb_out=$(cat "$_sb_file")
    rm -f "$_sb_file"
    if [ "$_sb_rc" -ne 0 ] && [ -z "$(_sb_closing "$_sb_out")" ]; then return 69; fi
    _sb_sub=$(printf '%s\n' "$_sb_out" | grep -F '"id":"sb-subscribe"')
    case $_sb_sub in
        *'"id":"sb-subscribe","result"'*) ;;
        *) _sb_why=$(_sb_closing "$_sb_out")
           if [ -z "$_sb_sub" ] && [ -n "$_sb_why" ]; then
               echo "sharebroker.sh: no answer to app.subscribe: the broker at $(sb_socket) closed the connection: $_sb_why" >&2
               return 69
           fi
           echo "sharebroker.sh: app.subscribe failed: $(printf '%s\n' "$_sb_out" | grep -F '"error"' | head -n 1)" >&2
           return 1 ;;
    esac
    printf '%s\n' "$_sb_out" | grep -F '"method":"app.event"'
    _sb_end=$(printf '%s\n' "$_sb_out" | grep -F '"method":"app.subscriptionEnded"' | head -n 1)
    if [ -n "$_sb_end" ]; then
        echo "sharebroker.sh: another connection of the app subscribed and took its events over: $_sb_end" >&2
        return 75
    fi
    return 0
}

# sb_ack ID...: acknowledge events (as SB_ROLE=app/SB_BUNDLE_ID).
sb_ack() {
    _sb_ids=
    for _sb_id in "$@"; do
        _sb_ids="${_sb_ids:+$_sb_ids,}$(sb_json_string "$_sb_id")"
    done
    sb_call app.ack "{\"ids\":[$_sb_ids]}"
}
