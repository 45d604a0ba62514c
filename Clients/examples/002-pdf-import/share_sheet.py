#!/usr/bin/env python3
"""The share sheet of a host app (Files, Mail, ...): which extension icons appear for what is shared.

iOS evaluates each extension's NSExtensionActivationRule against the items; seed 002's rule shows
Reazy only when every attachment conforms to com.adobe.pdf. sharebroker's share.targets runs the
same predicate (SUBQUERY, UTI-CONFORMS-TO) and lists the extensions that accept the items as a whole.

    python3 share_sheet.py FILE...          # prints the targets for FILE..., one line
    python3 share_sheet.py --send FILE...   # also shares without naming an extension

A tool session may share as the share sheet without naming the extension only when exactly one
accepts the items; with two (Reazy's share and action extensions) the broker refuses with -32003
and lists them in data.candidates: the user has to pick one icon.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import sharebroker as sb  # noqa: E402


def main(argv):
    send = argv[1:2] == ["--send"]
    files = argv[2:] if send else argv[1:]
    items = [sb.path_item(f) for f in files]
    with sb.Client(role="tool", timeout=10) as sheet:
        targets = sheet.share_targets(items)["targets"]
        names = ", ".join(f"{t['name']} ({t['extension']})" for t in targets) or "no Reazy icon"
        print(f"[share sheet] {' + '.join(os.path.basename(f) for f in files)}: {names}")
        if send:
            try:
                sent = sheet.share_send(items)
                print(f"[share sheet] sent to {sent['extension']}")
            except sb.BrokerError as e:
                if e.code != sb.NOT_ACCEPTED:
                    raise
                candidates = [c["extension"] for c in (e.data or {}).get("candidates", [])]
                print(f"[share sheet] share.send without an extension: -32003, the user must pick one of {candidates}")
                return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
