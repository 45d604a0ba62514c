#!/usr/bin/env python3
"""The share extension (seed 000's ShareExtensionHandler), as its own process.

iOS: the extension pulls the URL out of its NSExtensionItem, writes it into the App Group's
UserDefaults ("sharedURL" + "pendingYoutubeShare"), then walks the responder chain to call
openURL("deeplinkmyapp://open-from-share?t=...") on the containing app.

sharebroker: one call. share.send checks the extension's activation rule (one web URL that is a
YouTube link), stores the share durably in group.com.mycompany.myapp, and, with open=True, queues
deeplinkmyapp://open-from-share?share=ID for the containing app (which the broker launches when
it is not running).

    python3 extension.py https://youtu.be/dQw4w9WgXcQ
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import sharebroker as sb  # noqa: E402

EXTENSION = "com.mycompany.myapp.share"


def main(argv):
    if len(argv) != 2:
        print("usage: extension.py URL", file=sys.stderr)
        return 64
    url = argv[1]
    with sb.Client(role="extension", bundle_id=EXTENSION, timeout=10) as ext:
        print(f"[extension] {EXTENSION} says hello (session {ext.session})")
        try:
            sent = ext.share_send([sb.url_item(url)], open=True)
        except sb.BrokerError as e:
            if e.code != sb.NOT_ACCEPTED:
                raise
            # complete(shouldOpenMainApp: false): not a YouTube link, nothing stored, the app stays closed.
            print(f"[extension] not shared: {e.message}")
            return 3
        print(f"[extension] share.send {url} open=true -> share {sent['shareID']} in {sent['group']}, "
              f"event {sent['eventID']} queued for {sent['app']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
