#!/usr/bin/env bash
# Seed 001 end to end: a custom-scheme deep link (DeepLinkingDemo://customerdetail?id=...) opens the app
# on the customer screen; once the app is gone, the same button falls back to the web page in the browser.
. "$(dirname "$0")/../lib.sh"
example_begin "001-custom-scheme" "DeepLinkingDemo://customerdetail?id=... with a web fallback"
need_shareclient

install_app apps/deeplinkingdemo.json
install_app apps/browser.json
start_broker

background "$PYTHON" "$EXAMPLE_DIR/app.py" 8 >"$TMP/app.out" 2>&1
APP_PID=$LAST_PID
background "$PYTHON" "$EXAMPLE_DIR/../browser.py" 8 >"$TMP/browser.out" 2>&1
wait_for_line "$TMP/app.out" "subscribed" 5
wait_for_line "$TMP/browser.out" "subscribed" 5

say "-- the button in another app (ViewController.nextBtnClicked): canOpenURL, then open"
"$PYTHON" "$EXAMPLE_DIR/viewcontroller.py" "Hi Deep Linking"
say "-- the customer pastes a link into the browser's address bar (the scheme is case-insensitive)"
"$SHARECLIENT_BIN" open 'deeplinkingdemo://customerdetail?id=practice'
say "-- the seed's unencoded link: opened as the URL it names (encoded), as iOS 17's URL(string:) does"
"$SHARECLIENT_BIN" open 'DeepLinkingDemo://customerdetail?id=Hi Deep Linking'
check "the unencoded link is accepted" test $? -eq 0
say "-- a malformed escape is not a URL: the broker says so instead of crashing like URL(string:)!"
"$SHARECLIENT_BIN" open 'DeepLinkingDemo://customerdetail?id=100%' 2>"$TMP/invalid.err"
status=$?
sed 's/^/   /' "$TMP/invalid.err"
check "an invalid URL is refused with exit 1 (-32602)" test "$status" -eq 1
check "the refusal says what is wrong" contains "$TMP/invalid.err" "invalid percent-escape"
wait_for_line "$TMP/app.out" "practice" 5
sed 's/^/   /' "$TMP/app.out"
check "the deep link opened the customer screen with the decoded id" \
    contains "$TMP/app.out" "customerdetail\?id=Hi%20Deep%20Linking \(via scheme\) -> CustomerMessageViewController: customerIdLabel.text = Hi Deep Linking$"
check "the lower-case scheme reached the same app" contains "$TMP/app.out" "customerIdLabel.text = practice$"
for _ in $(seq 50); do [ "$(grep -c 'id=Hi%20Deep%20Linking (via scheme)' "$TMP/app.out")" -ge 2 ] && break; sleep 0.1; done
check "the unencoded link reached the app too, encoded" test "$(grep -c 'id=Hi%20Deep%20Linking (via scheme)' "$TMP/app.out")" -eq 2

say "-- the app is uninstalled (its manifest removed, apps.reload)"
kill "$APP_PID" 2>/dev/null
rm "$STATE/apps/deeplinkingdemo.json"
"$SHARECLIENT_BIN" reload >/dev/null
"$PYTHON" "$EXAMPLE_DIR/viewcontroller.py" "Hi Deep Linking"
say "-- the one-call form: url.open with a fallback"
"$SHARECLIENT_BIN" open 'DeepLinkingDemo://customerdetail?id=42' --fallback 'https://bluemangoglobal.com/customers/42'
say "-- no fallback, no handler: -32004, naming the URL"
"$SHARECLIENT_BIN" open 'DeepLinkingDemo://customerdetail?id=42' 2>"$TMP/nohandler.err"
status=$?
sed 's/^/   /' "$TMP/nohandler.err"
check "without a fallback nothing opens it (exit 1, -32004 naming the URL)" \
    sh -c "[ $status -eq 1 ] && grep -q 'DeepLinkingDemo://customerdetail?id=42' '$TMP/nohandler.err' && grep -q 32004 '$TMP/nohandler.err'"
wait_for_line "$TMP/browser.out" "customers/42" 5
sed 's/^/   /' "$TMP/browser.out"
check "canOpenURL said no, so the button opened the web page in the browser" \
    contains "$TMP/browser.out" "opens https://bluemangoglobal.com \(via browser\)"
check "the fallback went to the browser" contains "$TMP/browser.out" "opens https://bluemangoglobal.com/customers/42 \(via fallback\)"
check "the browser got nothing while the app was installed" test "$(grep -c opens "$TMP/browser.out")" -eq 2

example_end
