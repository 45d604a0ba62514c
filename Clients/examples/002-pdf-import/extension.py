#!/usr/bin/env python3
"""Seed 002's share and action extensions (ShareViewController.viewWillAppear).

iOS: the extension loads each PDF attachment (loadFileRepresentation), copies it into the App
Group container, puts the file names into reazy://?file=NAME and opens the containing app through
the responder chain.

sharebroker: the extension sends the file as itself; the broker checks the activation rule, copies
the file into the group's directory (durable before it answers) and, with open=True, queues
reazy://open-from-share?share=ID for Reazy, launching it when it is not running. A file can be
given by path (the broker reads it) or by data (its bytes, base64 on the wire).

    python3 extension.py share|action path|data FILE
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import sharebroker as sb  # noqa: E402

EXTENSIONS = {"share": "com.reazy.app.share", "action": "com.reazy.app.action"}


def main(argv):
    if len(argv) != 4 or argv[1] not in EXTENSIONS or argv[2] not in ("path", "data"):
        print("usage: extension.py share|action path|data FILE", file=sys.stderr)
        return 64
    extension, how, file = EXTENSIONS[argv[1]], argv[2], argv[3]
    if how == "path":
        item = sb.path_item(file)
    else:
        with open(file, "rb") as f:
            item = sb.data_item(f.read(), os.path.basename(file))
    with sb.Client(role="extension", bundle_id=extension, timeout=10) as ext:
        try:
            sent = ext.share_send([item], open=True)
        except sb.BrokerError as e:
            if e.code != sb.NOT_ACCEPTED:
                raise
            print(f"[{argv[1]} extension] {os.path.basename(file)} not accepted: {e.message}")
            return 3
    print(f"[{argv[1]} extension] share.send {os.path.basename(file)} by {how} -> share {sent['shareID']} "
          f"in {sent['group']}, event {sent['eventID']} for {sent['app']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
