"""Framing of JSON-RPC messages on the broker's socket (pure, no I/O).

Two framings exist; the broker picks one per connection from its first bytes:

* ``"newline"`` (default): one UTF-8 JSON text per line, ended by ``\\n``.
* ``"content-length"``: LSP-style ``Content-Length: N\\r\\n\\r\\n`` then N bytes of JSON.
"""

import json
from typing import Any, List, Optional

from .errors import ProtocolError

NEWLINE = "newline"
CONTENT_LENGTH = "content-length"
FRAMINGS = (NEWLINE, CONTENT_LENGTH)

_MAX_HEADER = 8192

DEFAULT_MAX_FRAME = 64 << 20
"""The default largest message a client reads from the broker (64 MiB): 16 times the broker's
default ``--max-message`` (4 MiB), room for its largest replies (a 4-MiB ``share.read`` as base64,
a 16-MiB defaults suite, a long ``share.list``)."""


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
    """Incremental decoder: ``feed(bytes)`` returns the complete messages (parsed JSON) so far.

    ``max_frame``: the largest message accepted, in bytes (``None``: no limit). A longer one is a
    :class:`ProtocolError` as soon as it is known: a line once that many bytes are buffered without
    its newline, a header-framed one as soon as its ``Content-Length`` is read (its body is never
    buffered).
    """

    def __init__(self, framing: str = NEWLINE, max_frame: Optional[int] = DEFAULT_MAX_FRAME):
        if framing not in FRAMINGS:
            raise ValueError(f"unknown framing {framing!r}; use one of {FRAMINGS}")
        self.framing = framing
        self.max_frame = max_frame
        self._buf = bytearray()
        self._scanned = 0  # bytes of the buffer already searched for the end of a line or header
        self._need = -1  # body length of the header-framed message being read; -1: reading headers
        self._header = 0  # header bytes of that message

    @property
    def pending_bytes(self) -> int:
        """Bytes received that do not form a complete frame yet."""
        return len(self._buf) + (self._header if self._need >= 0 else 0)

    def feed(self, data: bytes) -> List[Any]:
        """The messages completed by ``data``. Raises :class:`ProtocolError` at the first frame
        that is not valid (its ``messages``: the ones completed before it, in this call)."""
        self._buf += data
        out: List[Any] = []
        try:
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
        except ProtocolError as e:
            e.messages = out
            raise

    def _too_long(self, size: int) -> bool:
        return self.max_frame is not None and size > self.max_frame

    def _next_body(self):
        if self.framing == NEWLINE:
            # Only the bytes not searched yet: a long line costs its length once, not per read.
            i = self._buf.find(b"\n", self._scanned)
            # (a line's size leaves out the '\r' of a CRLF ending)
            if i < 0:
                self._scanned = len(self._buf)
                if self._too_long(len(self._buf) - (1 if self._buf.endswith(b"\r") else 0)):
                    raise ProtocolError(f"a message from the broker is over {self.max_frame} bytes (no newline yet)")
                return None
            self._scanned = 0
            size = i - (1 if i and self._buf[i - 1] == 0x0D else 0)
            if self._too_long(size):
                raise ProtocolError(f"a message from the broker is over {self.max_frame} bytes ({size} bytes)")
            body = bytes(self._buf[:i])
            del self._buf[: i + 1]
            return body.rstrip(b"\r")
        if self._need < 0:
            end = self._buf.find(b"\r\n\r\n", max(0, self._scanned - 3))
            if end < 0:
                self._scanned = len(self._buf)
                if len(self._buf) > _MAX_HEADER:
                    raise ProtocolError("header section over 8 KiB")
                return None
            self._scanned = 0
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
            if self._too_long(length):
                raise ProtocolError(f"a message from the broker is over {self.max_frame} bytes "
                                    f"(Content-Length: {length})")
            del self._buf[: end + 4]
            self._need, self._header = length, end + 4
        if len(self._buf) < self._need:
            return None
        body = bytes(self._buf[: self._need])
        del self._buf[: self._need]
        self._need = -1
        return body
