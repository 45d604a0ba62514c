"""The synchronous sharebroker client."""

import collections
import os
import socket
import time
from typing import Any, Deque, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import framing as _framing
from .errors import BrokerConnectionError, BrokerError, ConnectionClosed, ProtocolError, SubscriptionEnded
from .methods import BrokerMethods

_DEFAULT = object()

# After a write failed (into a socket the broker had closed, or stopped reading: EPIPE,
# ECONNRESET), what the client still reads of what the broker sent before it closed (its closing
# error, the answers before it): at most this long, and at most this many bytes (as the asyncio
# and Node.js clients do).
LEFTOVER_TIME = 0.2
LEFTOVER_BYTES = 1 << 20

MAX_ABANDONED = 1000
"""Abandoned calls (timed out, cancelled) whose late answers a client keeps watch for, at most
(their ids; a batch counts each): past that the oldest is forgotten, out of the order of
answers, its late answer dropped by id (ids count up), as the Node client does."""


def default_socket_path() -> str:
    """The broker's default socket, as the broker computes it.

    ``$SHAREBROKER_SOCKET``, else ``$XDG_RUNTIME_DIR/sharebroker.sock``, else
    ``$TMPDIR/sharebroker-UID/sharebroker.sock`` (``/tmp`` without ``TMPDIR``). Empty variables
    count as unset; a relative ``XDG_RUNTIME_DIR`` is ignored (the XDG Base Directory spec).
    """
    sock = os.environ.get("SHAREBROKER_SOCKET")
    if sock:
        return sock
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and runtime.startswith("/"):  # a relative value is ignored, as the XDG spec says
        return runtime + "/sharebroker.sock"
    tmp = os.environ.get("TMPDIR") or "/tmp"
    while len(tmp) > 1 and tmp.endswith("/"):
        tmp = tmp[:-1]
    return f"{tmp}/sharebroker-{os.getuid()}/sharebroker.sock"


APP_EVENT = "app.event"
SUBSCRIPTION_ENDED = "app.subscriptionEnded"
"""The notification the broker sends an app's subscriber when another connection of the app
subscribes and takes its events over; it ends what waits for an ``app.event``."""


class Notification(NamedTuple):
    """A message from the broker without an id: ``app.event``, ``app.subscriptionEnded``,
    ``defaults.changed``, ``defaults.watchEnded``."""

    method: str
    params: Any


def _is_notification(msg: Any) -> bool:
    return isinstance(msg, dict) and "method" in msg and "id" not in msg


def _is_idless_error(msg: Any) -> bool:
    """An error the broker could not tie to a request (``"id": null``)."""
    return isinstance(msg, dict) and msg.get("id") is None and "error" in msg


def _is_closing_error(msg: Any) -> bool:
    """The error without an id the broker says last, why it closes the connection (its ``data``
    is ``{"closing": true}``): it answers no request."""
    if not _is_idless_error(msg) or not isinstance(msg["error"], dict):
        return False
    data = msg["error"].get("data")
    return isinstance(data, dict) and data.get("closing") is True


class _Entry:
    """A request written and not yet answered, in the order of answers: a call or a batch (its
    ``ids``), or a raw message the broker answers (no ids; its answer goes to ``receive()``)."""

    __slots__ = ("ids", "answer", "abandoned", "subscribe")

    def __init__(self, ids: Tuple[int, ...] = (), subscribe: bool = False):
        self.ids = ids
        self.answer: Any = None  # the message that answered a call or batch
        self.abandoned = False  # its caller gave up (timed out): its answer, when it comes, is dropped
        self.subscribe = subscribe  # an app.subscribe call: see _subscribed()


def _subscribed(notifications: Deque[Notification]) -> None:
    """``app.subscribe`` succeeded: the ``app.subscriptionEnded`` notifications queued before its
    answer ended the subscription it replaces (the broker answers in order), not this one: they
    are dropped, so that they do not end the next wait for an ``app.event``."""
    if any(n.method == SUBSCRIPTION_ENDED for n in notifications):
        kept = [n for n in notifications if n.method != SUBSCRIPTION_ENDED]
        notifications.clear()
        notifications.extend(kept)


def _ended(n: Notification) -> SubscriptionEnded:
    params = n.params if isinstance(n.params, dict) else {}
    reason = params.get("reason")
    return SubscriptionEnded(params.get("app"), reason if isinstance(reason, str)
                             else "another connection of the app subscribed")


def result_or_error(response: Any, method: Optional[str] = None) -> Any:
    """The ``result`` of a response object, or raise its ``error`` as :class:`BrokerError`."""
    if not isinstance(response, dict):
        raise BrokerError(-32603, f"not a response object: {response!r}", None, method)
    if "error" in response:
        raise BrokerError.from_error_object(response["error"], method)
    return response.get("result")


class Client(BrokerMethods):
    """A synchronous connection to the broker (one session).

    >>> with Client() as c:                                     # doctest: +SKIP
    ...     c.hello("tool")
    ...     c.url_open("deeplinkmyapp://item?id=42")

    Args:
        path: the socket path (default: :func:`default_socket_path`).
        timeout: seconds to wait for each response (``None``: forever); per call overridable.
        framing: ``"newline"`` (default) or ``"content-length"`` (LSP-style headers).
        role, bundle_id, token: when ``role`` is given, ``hello`` is sent right after connecting.
        connect: connect now (default) or later with :meth:`connect` / ``with``.
        max_frame: the largest message read from the broker, in bytes (default 64 MiB; ``None``:
            no limit). A longer one raises :class:`ProtocolError` and drops the connection.

    Notifications (``app.event``, ``defaults.changed``) that arrive while a call waits for its
    response are queued; read them with :meth:`next_notification`, :meth:`next_event` or
    :meth:`events`. A ``Client`` is not thread-safe: use one per thread.
    """

    def __init__(self, path: Optional[str] = None, *, timeout: Optional[float] = 30.0,
                 framing: str = _framing.NEWLINE, role: Optional[str] = None,
                 bundle_id: Optional[str] = None, token: Optional[str] = None,
                 connect: bool = True, max_frame: Optional[int] = _framing.DEFAULT_MAX_FRAME):
        self.path = path or default_socket_path()
        self.timeout = timeout
        self.framing = framing
        self.max_frame = max_frame
        self.hello_result: Optional[Dict[str, Any]] = None
        # The params of the app.subscriptionEnded that ended the last wait for an app.event.
        self.subscription_ended: Optional[Dict[str, Any]] = None
        self._sock: Optional[socket.socket] = None
        self._decoder = _framing.FrameDecoder(framing, max_frame, from_broker=True)
        self._notifications: Deque[Notification] = collections.deque()
        self._replies: Deque[Any] = collections.deque()
        self._next_id = 0
        # The requests written and not yet answered, oldest first: calls and batches (abandoned
        # ones included) and raw messages that get an answer. The broker answers a connection's
        # messages in the order it read them, so an error without an id (a request it could not
        # parse, a batch over its member limit) answers the oldest of these.
        self._order: Deque[_Entry] = collections.deque()
        self._by_id: Dict[int, _Entry] = {}  # the calls and batches in the order, by request id
        # Ids of the abandoned ones among them, oldest first (at most MAX_ABANDONED: past that
        # the oldest are forgotten, out of the order; their late answers dropped by id).
        self._abandoned: Dict[int, _Entry] = {}
        self._forgotten_id = 0  # the highest id of an abandoned call forgotten
        self._eof = False
        self._dropped: Optional[str] = None  # why the client dropped the connection
        # The broker's error object when it said why it closes the connection (data.closing).
        self._close_reason: Optional[Dict[str, Any]] = None
        # A protocol error found after messages it still had to hand over: the next read raises it.
        self._protocol_error: Optional[ProtocolError] = None
        self._hello = (role, bundle_id, token) if role is not None else None
        if connect:
            self.connect()

    # -- connection ----------------------------------------------------------------------------

    def connect(self) -> "Client":
        """Connect (and say ``hello`` when a role was given to the constructor). Does nothing while
        connected; once the connection has ended (the broker closed it, or the client dropped it
        after an error: :attr:`closed` is true), connects again, on a new session (subscribe or
        watch again). Queued notifications stay readable."""
        if self._sock is not None:
            if not self._eof:
                return self
            self.close()
        # What the old connection left: its errors without an id (why it closed), and the
        # requests it never answered (their answers never come).
        self._replies = collections.deque(m for m in self._replies
                                          if not _is_idless_error(m))
        self._order.clear()
        self._by_id.clear()
        self._abandoned.clear()
        self._forgotten_id = 0
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self.path)
        except OSError as e:
            s.close()
            raise BrokerConnectionError(f"cannot connect to sharebroker at {self.path}: {e}") from e
        self._sock = s
        self._eof = False
        self._last_message = None
        self._dropped = None
        self._close_reason = None
        self._protocol_error = None
        self._decoder = _framing.FrameDecoder(self.framing, self.max_frame, from_broker=True)
        if self._hello is not None:
            role, bundle_id, token = self._hello
            try:
                self.hello(role, bundle_id, token)
            except BaseException:
                self.close()
                raise
        return self

    def close(self) -> None:
        """Close the connection (idempotent). Queued notifications stay readable. A thread
        blocked reading this client (``next_notification``, ``events``) wakes up: it sees the
        connection closed."""
        if self._sock is not None:
            try:
                try:
                    # close() alone does not wake a recv() blocked in another thread (Linux).
                    self._sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self._sock.close()
            finally:
                self._sock = None

    @property
    def closed(self) -> bool:
        """True when not connected, or when the broker closed the connection."""
        return self._sock is None or self._eof

    @property
    def session(self) -> Optional[int]:
        """The session number from ``hello`` (``None`` before)."""
        return self.hello_result.get("session") if self.hello_result else None

    def fileno(self) -> int:
        """The socket's descriptor (for ``select``); notifications may already be queued, so
        check :attr:`pending_notifications` first."""
        return self._require().fileno()

    def __enter__(self) -> "Client":
        return self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<sharebroker.Client {self.path!r} {state} session={self.session}>"

    # -- I/O -----------------------------------------------------------------------------------

    def _require(self) -> socket.socket:
        if self._sock is None:
            raise BrokerConnectionError(f"not connected to sharebroker at {self.path}")
        return self._sock

    def _deadline(self, timeout: Any) -> Optional[float]:
        if timeout is _DEFAULT:
            timeout = self.timeout
        return None if timeout is None else time.monotonic() + timeout

    def _write(self, data: bytes) -> None:
        sock = self._require()
        if self._dropped is not None or self._close_reason is not None:
            raise self._closed()
        try:
            sock.settimeout(self.timeout)
            sock.sendall(data)
        except socket.timeout as e:
            # Part of the message may be on the wire: whatever followed would be glued to it.
            self._drop("a message was left half written (the broker did not take it in time)")
            raise TimeoutError(f"sharebroker at {self.path} did not take our message in time "
                               f"(the connection is dropped)") from e
        except OSError as e:
            self._eof = True
            self._read_what_is_left()
            if self._close_reason is not None:
                raise self._closed() from e
            raise ConnectionClosed(f"lost the connection to sharebroker at {self.path}: {e}") from e

    def _read_what_is_left(self) -> None:
        """After a write failed (the broker closed the connection, or stopped reading it): reads,
        for at most LEFTOVER_TIME seconds and LEFTOVER_BYTES bytes, what the broker sent before it
        closed, and dispatches it (answers included), so that its reason (an error with
        data.closing, e.g. a connection refused at once) is not lost to the broken pipe, also when
        it is still on its way. It stops at the end of the stream (normally at once: the broker
        has closed) and once the reason is read."""
        sock = self._sock
        if sock is None:
            return
        deadline = time.monotonic() + LEFTOVER_TIME
        read = 0
        try:
            while read < LEFTOVER_BYTES and self._close_reason is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                sock.settimeout(remaining)
                data = sock.recv(min(1 << 16, LEFTOVER_BYTES - read))
                if not data:
                    return
                read += len(data)
                try:
                    msgs = self._decoder.feed(data)
                except ProtocolError as e:
                    msgs, read = e.messages, LEFTOVER_BYTES  # (not the protocol: what came before it still counts)
                for msg in msgs:
                    self._last_message = msg
                    self._dispatch(msg)
        except OSError:
            return  # (nothing more to read in time, or a reset: the broken pipe says enough)

    def _fill(self, deadline: Optional[float]) -> None:
        """Read once from the socket (waiting until ``deadline``) and sort what arrived."""
        sock = self._require()
        if self._protocol_error is not None:
            e, self._protocol_error = self._protocol_error, None
            raise e
        if self._eof:
            raise self._closed()
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise TimeoutError(f"no answer from sharebroker at {self.path} in time")
        try:
            sock.settimeout(remaining)
            data = sock.recv(1 << 16)
        except socket.timeout as e:
            raise TimeoutError(f"no answer from sharebroker at {self.path} in time") from e
        except OSError as e:
            self._eof = True
            raise ConnectionClosed(f"lost the connection to sharebroker at {self.path}: {e}") from e
        if not data:
            self._eof = True
            raise self._closed()
        try:
            msgs = self._decoder.feed(data)
        except ProtocolError as e:
            # Not the broker's protocol (a message over max_frame, invalid JSON): nothing after
            # it can be trusted. What came before it is handed over first; the next read raises.
            self._drop(str(e))
            if not e.messages:
                raise
            msgs, self._protocol_error = e.messages, e
        for msg in msgs:
            self._last_message = msg
            self._dispatch(msg)

    def _dispatch(self, msg: Any) -> None:
        """Hands one message to the request it answers (a call, a batch), or queues it (a
        notification; anything else for :meth:`receive`)."""
        if _is_notification(msg):
            self._notifications.append(Notification(msg["method"], msg.get("params")))
            return
        # Only integer ids are ours (not true, 1.0, or an unhashable list/object).
        if isinstance(msg, list):
            ids = [r["id"] for r in msg if isinstance(r, dict) and type(r.get("id")) is int]
        else:
            ids = [msg["id"]] if isinstance(msg, dict) and type(msg.get("id")) is int else []
        entry = next((self._by_id[i] for i in ids if i in self._by_id), None)
        if entry is not None:
            self._answered(entry)
            if entry.subscribe and isinstance(msg, dict) and "result" in msg:
                _subscribed(self._notifications)
            if not entry.abandoned:
                entry.answer = msg
            return  # (an abandoned one's late answer is dropped)
        if any(i <= self._forgotten_id for i in ids):
            return  # the late answer of an abandoned call forgotten (MAX_ABANDONED): dropped
        if _is_closing_error(msg):
            # Why the broker closes the connection, the last thing it sends: it answers no
            # request (and keeps no place in the order of answers). The connection has ended:
            # calls waiting and later ones raise ConnectionClosed with it as the reason; it stays
            # readable with receive(), as a message no call waits for.
            self._close_reason = msg["error"]
            self._eof = True
        elif _is_idless_error(msg) and self._order:
            # An error the broker could not tie to a request: it answers the oldest request
            # still waiting, and only that one (dropped when its caller gave up).
            oldest = self._order[0]
            self._answered(oldest)
            if oldest.ids:
                if not oldest.abandoned:
                    oldest.answer = msg
                return
        else:
            # A message no call waits for: the oldest raw request's answer.
            raw = next((e for e in self._order if not e.ids), None)
            if raw is not None:
                self._answered(raw)
        self._replies.append(msg)

    def _answered(self, entry: _Entry) -> None:
        """``entry`` has its answer: it, and every request written before it (answered before it,
        in order), leave the order of answers."""
        if entry not in self._order:
            return
        while self._order:
            done = self._order.popleft()
            for i in done.ids:
                self._by_id.pop(i, None)
                self._abandoned.pop(i, None)
            if done is entry:
                return

    def _abandon(self, entry: _Entry) -> None:
        """Its caller gave up: its answer, when it comes, is dropped (it keeps its place). Past
        MAX_ABANDONED ids of such ones (a peer that never answers), the oldest are forgotten."""
        if entry not in self._order:
            return  # (answered meanwhile)
        entry.abandoned = True
        for i in entry.ids:
            self._abandoned[i] = entry
        while len(self._abandoned) > MAX_ABANDONED:
            old = next(iter(self._abandoned.values()))
            for i in old.ids:
                self._abandoned.pop(i, None)
                self._by_id.pop(i, None)
                self._forgotten_id = max(self._forgotten_id, i)
            self._order.remove(old)

    def _drop(self, why: str) -> None:
        """Drop a connection the client cannot go on using: later calls raise ConnectionClosed."""
        self._eof = True
        self._dropped = why
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _closed(self) -> ConnectionClosed:
        """The closed connection's error, with the broker's reason: the error it said it closes
        with (data.closing: a message over its limit, a session a manifest reload ended, a
        connection refused at once), or else the error without an id it sent last."""
        if self._dropped is not None:
            return ConnectionClosed(f"dropped the connection to sharebroker at {self.path}: {self._dropped}")
        msg = getattr(self, "_last_message", None)
        if self._close_reason is not None:
            msg = {"error": self._close_reason}
        if isinstance(msg, dict) and msg.get("id") is None and isinstance(msg.get("error"), dict):
            e = msg["error"]
            return ConnectionClosed(f"sharebroker at {self.path} closed the connection: {e.get('message')} ({e.get('code')})", e)
        return ConnectionClosed(f"sharebroker at {self.path} closed the connection")

    def _send(self, message: Any, entry: Optional[_Entry]) -> None:
        """Writes a message (or its frame); ``entry``, for one the broker answers, takes its place
        in the order of answers once it is written (the client reads only in its own calls, so
        no answer can come before)."""
        self._write(message if isinstance(message, bytes) else _framing.encode(message, self.framing))
        if entry is not None:
            self._order.append(entry)
            for i in entry.ids:
                self._by_id[i] = entry

    def send_raw(self, message: Union[Any, str, bytes]) -> None:
        """Send one message as is: a JSON value (object, batch list, ...) or a JSON text
        (``str``/``bytes``, sent unchanged even when it is not valid JSON). Framed with the
        connection's framing. Its answer is read with :meth:`receive`.

        The client works out whether the broker will answer it (everything but a valid
        notification, a batch of only those, or a blank line gets an answer), so that an error
        without an id answering it is not taken for a later call's. Use ids that are not numbers
        (the client's calls use numbers counting up from 1)."""
        frame = _framing.encode(message, self.framing)
        self._send(frame, _Entry() if _framing.answer_expected(message, self.framing) else None)

    def receive(self, timeout: Any = _DEFAULT) -> Any:
        """The next message that is not a notification (a response object, or a batch's list),
        oldest first. Raises ``TimeoutError`` when none arrives in time."""
        deadline = self._deadline(timeout)
        while not self._replies:
            self._fill(deadline)
        return self._replies.popleft()

    def call_raw(self, message: Union[Any, str, bytes], timeout: Any = _DEFAULT) -> Any:
        """:meth:`send_raw` then :meth:`receive`: the broker's raw answer (``dict`` or ``list``)."""
        self.send_raw(message)
        return self.receive(timeout)

    # -- JSON-RPC ------------------------------------------------------------------------------

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def call(self, method: str, params: Optional[Dict[str, Any]] = None, *, timeout: Any = _DEFAULT) -> Any:
        """Call any method and return its ``result``; raise :class:`BrokerError` for an error.

        Notifications arriving meanwhile are queued. ``params`` ``None`` sends no params.
        """
        rid = self._new_id()
        request: Dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            request["params"] = params
        entry = _Entry((rid,), subscribe=method == "app.subscribe")
        self._send(request, entry)
        result = result_or_error(self._wait(entry, self._deadline(timeout)), method)
        if method == "hello" and isinstance(result, dict):
            self.hello_result = result
        elif method == "app.subscribe":
            self.subscription_ended = None
        return result

    def _wait(self, entry: _Entry, deadline: Optional[float]) -> Any:
        """Reads until ``entry`` has its answer (its id's, or an error without an id that answers
        it in order); one that gives up (a timeout) leaves it abandoned: its late answer, when
        it comes, is dropped, not given to a later call."""
        try:
            while entry.answer is None:
                self._fill(deadline)
        except BaseException:
            self._abandon(entry)
            raise
        return entry.answer

    def notify(self, method: str, params: Optional[Dict[str, Any]] = None) -> None:
        """Send a JSON-RPC notification (no id): executed by the broker, never answered. One the
        broker could not parse (values nested over 256 levels) is refused here with
        :class:`BrokerError` -32700 and not sent: its error would carry no id, and answer no call."""
        self._send(_unanswered_notification(method, params), None)

    def batch(self, calls: Sequence[Tuple[str, Optional[Dict[str, Any]]]], *,
              timeout: Any = _DEFAULT) -> List[Any]:
        """Send several calls as one JSON-RPC batch; returns, in order, each call's result or
        its :class:`BrokerError` (returned, not raised)."""
        if not calls:
            raise ValueError("an empty batch is an invalid request")
        requests, ids = [], []
        for method, params in calls:
            rid = self._new_id()
            ids.append(rid)
            req: Dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
            if params is not None:
                req["params"] = params
            requests.append(req)
        entry = _Entry(tuple(ids))
        self._send(requests, entry)
        reply = self._wait(entry, self._deadline(timeout))
        if not isinstance(reply, list):
            # The broker refused the whole batch (over --max-batch: -32600; one it cannot parse:
            # -32700) with one error without an id, as the asyncio client raises.
            result_or_error(reply, "batch")
            reply = [reply]
        return batch_results(calls, ids, reply)

    # -- notifications -------------------------------------------------------------------------

    @property
    def pending_notifications(self) -> int:
        """How many notifications are queued (already read from the socket)."""
        return len(self._notifications)

    def _pop(self, method: Optional[str]) -> Optional[Notification]:
        for i, n in enumerate(self._notifications):
            if method is None or n.method == method or (method == APP_EVENT and n.method == SUBSCRIPTION_ENDED):
                del self._notifications[i]
                if method == APP_EVENT and n.method == SUBSCRIPTION_ENDED:
                    self.subscription_ended = n.params if isinstance(n.params, dict) else {}
                    raise _ended(n)
                return n
        return None

    def next_notification(self, timeout: Optional[float] = None,
                          method: Optional[str] = None) -> Optional[Notification]:
        """The next notification (of ``method`` when given; others stay queued), waiting up to
        ``timeout`` seconds (``None``: forever). Returns ``None`` on timeout; raises
        :class:`ConnectionClosed` when the broker closed the connection and none is queued.

        Waiting for ``method="app.event"``, an ``app.subscriptionEnded`` (another connection of
        the app subscribed and took its events over; the events that came before it are
        returned first) raises :class:`SubscriptionEnded` with the broker's reason, and its
        params go to :attr:`subscription_ended`: no more events would come. The connection
        stays open."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            n = self._pop(method)
            if n is not None:
                return n
            try:
                self._fill(deadline)
            except TimeoutError:
                return None

    def next_event(self, timeout: Optional[float] = None) -> Optional[Dict[str, Any]]:
        """The params of the next ``app.event`` (``{id, kind, url | webpageURL, via, ...}``),
        or ``None`` on timeout. Raises :class:`SubscriptionEnded` once another connection of the
        app took its events over, as :meth:`next_notification` does."""
        n = self.next_notification(timeout, "app.event")
        return None if n is None else n.params

    def events(self, timeout: Optional[float] = None, method: Optional[str] = None) -> Iterator[Notification]:
        """Iterate over notifications (of ``method`` when given) as they arrive. Ends when
        ``timeout`` seconds pass without one (``None``: never) or the connection closes, and,
        with ``method="app.event"``, when another connection of the app took its events over
        (``app.subscriptionEnded``: its params are then in :attr:`subscription_ended`; the
        connection stays open). Ending it does not unsubscribe: call :meth:`app_unsubscribe`."""
        while True:
            try:
                n = self.next_notification(timeout, method)
            except (ConnectionClosed, SubscriptionEnded):
                return
            if n is None:
                return
            yield n


def _unanswered_notification(method: str, params: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """A notification's message; raises :class:`BrokerError` -32700 (nothing sent) for one the
    broker could not parse: its error would carry no id, and answer no call."""
    message: Dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    why = _framing.parse_problem(_framing.dumps(message).decode("utf-8"))
    if why is not None:
        raise BrokerError(-32700, f"not sent: the broker could not parse this notification ({why}), "
                                  f"and its error would answer no call", None, method)
    return message


def batch_results(calls: Sequence[Tuple[str, Optional[Dict[str, Any]]]], ids: List[int], reply: List[Any]) -> List[Any]:
    """A batch's reply in the order of its calls: each one's result, or its :class:`BrokerError`."""
    by_id = {r.get("id"): r for r in reply if isinstance(r, dict)}
    out: List[Any] = []
    for (method, _), rid in zip(calls, ids):
        try:
            out.append(result_or_error(by_id.get(rid), method))
        except BrokerError as e:
            out.append(e)
    return out


def connect(path: Optional[str] = None, **kwargs: Any) -> Client:
    """Shorthand for ``Client(path, **kwargs)``."""
    return Client(path, **kwargs)
