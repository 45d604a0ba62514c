"""Framing of JSON-RPC messages on the broker's socket (pure, no I/O).

Two framings exist; the broker picks one per connection from its first bytes:

* ``"newline"`` (default): one UTF-8 JSON text per line, ended by ``\\n``.
* ``"content-length"``: LSP-style ``Content-Length: N\\r\\n\\r\\n`` then N bytes of JSON.
"""

import json
import re
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


MAX_DEPTH = 256
"""The deepest nesting of arrays and objects the broker parses (its ``JSONParser.maxDepth``)."""

MAX_BATCH = 10000
"""The broker's default limit on the members of one batch (``--max-batch``)."""

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")


def _hex4(text: str, i: int) -> int:
    h = text[i:i + 4]
    return int(h, 16) if _HEX4.fullmatch(h) else -1


def parse_problem(text: str) -> Optional[str]:
    """Why the broker could not parse this JSON text, for two things a JSON text can hold that
    its strict parser refuses (-32700): a ``\\u`` escape of half a surrogate pair, and arrays /
    objects nested deeper than :data:`MAX_DEPTH` levels. ``None`` when neither occurs. (Not a JSON
    validator: text that is not JSON at all is for ``json.loads`` to refuse.)"""
    if not _SURROGATE_ESCAPE.search(text) and text.count("[") + text.count("{") <= MAX_DEPTH:
        return None  # (counted in C: the loop below is for the few texts that may need it)
    depth, in_string, i, n = 0, False, 0, len(text)
    while i < n:
        c = text[i]
        if in_string:
            if c == '"':
                in_string = False
            elif c == "\\":
                if text[i + 1:i + 2] != "u":
                    i += 2  # \", \\, \n, ...
                    continue
                u = _hex4(text, i + 2)
                if 0xD800 <= u <= 0xDBFF:
                    lo = _hex4(text, i + 8) if text[i + 6:i + 8] == "\\u" else -1
                    if not 0xDC00 <= lo <= 0xDFFF:
                        return f"an unpaired surrogate (\\u{text[i + 2:i + 6]}) in a string"
                    i += 11
                elif 0xDC00 <= u <= 0xDFFF:
                    return f"an unpaired surrogate (\\u{text[i + 2:i + 6]}) in a string"
                else:
                    i += 5
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return f"arrays and objects nested deeper than {MAX_DEPTH} levels"
        elif c in "]}":
            depth -= 1
        i += 1
    return None


def _is_notification_request(value: Any) -> bool:
    """A notification the broker runs without answering: a valid request object without an id."""
    return (isinstance(value, dict) and "id" not in value and value.get("jsonrpc") == "2.0"
            and isinstance(value.get("method"), str) and isinstance(value.get("params"), (dict, list, type(None))))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def answer_expected(message: Any, framing: str = NEWLINE) -> bool:
    """Will the broker answer this raw message (what ``send_raw`` was given: a JSON value, or a
    ``str``/``bytes`` JSON text)? Everything gets an answer but a valid notification, a batch of
    only those (within the broker's default member limit) and, with newline framing, a blank
    line; a text the broker cannot parse gets -32700 (without an id)."""
    if isinstance(message, (bytes, bytearray)):
        try:
            text = bytes(message).decode("utf-8")
        except UnicodeDecodeError:
            return True
    elif isinstance(message, str):
        text = message
    else:
        if not isinstance(message, (dict, list)):
            return True  # (a number, a string, null: not a request)
        text = dumps(message).decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]  # the broker skips a byte order mark
    if not text.strip(" \t\r\n"):
        return framing == CONTENT_LENGTH  # a blank line is skipped; an empty body is not JSON
    if parse_problem(text) is not None:
        return True
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except ValueError:
        return True
    if isinstance(value, list):
        return not value or len(value) > MAX_BATCH or not all(_is_notification_request(v) for v in value)
    return not _is_notification_request(value)


def _not_from_a_broker(msg) -> "Optional[str]":
    """Why ``msg`` is nothing a broker sends (None when it may be): the broker sends responses
    (``result`` or ``error``), notifications (``method``, no ``id``) and batches of responses,
    never a request (``method`` with an ``id``: a peer that echoes, or another protocol)."""
    def one(m) -> "Optional[str]":
        if not isinstance(m, dict):
            return "a message that is not an object"
        if "method" in m:
            return "a request (a method with an id)" if "id" in m else None
        if "result" not in m and "error" not in m:
            return "an object that is no response (no result or error) nor a notification"
        return None
    if isinstance(msg, list):
        return next((w for w in map(one, msg) if w is not None), None) if msg else "an empty array"
    return one(msg)


class FrameDecoder:
    """Incremental decoder: ``feed(bytes)`` returns the complete messages (parsed JSON) so far.

    ``max_frame``: the largest message accepted, in bytes (``None``: no limit). A longer one is a
    :class:`ProtocolError` as soon as it is known: a line once that many bytes are buffered without
    its newline, a header-framed one as soon as its ``Content-Length`` is read (its body is never
    buffered).
    """

    def __init__(self, framing: str = NEWLINE, max_frame: Optional[int] = DEFAULT_MAX_FRAME,
                 from_broker: bool = False):
        if framing not in FRAMINGS:
            raise ValueError(f"unknown framing {framing!r}; use one of {FRAMINGS}")
        self.framing = framing
        self.max_frame = max_frame
        # (the clients' decoders: a message no broker sends, as a request a peer echoes back, is
        # a ProtocolError, not taken for an answer)
        self.from_broker = from_broker
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
                    msg = json.loads(body.decode("utf-8"))
                except (UnicodeDecodeError, ValueError) as e:
                    raise ProtocolError(f"broker sent invalid JSON: {e}: {bytes(body[:200])!r}") from e
                why = _not_from_a_broker(msg) if self.from_broker else None
                if why is not None:
                    raise ProtocolError(f"what answers does not speak sharebroker's protocol: {why}: {bytes(body[:200])!r}")
                out.append(msg)
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
