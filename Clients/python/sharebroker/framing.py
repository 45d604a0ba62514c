"""Framing of JSON-RPC messages on the broker's socket (pure, no I/O).

Two framings exist; the broker picks one per connection from its first bytes:

* ``"newline"`` (default): one UTF-8 JSON text per line, ended by ``\\n``.
* ``"content-length"``: LSP-style ``Content-Length: N\\r\\n\\r\\n`` then N bytes of JSON.
"""

import json
from typing import Any, List

from .errors import ProtocolError

NEWLINE = "newline"
CONTENT_LENGTH = "content-length"
FRAMINGS = (NEWLINE, CONTENT_LENGTH)

_MAX_HEADER = 8192


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON; never contains a raw newline (``json`` escapes them in strings)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def encode(value: Any, framing: str = NEWLINE) -> bytes:
    """Frame one JSON value (or an already-serialized ``str``/``bytes`` JSON text) for the wire."""
    if isinstance(value, str):
        body = value.encode("utf-8")
    elif isinstance(value, (bytes, bytearray)):
        body = bytes(value)
    else:
        body = dumps(value)
    if framing == CONTENT_LENGTH:
        return b"Content-Length: %d\r\n\r\n" % len(body) + body
    if b"\n" in body:
        raise ValueError("a newline-framed message must not contain a raw newline")
    return body + b"\n"


class FrameDecoder:
    """Incremental decoder: ``feed(bytes)`` returns the complete messages (parsed JSON) so far."""

    def __init__(self, framing: str = NEWLINE):
        if framing not in FRAMINGS:
            raise ValueError(f"unknown framing {framing!r}; use one of {FRAMINGS}")
        self.framing = framing
        self._buf = bytearray()

    @property
    def pending_bytes(self) -> int:
        """Bytes received that do not form a complete frame yet."""
        return len(self._buf)

    def feed(self, data: bytes) -> List[Any]:
        self._buf += data
        out: List[Any] = []
        while True:
            body = self._next_body()
            if body is None:
                return out
            if not body.strip():
                continue  # blank line: ignored, as the broker does
            try:
                out.append(json.loads(body.decode("utf-8")))
            except (UnicodeDecodeError, ValueError) as e:
                raise ProtocolError(f"broker sent invalid JSON: {e}: {bytes(body[:200])!r}") from e

    def _next_body(self):
        if self.framing == NEWLINE:
            i = self._buf.find(b"\n")
            if i < 0:
                return None
            body = bytes(self._buf[:i])
            del self._buf[: i + 1]
            return body.rstrip(b"\r")
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > _MAX_HEADER:
                raise ProtocolError("header section over 8 KiB")
            return None
        length = None
        for line in bytes(self._buf[:end]).split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    raise ProtocolError(f"bad Content-Length header: {line!r}") from None
        if length is None or length < 0:
            raise ProtocolError("header section without Content-Length")
        start = end + 4
        if len(self._buf) < start + length:
            return None
        body = bytes(self._buf[start : start + length])
        del self._buf[: start + length]
        return body
