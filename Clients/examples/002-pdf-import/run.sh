#!/usr/bin/env bash
# Seed 002 end to end: a share extension and an action extension, both with the seed's SUBQUERY
# predicate on com.adobe.pdf, hand a real PDF (once by path, once by data) to Reazy, launched on
# demand, which imports both into its library; the group's copies are deleted.
. "$(dirname "$0")/../lib.sh"
example_begin "002-pdf-import" "importing PDFs through share and action extensions"

install_app apps/reazy.json
export REAZY_LIBRARY=$TMP/ReazyLibrary    # the app's own storage (inherited by the launched app)
start_broker
LOG=$(app_log com.reazy.app)

# The host app's documents: the broker reads a path item only when the caller owns the file.
mkdir -p "$TMP/Documents"
cp "$EXAMPLE_DIR/paper.pdf" "$TMP/Documents/paper.pdf"
printf 'not a paper\n' >"$TMP/Documents/notes.txt"

say "-- the share sheet: which icons appear (the rule wants every attachment to be a PDF)"
"$PYTHON" "$EXAMPLE_DIR/share_sheet.py" "$TMP/Documents/paper.pdf" | tee "$TMP/sheet.out"
"$PYTHON" "$EXAMPLE_DIR/share_sheet.py" "$TMP/Documents/paper.pdf" "$TMP/Documents/notes.txt" | tee -a "$TMP/sheet.out"
"$PYTHON" "$EXAMPLE_DIR/share_sheet.py" "$TMP/Documents/notes.txt" | tee -a "$TMP/sheet.out"
check "a PDF shows both extensions" contains "$TMP/sheet.out" "paper.pdf: Reazy \(com.reazy.app.share\), Import to Reazy \(com.reazy.app.action\)"
check "a PDF plus a text file shows none" contains "$TMP/sheet.out" "paper.pdf \+ notes.txt: no Reazy icon"
check "a text file shows none" contains "$TMP/sheet.out" "^\[share sheet\] notes.txt: no Reazy icon"
"$PYTHON" "$EXAMPLE_DIR/share_sheet.py" --send "$TMP/Documents/paper.pdf" | tee "$TMP/sheet-send.out"
check "sending as the share sheet names both candidates (-32003, nothing stored)" \
    contains "$TMP/sheet-send.out" "must pick one of \['com.reazy.app.share', 'com.reazy.app.action'\]"

say "-- the share extension refuses a text file (nothing stored, app not launched)"
"$PYTHON" "$EXAMPLE_DIR/extension.py" share path "$TMP/Documents/notes.txt"
check "notes.txt is not accepted" test $? -eq 3

say "-- the share extension sends the PDF by path, the action extension by data"
"$PYTHON" "$EXAMPLE_DIR/extension.py" share path "$TMP/Documents/paper.pdf"
check "shared by path" test $? -eq 0
"$PYTHON" "$EXAMPLE_DIR/extension.py" action data "$TMP/Documents/paper.pdf"
check "shared by data" test $? -eq 0
wait_for_line "$LOG" "app.ack ev-2" 8

say "-- Reazy's log:"
sed 's/^/   /' "$LOG"
check "Reazy was launched on demand" contains "$LOG" "launched as com.reazy.app"
check "Reazy imported two PDFs" test "$(ls "$REAZY_LIBRARY" 2>/dev/null | wc -l)" -eq 2
ok=1
for f in "$REAZY_LIBRARY"/*; do cmp -s "$f" "$EXAMPLE_DIR/paper.pdf" || ok=0; done
check "both imported files are byte-for-byte the original PDF" test "$ok" -eq 1
check "the type was inferred as com.adobe.pdf" contains "$LOG" "com.adobe.pdf"
left=$(find "$STATE/groups" -type f -path '*/files/*' 2>/dev/null | wc -l)
check "no copy is left in the group's directory ($left)" test "$left" -eq 0
shares=$(rpc --as com.reazy.app share.list)
check "no share is pending ($shares)" test "$shares" = '{"shares": []}'
check "the host app's file is untouched (the broker copies, never moves)" cmp -s "$TMP/Documents/paper.pdf" "$EXAMPLE_DIR/paper.pdf"

example_end
