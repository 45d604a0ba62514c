"""Newline framing over the broker's socket, for the libraries that only build and parse messages.

jsonrpcclient, json-rpc and jsonrpclib-pelix leave the transport to their user (jsonrpclib ships
HTTP transports only; its ServerProxy takes any object with ``request()``). This is that
transport: one JSON text per line each way, exactly CONTRACT.md's default framing. It does no
JSON work itself: it hands whole lines (``str``) to the library and takes the library's output.

A call's reply is told apart from the broker's notifications by the library's parsed message;
lines that are notifications are kept for ``next_notification``.
"""

import json
import socket
import time

from fixture import unix_socket


class LineStream:
    def __init__(self, path, timeout=10.0):
        self.sock = unix_socket(path, timeout=timeout)
        self.timeout = timeout
        self.buf = b""
        self.sent = []      # every line written, for failure messages
        self.pending = []   # lines read but not yet taken

    def send_text(self, text):
        if isinstance(text, str):
            text = text.encode("utf-8")
        if b"\n" in text:
            raise ValueError("a library produced a message with a raw newline; newline framing cannot carry it")
        self.sent.append(text)
        self.sock.sendall(text + b"\n")

    def read_line(self, timeout=None):
        """The next line (str, without its newline); TimeoutError after ``timeout`` seconds."""
        if self.pending:
            return self.pending.pop(0)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"nothing read within {timeout} s")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise TimeoutError(f"nothing read within {timeout} s") from None
            if not chunk:
                raise ConnectionError(f"the broker closed the connection (unread: {self.buf!r})")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        if line.endswith(b"\r"):
            raise AssertionError(f"the broker ended a newline-framed line with \\r\\n: {line!r}")
        return line.decode("utf-8")

    def read_reply(self, is_reply, timeout=None):
        """Reads lines until ``is_reply(line)``; the lines before it stay pending (notifications)."""
        skipped = []
        try:
            while True:
                line = self.read_line(timeout)
                if is_reply(line):
                    return line
                skipped.append(line)
        finally:
            self.pending = skipped + self.pending

    def next_notification_line(self, timeout):
        return self.read_line(timeout)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def is_notification_text(line):
    """Only to sort lines into replies and notifications: the library parses them afterwards."""
    v = json.loads(line)
    return isinstance(v, dict) and "method" in v and "id" not in v
