#!/usr/bin/env bash
# Seed 003 end to end: universal links for rw-universal-links-final.herokuapp.com. The association
# document gives /computers/* to the app except /computers/*/buy; everything else goes to the browser.
. "$(dirname "$0")/../lib.sh"
example_begin "003-universal-links" "https links that open the app, and the ones that do not"
need_shareclient

HOST=rw-universal-links-final.herokuapp.com
APP=com.razeware.UniversalLinksTutorial
install_app apps/universallinks.json
install_app apps/browser.json
install_association associations/$HOST.json $HOST
start_broker
LOG=$(app_log $APP)
background "$PYTHON" "$EXAMPLE_DIR/../browser.py" 8 >"$TMP/browser.out" 2>&1
wait_for_line "$TMP/browser.out" "subscribed" 5

# tap URL APP VIA: a link is tapped (url.open); checks who opens it and how.
tap() {
    local url=$1 want="$2 $3" got
    got=$("$SHARECLIENT_BIN" open "$url" --json | "$PYTHON" -c 'import json,sys; r=json.load(sys.stdin); print(r["app"], r["via"])')
    say "   url.open $url -> $got"
    check "$url opens in $2 (via $3)" test "$got" = "$want"
}

say "-- links tapped in Notes or Safari"
tap "https://$HOST/computers/raspberry-pi" $APP universalLink
tap "https://$HOST/computers/beaglebone-black" $APP universalLink
tap "https://$HOST/computers/raspberry-pi/buy" com.example.browser browser
tap "https://$HOST/about" com.example.browser browser
tap "http://$HOST/computers/pcduino" com.example.browser browser
tap "https://example.org/computers/raspberry-pi" com.example.browser browser
tap "https://$HOST/computers/commodore-64" $APP universalLink

say "-- why /computers/raspberry-pi/buy is not a universal link (url.explain)"
"$SHARECLIENT_BIN" explain "https://$HOST/computers/raspberry-pi/buy" | sed 's/^/   /' | tee "$TMP/explain.out"
check "the explanation names the exclude pattern" contains "$TMP/explain.out" "exclud"

wait_for_line "$LOG" "commodore-64 -> unknown computer" 8
wait_for_line "$TMP/browser.out" "opens http://$HOST \(via browser from $APP\)" 5
say "-- the app's log:"
sed 's/^/   /' "$LOG"
say "-- the browser:"
sed 's/^/   /' "$TMP/browser.out"
check "the app was launched on demand" contains "$LOG" "launched as $APP"
check "the app showed the Raspberry Pi" contains "$LOG" "computers/raspberry-pi -> ComputerDetailController: Raspberry Pi 3$"
check "the app showed the BeagleBone" contains "$LOG" "computers/beaglebone-black -> ComputerDetailController: BeagleBone Black$"
check "an unknown computer: the app opened the web site in the browser" \
    contains "$TMP/browser.out" "opens http://$HOST \(via browser from $APP\)"
check "the excluded /buy page went to the browser" contains "$TMP/browser.out" "opens https://$HOST/computers/raspberry-pi/buy \(via browser\)"
check "the app never saw /buy, /about or http" sh -c "! grep -Eq '/buy|/about|http://$HOST/computers' '$LOG'"

say "-- the seed's legacy format (paths with NOT) decides the same, checked offline"
for path in /computers/raspberry-pi /computers/raspberry-pi/buy /about; do
    a=$("$SHAREBROKER_BIN" check-association "$EXAMPLE_DIR/associations/$HOST.json" --url "https://$HOST$path" | grep '→')
    b=$("$SHAREBROKER_BIN" check-association "$EXAMPLE_DIR/associations/apple-app-site-association.legacy" --url "https://$HOST$path" | grep '→')
    say "   $path:$a"
    check "components and legacy paths agree on $path" test "$a" = "$b"
done

example_end
