"""Errors raised by the sharebroker clients, and the contract's error codes."""

from typing import Any, Dict, List, Optional

# Standard JSON-RPC 2.0 codes.
PARSE_ERROR = -32700
"""The frame was not valid JSON (or not valid UTF-8)."""
INVALID_REQUEST = -32600
"""Not a valid request object; also a message over the broker's size limit."""
METHOD_NOT_FOUND = -32601
"""Unknown method (always, even before ``hello``)."""
INVALID_PARAMS = -32602
"""Bad params; the message names the field."""
INTERNAL_ERROR = -32603
"""Internal broker error."""

# sharebroker codes (shared/design/CONTRACT.md).
UNAUTHORIZED = -32001
"""No ``hello`` yet, unknown bundle ID, wrong role, not entitled to the group, bad token."""
NOT_FOUND = -32002
"""Not found: share, app, event, key."""
NOT_ACCEPTED = -32003
"""No extension's activation rule accepts the items (``data["candidates"]`` when ambiguous)."""
NO_HANDLER = -32004
"""Nothing can open the URL and no fallback was given."""
STORAGE_FAILURE = -32005
"""Storage failure (disk full, permission): nothing was stored."""
VERSION_CONFLICT = -32006
"""``defaults.set``/``defaults.remove`` with ``ifVersion`` that did not match; ``data["version"]``
is the group's current version."""
TOO_MANY_REQUESTS = -32007
"""Too many of the connection's replies were unread (over the broker's output limit); not run."""

ERROR_NAMES = {
    PARSE_ERROR: "parse error",
    INVALID_REQUEST: "invalid request",
    METHOD_NOT_FOUND: "method not found",
    INVALID_PARAMS: "invalid params",
    INTERNAL_ERROR: "internal error",
    UNAUTHORIZED: "unauthorized",
    NOT_FOUND: "not found",
    NOT_ACCEPTED: "not accepted",
    NO_HANDLER: "no handler",
    STORAGE_FAILURE: "storage failure",
    VERSION_CONFLICT: "version conflict",
    TOO_MANY_REQUESTS: "too many unread replies",
}


class BrokerError(Exception):
    """A JSON-RPC error object answered by the broker.

    Attributes:
        code: the integer error code (compare with the module constants, e.g. ``NOT_FOUND``).
        message: the broker's message, which names the cause (field, URL, bundle ID...).
        data: the optional ``data`` member (``None`` when absent), e.g. ``{"candidates": [...]}``
            for an ambiguous ``share.send`` or ``{"version": N}`` for a version conflict.
        method: the method of the request that failed, when known.
    """

    def __init__(self, code: int, message: str, data: Any = None, method: Optional[str] = None):
        self.code = code
        self.message = message
        self.data = data
        self.method = method
        where = f"{method}: " if method else ""
        super().__init__(f"{where}{message} ({code}{', ' + ERROR_NAMES[code] if code in ERROR_NAMES else ''})")

    @classmethod
    def from_error_object(cls, err: Any, method: Optional[str] = None) -> "BrokerError":
        """Build from a JSON-RPC ``error`` member (tolerating malformed ones)."""
        if not isinstance(err, dict):
            return cls(INTERNAL_ERROR, f"malformed error object: {err!r}", None, method)
        code = err.get("code")
        if not isinstance(code, int):
            code = INTERNAL_ERROR
        return cls(code, str(err.get("message", "")), err.get("data"), method)

    def __reduce__(self):
        return (type(self), (self.code, self.message, self.data, self.method))


class BrokerConnectionError(ConnectionError):
    """The broker could not be reached, or the connection was lost."""


class ConnectionClosed(BrokerConnectionError):
    """The broker closed the connection (e.g. it shut down, or a message was over the limit).

    Attributes:
        reason: the broker's error object (``{"code", "message", "data"}``) when the last thing
            it sent before closing was an error without an id saying why (``data.closing``: a
            session a manifest reload ended, a message over its size limit, a connection refused
            at once), else ``None``; its message is then part of the exception's text.
    """

    def __init__(self, message: str, reason: Optional[Dict[str, Any]] = None):
        super().__init__(message)
        self.reason = reason


class SubscriptionEnded(Exception):
    """The app's events went to another subscriber: another connection of the app called
    ``app.subscribe`` and took them over (a second instance of the app), and the broker said so
    with ``app.subscriptionEnded {app, reason}``. Raised by the calls that wait for an
    ``app.event`` (``next_event()``, ``next_notification(method="app.event")``); the iterators
    over app events end instead (as they do when the connection closes) and leave the
    notification's params in the client's ``subscription_ended``.

    Not a connection failure: the connection stays open and usable (its acks still count), and
    ``app_subscribe()`` on it takes the events back.

    Attributes:
        app: the app's bundle ID.
        reason: the broker's reason (it names the connection that took over).
    """

    def __init__(self, app: Optional[str], reason: str):
        self.app = app
        self.reason = reason
        super().__init__(f"the app's events went to another subscriber: {reason}")

    def __reduce__(self):
        return (type(self), (self.app, self.reason))


class ProtocolError(Exception):
    """The broker sent something that is not valid JSON-RPC framing or JSON.

    Attributes:
        messages: from :meth:`FrameDecoder.feed`, the messages decoded before the bad frame in
            the same call (the clients hand them over before they raise).
    """

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.messages: List[Any] = []
