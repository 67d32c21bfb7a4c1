"""A raw-socket server on 127.0.0.1 that answers a POST too slowly to ever finish in time.

Modes, each keeping every single read of the client busy with a byte now and then, so no
socket timeout ever fires:

- `status`: the status line, one byte at a time;
- `headers`: the status line at once, then an endless header, one byte at a time;
- `body`: every header at once (Content-Length 100000), then the body one byte at a time;
- `continue`: `HTTP/1.1 100 Continue` again and again, never a final status.

A GET (the preflight) gets a quick 404, as from a local server without a models endpoint. Each
connection gives up trickling after `limit` seconds and then closes, so a client without a
hard deadline ends a test late (and fails it) instead of hanging it.
"""

from __future__ import annotations

import socket
import threading
import time

MODES = ("status", "headers", "body", "continue")
_NOT_FOUND = (b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
              b"Content-Length: 31\r\nConnection: close\r\n\r\n"
              b'{"error": {"message": "nope"}} ')


class SlowServer:
    """`with SlowServer("body") as server: server.url` (`server.root` without `/v1`)."""

    def __init__(self, mode: str, interval: float = 0.2, limit: float = 30.0):
        if mode not in MODES:
            raise ValueError(mode)
        self.mode = mode
        self.interval = interval
        self.limit = limit
        self.posts = 0
        self.gets = 0
        self.closed_after: list[float] = []   # seconds each POST connection lasted
        self._stop = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.05)
        self._threads: list[threading.Thread] = []
        self._accepter = threading.Thread(target=self._accept, daemon=True)

    @property
    def root(self) -> str:
        host, port = self._sock.getsockname()[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        return self.root + "/v1"

    def __enter__(self) -> SlowServer:
        self._accepter.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._accepter.join()
        for thread in self._threads:
            thread.join()
        self._sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        started = time.monotonic()
        method = None
        with conn:
            conn.settimeout(5.0)
            try:
                method = self._read_request(conn)
                if method == "GET":
                    self.gets += 1
                    conn.sendall(_NOT_FOUND)
                    return
                self.posts += 1
                self._trickle(conn, started)
            except OSError:
                pass        # the client shut the connection down: what a deadline does
            finally:
                if method != "GET":
                    self.closed_after.append(time.monotonic() - started)

    def _read_request(self, conn: socket.socket) -> str:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                raise ConnectionError("closed before the request ended")
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        return lines[0].split(" ", 1)[0]

    def _trickle(self, conn: socket.socket, started: float) -> None:
        if self.mode == "status":
            head, drip = b"", b"HTTP/1.1 200 OK\r\n" * 10_000
        elif self.mode == "headers":
            head, drip = b"HTTP/1.1 200 OK\r\nX-Slow: ", b"a" * 1_000_000
        elif self.mode == "body":
            head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 100000\r\nConnection: close\r\n\r\n")
            drip = b" " * 100_000
        else:
            head, drip = b"", b"HTTP/1.1 100 Continue\r\n\r\n" * 100_000
        conn.sendall(head)
        step = 1 if self.mode != "continue" else 25
        for at in range(0, len(drip), step):
            if self._stop.is_set() or time.monotonic() - started > self.limit:
                return
            conn.sendall(drip[at:at + step])
            time.sleep(self.interval)
