"""``python3 -m sharebroker [options] METHOD [PARAMS-JSON]``: call one method, print the result.

Options: ``--socket PATH``, ``--role ROLE`` (default ``tool``; ``none``: no hello),
``--as BUNDLE`` (the bundle ID; the role then defaults to ``app``, or ``extension`` when the broker
says the bundle is an extension, as ``shareclient --as`` does), ``--token TOKEN``,
``--listen SECONDS`` (after the call, print notifications as JSON lines for that long).
Exit status: 0 ok, 1 the broker answered an error, 64 usage error, 69 broker unreachable (also
when what answers at the socket does not speak the protocol, or no answer comes in time), as
``shareclient``.
"""

import argparse
import json
import sys
import time

from .client import Client
from .errors import UNAUTHORIZED, BrokerConnectionError, BrokerError, ConnectionClosed, ProtocolError


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m sharebroker", description=__doc__.split("\n")[0])
    ap.add_argument("method")
    ap.add_argument("params", nargs="?", help="a JSON object (default: {})")
    ap.add_argument("--socket", help="socket path (default: $SHAREBROKER_SOCKET, ...)")
    ap.add_argument("--role", help="tool (default), app, extension, or none for no hello")
    ap.add_argument("--as", dest="bundle_id", help="bundle ID for role app or extension")
    ap.add_argument("--token")
    ap.add_argument("--listen", type=float, default=0.0, metavar="SECONDS")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 64
    try:
        params = json.loads(args.params) if args.params else {}
    except ValueError as e:
        print(f"sharebroker: PARAMS is not JSON: {e}", file=sys.stderr)
        return 64
    role = args.role or ("app" if args.bundle_id else "tool")
    try:
        with Client(args.socket, connect=True) as c:
            if role != "none":
                try:
                    c.hello(role, args.bundle_id, args.token)
                except BrokerError as e:
                    # Without --role, a bundle of the other kind is said hello as that kind (the
                    # refusal's data.role names it).
                    other = e.data.get("role") if isinstance(e.data, dict) else None
                    if (args.role or not args.bundle_id or e.code != UNAUTHORIZED
                            or other not in ("app", "extension") or other == role):
                        raise
                    c.hello(other, args.bundle_id, args.token)
            print(json.dumps(c.call(args.method, params), ensure_ascii=False))
            if args.listen > 0:
                deadline = time.monotonic() + args.listen
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    try:
                        n = c.next_notification(left)
                    except ConnectionClosed as e:
                        if e.reason is not None:  # the broker said why it closed (a reload ended the session)
                            print(f"sharebroker: {e}", file=sys.stderr)
                            return 1
                        break
                    if n is None:
                        break
                    print(json.dumps({"method": n.method, "params": n.params}, ensure_ascii=False), flush=True)
    except BrokerError as e:
        print(f"sharebroker: {e}", file=sys.stderr)
        return 1
    except BrokerConnectionError as e:
        print(f"sharebroker: {e}", file=sys.stderr)
        return 69
    except (ProtocolError, TimeoutError) as e:
        where = args.socket or "the broker's socket"
        print(f"sharebroker: no usable broker at {where}: {str(e) or 'no answer in time'}", file=sys.stderr)
        return 69
    return 0


if __name__ == "__main__":
    sys.exit(main())
