#!/usr/bin/env bash
# Seed 000 end to end: a share extension shares a YouTube link with open=true; the broker stores it
# in the App Group and launches the app on demand; the app fetches, completes and acknowledges it.
. "$(dirname "$0")/../lib.sh"
example_begin "000-youtube-share" "a share extension hands a YouTube link to its app"

install_app apps/myapp.json
start_broker
LOG=$(app_log com.mycompany.myapp)

say "-- a link that is not YouTube: the activation rule refuses it, nothing is stored"
"$PYTHON" "$EXAMPLE_DIR/extension.py" "https://example.com/article"
status=$?
check "a non-YouTube link is not accepted (-32003, extension exits 3)" test "$status" -eq 3
check "the app was not launched for it" test ! -e "$LOG"

say "-- a YouTube link, shared with open=true"
"$PYTHON" "$EXAMPLE_DIR/extension.py" "https://youtu.be/dQw4w9WgXcQ"
check "the extension shared the link" test $? -eq 0
wait_for_line "$LOG" "app.ack ev-" 8
say "-- a second link while the app may still be running (delivered live, or it is launched again)"
"$PYTHON" "$EXAMPLE_DIR/extension.py" "https://www.youtube.com/watch?v=9bZkp7q19f0"
check "the extension shared the second link" test $? -eq 0
wait_for_line "$LOG" "inputYoutubeLink = https://www.youtube.com/watch" 8
wait_for_line "$LOG" "app.ack ev-2" 8

say "-- the app's log ($LOG):"
sed 's/^/   /' "$LOG"
check "the broker launched the app on demand" contains "$LOG" "launched by the broker as com.mycompany.myapp"
check "the app received the openURL event" contains "$LOG" "app.event ev-1 openURL deeplinkmyapp://open-from-share\?share=sh-"
check "the app got the link from the share" contains "$LOG" "inputYoutubeLink = https://youtu.be/dQw4w9WgXcQ"
check "the app got the second link" contains "$LOG" "inputYoutubeLink = https://www.youtube.com/watch\?v=9bZkp7q19f0"
check "the app completed the shares" test "$(grep -c 'share.complete sh-' "$LOG")" -eq 2
check "the app acknowledged both events" contains "$LOG" "app.ack ev-2"
shares=$(rpc --as com.mycompany.myapp share.list)
check "no share is left in the group ($shares)" test "$shares" = '{"shares": []}'
pending=$(rpc broker.status | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["pendingEvents"])')
check "no event is left pending ($pending)" test "$pending" = 0

example_end
