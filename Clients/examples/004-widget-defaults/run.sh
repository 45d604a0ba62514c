#!/usr/bin/env bash
# Seed 004 end to end: a widget watches the group defaults' "watchlist" and redraws on each change;
# the app adds countries with compare-and-set (a concurrent writer does not lose its update); a tap on
# a widget row opens stats://watchlist?id=&name=&iso= in the app, launched on demand.
. "$(dirname "$0")/../lib.sh"
example_begin "004-widget-defaults" "a widget watching group defaults, the app writing with compare-and-set"

GROUP=group.junyeongPark.Covid19Stats
APP=com.junyeongpark.Covid19Stats
install_app apps/covid19stats.json
start_broker
LOG=$(app_log $APP)

background "$PYTHON" "$EXAMPLE_DIR/widget.py" watch 3 >"$TMP/widget.out" 2>&1
WIDGET_PID=$LAST_PID
wait_for_line "$TMP/widget.out" "defaults.watch" 5

say "-- the user adds South Korea in the app"
"$PYTHON" "$EXAMPLE_DIR/app.py" add 410 "South Korea" KR
say "-- the user adds São Tomé & Príncipe while another writer adds Japan"
"$PYTHON" "$EXAMPLE_DIR/app.py" add 678 "São Tomé & Príncipe" STP --interleave 392 Japan JPN | tee "$TMP/app-add.out"
wait_pid "$WIDGET_PID" 8
check "the widget saw three changes and exited" test $? -eq 0
say "-- the widget:"
sed 's/^/   /' "$TMP/widget.out"
check "the widget drew the empty state first" contains "$TMP/widget.out" "v0: Add countries to watchlist from the App"
check "the widget reloaded at versions 1, 2 and 3" \
    sh -c "grep -q 'watchlist version 1: reloadTimelines' '$TMP/widget.out' && grep -q 'watchlist version 2: reloadTimelines' '$TMP/widget.out' && grep -q 'watchlist version 3: reloadTimelines' '$TMP/widget.out'"
check "the app hit the conflict and retried" contains "$TMP/app-add.out" "conflict \(-32006, now v2\): re-read, merge, retry"
check "the last drawing has all three countries" contains "$TMP/widget.out" "v3: Watchlist \(3\)"
final=$(rpc --as $APP defaults.get "{\"group\":\"$GROUP\",\"key\":\"watchlist\"}" | "$PYTHON" -c 'import json,sys; r=json.load(sys.stdin); print(r["version"], ",".join(c["iso"] for c in r["value"]))')
check "no update was lost: v3 KR,JPN,STP ($final)" test "$final" = "3 KR,JPN,STP"
check "the row links are percent-encoded" contains "$TMP/widget.out" "stats://watchlist\?id=678&name=S%C3%A3o%20Tom%C3%A9%20%26%20Pr%C3%ADncipe&iso=STP"

say "-- the user taps the São Tomé & Príncipe row of the widget"
"$PYTHON" "$EXAMPLE_DIR/widget.py" tap 3
wait_for_line "$LOG" "CountryDetailView" 8
sed 's/^/   /' "$LOG"
check "the app was launched for the deep link" contains "$LOG" "launched as $APP"
check "the app decoded the whole name" \
    contains "$LOG" "tab watchlist, CountryDetailView\(id: 678, name: São Tomé & Príncipe, iso: STP\)"
check "the event came from the widget" contains "$LOG" "from com.junyeongpark.Covid19Stats.WatchlistStatsWidget"

example_end
