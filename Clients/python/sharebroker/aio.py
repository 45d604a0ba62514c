"""An asyncio sharebroker client (same methods as :class:`sharebroker.Client`, awaited).

    async with AsyncClient(role="app", bundle_id="com.mycompany.myapp") as c:
        await c.app_subscribe()
        async for n in c.events(method="app.event"):
            await c.app_ack(n.params["id"])
"""

import asyncio
import collections
import socket
from typing import Any, AsyncIterator, Deque, Dict, List, Optional, Sequence, Tuple, Union

from . import framing as _framing
from .client import (APP_EVENT, MAX_ABANDONED, SUBSCRIPTION_ENDED, Notification, _ended, _is_closing_error,
                     _is_idless_error, _is_notification, _subscribed, _unanswered_notification, batch_results,
                     default_socket_path, result_or_error)
from .errors import BrokerConnectionError, BrokerError, ConnectionClosed, ProtocolError, SubscriptionEnded
from .methods import BrokerMethods

_DEFAULT = object()


_END = object()  # put in the replies queue when the connection has ended

# After the connection failed (a write into a socket the broker had closed: EPIPE, ECONNRESET),
# what the client still reads of what the broker sent before it closed (its closing error, the
# answers before it): at most this long, and at most this many bytes.
LEFTOVER_TIME = 0.2
LEFTOVER_BYTES = 1 << 20


class _Protocol(asyncio.StreamReaderProtocol):
    """asyncio's stream protocol, with one addition: when the transport fails (a write into a
    socket the broker had closed), it keeps a duplicate of the socket, taken before the transport
    closes its own, so that the client can still read what the broker sent before it closed
    (asyncio drops the unread bytes with the socket)."""

    def __init__(self, reader: asyncio.StreamReader, on_failed: Any) -> None:
        super().__init__(reader)
        self._on_failed = on_failed
        self._sock_transport: Optional[asyncio.BaseTransport] = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._sock_transport = transport
        super().connection_made(transport)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        # (called before the transport closes its socket)
        if isinstance(exc, OSError) and self._sock_transport is not None:
            sock = self._sock_transport.get_extra_info("socket")
            if sock is not None:
                try:
                    self._on_failed(sock.dup())
                except OSError:
                    pass
        super().connection_lost(exc)


class _RawEntry:
    """A raw message the broker answers, in the order of answers (its answer goes to
    :meth:`AsyncClient.receive`)."""


class AsyncClient(BrokerMethods):
    """An asyncio connection to the broker. A background task reads the socket: responses go to
    their callers, notifications to a queue (:meth:`next_notification`, :meth:`events`).
    Concurrent calls from several tasks are fine.

    ``max_frame``: the largest message read from the broker, in bytes (default 64 MiB; ``None``: no
    limit); a longer one drops the connection, and calls fail with :class:`ProtocolError`.

    ``max_queued_notifications`` (default 1,000; ``None``: no limit): back-pressure. While that
    many notifications wait unconsumed and nothing waits for a message (no call, batch,
    :meth:`receive` or :meth:`next_notification` waiting), the client stops reading the socket,
    until fewer than half that many wait: the broker then holds the rest (and drops a subscriber
    that does not read, as it drops any slow client). Whatever waits for a message keeps the
    client reading, so a call made while notifications wait unconsumed (an ``app_ack`` inside an
    ``async for`` over :meth:`events`) always gets its answer; the queue may then pass the mark."""

    def __init__(self, path: Optional[str] = None, *, timeout: Optional[float] = 30.0,
                 framing: str = _framing.NEWLINE, role: Optional[str] = None,
                 bundle_id: Optional[str] = None, token: Optional[str] = None,
                 max_frame: Optional[int] = _framing.DEFAULT_MAX_FRAME,
                 max_queued_notifications: Optional[int] = 1000):
        self.path = path or default_socket_path()
        self.timeout = timeout
        self.framing = framing
        self.max_frame = max_frame
        self.max_queued_notifications = max_queued_notifications
        self.hello_result: Optional[Dict[str, Any]] = None
        # The params of the app.subscriptionEnded that ended the last wait for an app.event.
        self.subscription_ended: Optional[Dict[str, Any]] = None
        self._hello = (role, bundle_id, token) if role is not None else None
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._task: Optional["asyncio.Task[None]"] = None
        self._futures: Dict[int, "asyncio.Future[Any]"] = {}
        self._subscribe_ids: set = set()  # the ids of app.subscribe calls waiting (see _subscribed)
        # Batches waiting for their reply (a list): each request id of a batch → its future.
        self._batches: Dict[int, "asyncio.Future[Any]"] = {}
        # Requests written and not yet answered, oldest first: calls and batches (their futures),
        # and raw messages the broker answers (a _RawEntry). The broker answers a connection's
        # requests in the order it read them, so an error without an id (a request it could not
        # parse, a batch over its member limit) answers the oldest of these.
        self._order: Deque[Any] = collections.deque()
        # Ids of calls and batches that timed out or were cancelled → their future: their late
        # answers are dropped (not queued for receive()). At most MAX_ABANDONED: past that the
        # oldest are forgotten (out of the order; their late answers dropped by id).
        self._abandoned: Dict[int, "asyncio.Future[Any]"] = {}
        self._forgotten_id = 0  # the highest id of an abandoned call forgotten
        self._notifications: Deque[Notification] = collections.deque()
        # Created in connect(): before Python 3.10 they bind to the loop current at creation.
        self._replies: "Optional[asyncio.Queue[Any]]" = None
        self._changed: Optional[asyncio.Event] = None
        self._resume: Optional[asyncio.Event] = None  # set when the paused read loop should look again
        self._waiting = 0  # receive() and next_notification() calls waiting for a message
        self._next_id = 0
        self._closed_error: Optional[BaseException] = None
        # The broker's error object when it said why it closes the connection (data.closing).
        self._close_reason: Optional[Dict[str, Any]] = None
        # A duplicate of the socket taken when the transport failed: what is left to read on it.
        self._leftover: Optional[socket.socket] = None

    async def connect(self) -> "AsyncClient":
        """Connect (and say ``hello`` when a role was given). Does nothing while connected; once
        the connection has ended (the broker closed it, or it failed), connects again, on a new
        session (subscribe or watch again). Queued notifications stay readable."""
        if self._writer is not None:
            if self._closed_error is None:
                return self
            await self.close()
        try:
            self._reader, self._writer = await asyncio.wait_for(self._open(), self.timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise BrokerConnectionError(f"cannot connect to sharebroker at {self.path}: {e}") from e
        self._closed_error = None
        self._close_reason = None
        self._forgotten_id = 0
        self._replies = asyncio.Queue()
        self._changed = asyncio.Event()
        self._resume = asyncio.Event()
        self._task = asyncio.ensure_future(self._read_loop())
        if self._hello is not None:
            try:
                await self.hello(*self._hello)
            except BaseException:
                await self.close()
                raise
        return self

    async def _open(self) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """``asyncio.open_unix_connection``, with the protocol that keeps what is left to read
        when the transport fails."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(loop=loop)
        protocol = _Protocol(reader, self._transport_failed)
        transport, _ = await loop.create_unix_connection(lambda: protocol, self.path)
        return reader, asyncio.StreamWriter(transport, protocol, reader, loop)

    def _transport_failed(self, sock: socket.socket) -> None:
        """The transport failed (a write or read error) and is about to close its socket:
        ``sock``, a duplicate of it, is kept for the read loop to read what is left."""
        if self._task is None or self._task.done() or self._leftover is not None:
            sock.close()  # (the read loop is over: nobody reads it)
            return
        self._leftover = sock

    def _drop_leftover(self) -> None:
        if self._leftover is not None:
            self._leftover.close()
            self._leftover = None

    async def _read_leftover(self, decoder: "_framing.FrameDecoder") -> Any:
        """After the transport failed (a write into a socket the broker had closed): reads, for
        at most LEFTOVER_TIME seconds and LEFTOVER_BYTES bytes, what the broker sent before it
        closed and the transport had not read, and dispatches it (answers included), so that its
        reason for closing (an error with data.closing) is not lost to the broken pipe. Returns
        the last message read (``None`` when none)."""
        sock, last = self._leftover, None
        if sock is None:
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LEFTOVER_TIME
        read = 0
        try:
            sock.setblocking(False)
            while read < LEFTOVER_BYTES and self._close_reason is None:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    data = await asyncio.wait_for(loop.sock_recv(sock, min(1 << 16, LEFTOVER_BYTES - read)), remaining)
                except (OSError, asyncio.TimeoutError):
                    break  # (nothing more to read: the broken pipe says enough)
                if not data:
                    break
                read += len(data)
                try:
                    messages = decoder.feed(data)
                except ProtocolError as e:
                    messages = e.messages
                    read = LEFTOVER_BYTES  # (not the protocol: what came before it still counts)
                for msg in messages:
                    last = msg
                    self._dispatch(msg)
        finally:
            self._drop_leftover()
        return last

    async def close(self) -> None:
        """Close the connection (idempotent). What is still unwritten gets ``timeout`` seconds (at
        most 2) to go out; then the connection is dropped (a peer that does not read cannot keep
        ``close()`` waiting)."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()
            limit = 2.0 if self.timeout is None else min(self.timeout, 2.0)
            try:
                await asyncio.wait_for(asyncio.shield(writer.wait_closed()), limit)
            except asyncio.TimeoutError:
                writer.transport.abort()
            except OSError:
                pass
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None
        self._drop_leftover()

    async def __aenter__(self) -> "AsyncClient":
        return await self.connect()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _read_loop(self) -> None:
        decoder = _framing.FrameDecoder(self.framing, self.max_frame, from_broker=True)
        assert self._reader is not None
        error: BaseException = ConnectionClosed(f"sharebroker at {self.path} closed the connection")
        last: Any = None
        try:
            while True:
                await self._backpressure()
                data = await self._reader.read(1 << 16)
                if not data:
                    if isinstance(last, dict) and last.get("id") is None and isinstance(last.get("error"), dict):
                        # The last thing the broker said before closing was an error without an
                        # id: what the closed connection reports from now on.
                        error = self._closed_with(last["error"])
                    break
                # (the messages completed before a bad frame, in this read, still count: a
                # call's answer among them is its answer)
                bad = None
                try:
                    messages = decoder.feed(data)
                except ProtocolError as e:
                    messages, bad = e.messages, e
                for msg in messages:
                    last = msg
                    self._dispatch(msg)
                if self._close_reason is not None:
                    # The broker said why it closes the connection (a session a manifest reload
                    # ended, a message over its size limit, a connection refused at once): the
                    # connection has ended, with that reason, whatever the socket says next.
                    error = self._closed_with(self._close_reason)
                    break
                if bad is not None:
                    raise bad
        except asyncio.CancelledError:
            raise
        except Exception as e:  # connection reset, protocol error
            error = e
            if isinstance(e, ProtocolError) and self._writer is not None:
                self._writer.transport.abort()  # not the protocol: nothing after it can be trusted
            elif isinstance(e, OSError):
                # A write into a socket the broker had closed (or a read error): what the broker
                # sent before it closed may still be unread, its reason for closing among it.
                # (as at the end of the stream: its closing error, or else an error without an
                # id it sent last, is the reason)
                left = await self._read_leftover(decoder)
                if self._close_reason is not None:
                    error = self._closed_with(self._close_reason)
                elif isinstance(left, dict) and left.get("id") is None and isinstance(left.get("error"), dict):
                    error = self._closed_with(left["error"])
        finally:
            self._drop_leftover()
            self._closed_error = error
            for fut in list(self._futures.values()) + list(self._batches.values()):
                if not fut.done():
                    fut.set_exception(error)
            self._futures.clear()
            self._batches.clear()
            self._order.clear()
            self._abandoned.clear()
            self._changed.set()
            if self._replies is not None:
                self._replies.put_nowait(_END)  # (receive() raises once what came before is read)

    def _closed_with(self, reason: Dict[str, Any]) -> ConnectionClosed:
        return ConnectionClosed(f"sharebroker at {self.path} closed the connection: "
                                f"{reason.get('message')} ({reason.get('code')})", reason)

    def _closed(self) -> ConnectionClosed:
        """The ended connection's error for a new call (the broker's reason kept)."""
        e = self._closed_error
        return ConnectionClosed(str(e), e.reason if isinstance(e, ConnectionClosed) else None)

    def _dispatch(self, msg: Any) -> None:
        """Hands one message from the broker to whoever waits for it (a call, a batch), or queues
        it (a notification; anything else for :meth:`receive`)."""
        assert self._replies is not None and self._changed is not None
        # Only integer ids are ours (not true, 1.0, or an unhashable list/object).
        rid = msg.get("id") if isinstance(msg, dict) and type(msg.get("id")) is int else None
        batch = self._batch_of(msg) if isinstance(msg, list) and self._batches else None
        if _is_notification(msg):
            self._notifications.append(Notification(msg["method"], msg.get("params")))
            self._changed.set()
        elif rid is not None and rid in self._futures:
            fut = self._futures.pop(rid)
            self._answered(fut)
            if rid in self._subscribe_ids and "result" in msg:
                _subscribed(self._notifications)
            if not fut.done():
                fut.set_result(msg)
        elif rid is not None and rid in self._abandoned:
            self._answered(self._abandoned[rid])  # a late answer: dropped
        elif rid is not None and rid <= self._forgotten_id:
            pass  # the late answer of an abandoned call forgotten (MAX_ABANDONED): dropped
        elif batch is not None:
            for k in [k for k, f in self._batches.items() if f is batch]:
                del self._batches[k]
            self._answered(batch)
            if not batch.done():
                batch.set_result(msg)
        elif isinstance(msg, list) and any(isinstance(r, dict) and type(r.get("id")) is int
                                           and r["id"] in self._abandoned for r in msg):
            self._answered(next(self._abandoned[r["id"]] for r in msg if isinstance(r, dict)
                                and type(r.get("id")) is int and r["id"] in self._abandoned))
        elif isinstance(msg, list) and any(isinstance(r, dict) and type(r.get("id")) is int
                                           and r["id"] <= self._forgotten_id for r in msg):
            pass  # the late reply of an abandoned batch forgotten (MAX_ABANDONED): dropped
        elif _is_closing_error(msg):
            # Why the broker closes the connection, the last thing it sends: it answers no
            # request (and keeps no place in the order of answers). The read loop ends the
            # connection with it as the reason (calls waiting raise ConnectionClosed); it stays
            # readable with receive(), as a message no call waits for.
            self._close_reason = msg["error"]
            self._replies.put_nowait(msg)
        elif _is_idless_error(msg) and self._order and not isinstance(self._order[0], _RawEntry):
            # An error the broker could not tie to a request (one it could not parse,
            # a batch over its member limit): it answers the oldest request still
            # waiting, and only that one.
            fut = self._order[0]
            self._answered(fut)
            if not fut.done():
                fut.set_exception(BrokerError.from_error_object(msg["error"]))
            # (else the call timed out or was cancelled: its answer is dropped)
        else:
            # A message no call waits for: the oldest raw request's answer (an error without an
            # id included, when that is the oldest request), or a notice (nothing waits).
            raw = next((e for e in self._order if isinstance(e, _RawEntry)), None)
            if raw is not None:
                self._answered(raw)
            self._replies.put_nowait(msg)

    def _must_read(self) -> bool:
        """Does something wait for a message from the socket (a call, a batch, receive(),
        next_notification())? Then the client reads, however many notifications wait."""
        return bool(self._order) or self._waiting > 0

    async def _backpressure(self) -> None:
        """Waits, before the next read, while at least ``max_queued_notifications`` notifications
        wait unconsumed and nothing waits for a message; reads on once fewer than half wait."""
        high = self.max_queued_notifications
        if not high or len(self._notifications) < high:
            return
        assert self._resume is not None
        while len(self._notifications) >= max(1, high // 2) and not self._must_read():
            self._resume.clear()
            await self._resume.wait()

    def _wake_reader(self) -> None:
        if self._resume is not None:
            self._resume.set()

    def _answered(self, fut: Any) -> None:
        """``fut``'s request has its answer: it, and every request written before it (answered
        before it, in order), leave the order of answers."""
        if fut in self._order:
            while self._order:
                done = self._order.popleft()
                for k in [k for k, f in self._abandoned.items() if f is done]:
                    del self._abandoned[k]
                if done is fut:
                    break

    def _abandon(self, ids: Sequence[int], fut: "asyncio.Future[Any]") -> None:
        """A call or batch that timed out or was cancelled: its late answer is dropped. Past
        MAX_ABANDONED ids of such ones (a peer that never answers), the oldest are forgotten: out
        of the order of answers, their late answers dropped by id (ids count up)."""
        for rid in ids:
            self._abandoned[rid] = fut
        while len(self._abandoned) > MAX_ABANDONED:
            old = next(iter(self._abandoned.values()))
            for k in [k for k, f in self._abandoned.items() if f is old]:
                del self._abandoned[k]
                self._forgotten_id = max(self._forgotten_id, k)
            try:
                self._order.remove(old)
            except ValueError:
                pass

    def _send(self, message: Any) -> None:
        if self._writer is None:
            raise BrokerConnectionError(f"not connected to sharebroker at {self.path}")
        if self._closed_error is not None:
            raise self._closed()
        self._writer.write(message if isinstance(message, bytes) else _framing.encode(message, self.framing))

    async def send_raw(self, message: Union[Any, str, bytes]) -> None:
        """Send one message as is (a JSON value, or a JSON text). Its answer is read with
        :meth:`receive`. As :meth:`Client.send_raw`, it takes its place in the order of answers
        when the broker will answer it, so that an error without an id answering it is not taken
        for a call's; use ids that are not numbers."""
        frame = _framing.encode(message, self.framing)
        if _framing.answer_expected(message, self.framing):
            entry = _RawEntry()
            self._order.append(entry)
            self._wake_reader()
            try:
                self._send(frame)
            except BaseException:
                self._order.remove(entry)  # never sent (appended last, with no await since)
                raise
        else:
            self._send(frame)
        assert self._writer is not None
        await self._writer.drain()

    async def receive(self, timeout: Any = _DEFAULT) -> Any:
        """The next message that answers no pending call (e.g. a batch's list)."""
        if self._replies is None:
            raise BrokerConnectionError(f"not connected to sharebroker at {self.path}")
        self._waiting += 1
        self._wake_reader()
        try:
            msg = await asyncio.wait_for(self._replies.get(), self.timeout if timeout is _DEFAULT else timeout)
        except asyncio.TimeoutError as e:  # (not the built-in TimeoutError before Python 3.11)
            raise TimeoutError(f"no message from sharebroker at {self.path} in time") from e
        finally:
            self._waiting -= 1
        if msg is _END:  # the connection has ended, and every message before was read
            self._replies.put_nowait(_END)
            raise self._closed()
        return msg

    async def call(self, method: str, params: Optional[Dict[str, Any]] = None, *, timeout: Any = _DEFAULT) -> Any:
        """Call any method and return its result; raise :class:`BrokerError` for an error."""
        self._next_id += 1
        rid = self._next_id
        request: Dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            request["params"] = params
        fut: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        self._futures[rid] = fut
        if method == "app.subscribe":
            self._subscribe_ids.add(rid)
        try:
            msg = await self._send_and_wait(request, fut, timeout, repr(method))
        finally:
            self._futures.pop(rid, None)
            self._subscribe_ids.discard(rid)
            if fut.cancelled() and fut in self._order:
                self._abandon([rid], fut)  # timed out or cancelled: its late answer is dropped
        result = result_or_error(msg, method)
        if method == "hello" and isinstance(result, dict):
            self.hello_result = result
        elif method == "app.subscribe":
            self.subscription_ended = None
        return result

    def _batch_of(self, reply: List[Any]) -> "Optional[asyncio.Future[Any]]":
        for r in reply:
            if isinstance(r, dict) and type(r.get("id")) is int and r["id"] in self._batches:
                return self._batches[r["id"]]
        return None

    async def batch(self, calls: Sequence[Tuple[str, Optional[Dict[str, Any]]]], *,
                    timeout: Any = _DEFAULT) -> List[Any]:
        """Send several calls as one JSON-RPC batch; returns, in order, each call's result or
        its :class:`BrokerError` (returned, not raised), as :meth:`Client.batch` does."""
        if not calls:
            raise ValueError("an empty batch is an invalid request")
        requests, ids = [], []
        for method, params in calls:
            self._next_id += 1
            ids.append(self._next_id)
            req: Dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
            if params is not None:
                req["params"] = params
            requests.append(req)
        fut: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        for rid in ids:
            self._batches[rid] = fut
        try:
            reply = await self._send_and_wait(requests, fut, timeout, "a batch")
        finally:
            for rid in ids:
                self._batches.pop(rid, None)
            if fut.cancelled() and fut in self._order:
                self._abandon(ids, fut)  # timed out or cancelled: its late reply is dropped
        return batch_results(calls, ids, reply)

    async def _send_and_wait(self, message: Any, fut: "asyncio.Future[Any]", timeout: Any, what: str) -> Any:
        """Sends `message` and waits for `fut` (its answer, set by the read loop), both within the
        timeout: a peer that does not read cannot hold the call past it."""
        limit = self.timeout if timeout is _DEFAULT else timeout
        loop = asyncio.get_running_loop()
        deadline = None if limit is None else loop.time() + limit
        try:
            self._order.append(fut)
            self._wake_reader()  # its answer may be behind notifications nobody consumed yet
            try:
                try:
                    self._send(message)  # the whole frame is in the transport's buffer from here on
                except (BrokerConnectionError, ConnectionClosed):
                    # (nothing was written: it waits for no answer; left in the order, it would
                    # take the next error without an id, and keep back-pressure off, for good.
                    # It was appended last, with no await since)
                    self._order.pop()
                    raise
                assert self._writer is not None
                await asyncio.wait_for(self._writer.drain(), limit)
            except asyncio.TimeoutError:
                fut.cancel()  # abandoned: its answer, if it ever comes, is dropped
                raise
            except BrokerConnectionError:
                raise  # not sent (not connected, or the connection has ended): no answer to wait for
            except OSError:
                # The broker may have refused the message and closed (a message over its size
                # limit: ConnectionClosed with its reason), or the client dropped a peer that does
                # not speak the protocol: that error, on the way, says why better than the broken
                # pipe.
                try:
                    await asyncio.wait_for(asyncio.shield(fut), 1.0)
                except (BrokerError, ProtocolError, ConnectionClosed):
                    raise
                except Exception:
                    pass
                raise
            return await asyncio.wait_for(fut, None if deadline is None else max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError as e:  # (not the built-in TimeoutError before Python 3.11)
            raise TimeoutError(f"no answer from sharebroker at {self.path} to {what} in time") from e

    async def notify(self, method: str, params: Optional[Dict[str, Any]] = None) -> None:
        """Send a notification (no id, never answered). One the broker could not parse is refused
        with :class:`BrokerError` -32700 and not sent, as by :meth:`Client.notify`."""
        self._send(_unanswered_notification(method, params))
        assert self._writer is not None
        await self._writer.drain()

    async def next_notification(self, timeout: Optional[float] = None,
                                method: Optional[str] = None) -> Optional[Notification]:
        """The next notification (of ``method``), or ``None`` after ``timeout`` seconds. Waiting
        for ``method="app.event"``, an ``app.subscriptionEnded`` (another connection of the app
        took its events over; events that came before it are returned first) raises
        :class:`SubscriptionEnded`, its params in :attr:`subscription_ended`, as
        :meth:`Client.next_notification` does."""
        if self._changed is None:
            raise BrokerConnectionError(f"not connected to sharebroker at {self.path}")
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            for i, n in enumerate(self._notifications):
                ended = method == APP_EVENT and n.method == SUBSCRIPTION_ENDED
                if method is None or n.method == method or ended:
                    del self._notifications[i]
                    self._wake_reader()  # (it reads on once few enough wait)
                    if ended:
                        self.subscription_ended = n.params if isinstance(n.params, dict) else {}
                        raise _ended(n)
                    return n
            if self._closed_error is not None:
                raise self._closed()
            self._changed.clear()
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return None
            self._waiting += 1  # none queued is one it takes: the client reads until one comes
            self._wake_reader()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                return None
            finally:
                self._waiting -= 1

    async def next_event(self, timeout: Optional[float] = None) -> Optional[Dict[str, Any]]:
        """The params of the next ``app.event``, or ``None`` on timeout; raises
        :class:`SubscriptionEnded` once another connection of the app took its events over."""
        n = await self.next_notification(timeout, "app.event")
        return None if n is None else n.params

    async def events(self, timeout: Optional[float] = None,
                     method: Optional[str] = None) -> AsyncIterator[Notification]:
        """Notifications as they arrive; ends after ``timeout`` idle seconds or at close, and, with
        ``method="app.event"``, when another connection of the app took its events over (its
        reason in :attr:`subscription_ended`), as :meth:`Client.events`. Ending it does not
        unsubscribe: await :meth:`app_unsubscribe`."""
        while True:
            try:
                n = await self.next_notification(timeout, method)
            except (ConnectionClosed, SubscriptionEnded):
                return
            if n is None:
                return
            yield n
