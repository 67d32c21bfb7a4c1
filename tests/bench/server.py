"""A loopback HTTP server that plays a chat-completions model for the benchmark.

It answers each POST with the next scripted reply and keeps every request body as the raw
bytes that arrived, so a bare client can replay exactly what golem sent.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def read_reply(step: int, path: str) -> bytes:
    """A chat completion asking for one read_file call."""
    call = {"id": f"call_{step:04}", "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": path})}}
    return _reply({"role": "assistant", "content": f"Reading {path}.", "tool_calls": [call]},
                  "tool_calls")


def answer_reply(text: str = "Done.") -> bytes:
    """A chat completion with a plain answer."""
    return _reply({"role": "assistant", "content": text}, "stop")


def _reply(message: dict, finish: str) -> bytes:
    return json.dumps({"id": "chatcmpl-bench", "object": "chat.completion", "model": "bench",
                       "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                       "usage": {"prompt_tokens": 1000, "completion_tokens": 20,
                                 "total_tokens": 1020}}).encode()


class ScriptServer:
    """`with ScriptServer(replies) as server:` serves `replies` in order at `server.url`."""

    def __init__(self, replies: list[bytes], by_model: dict[str, list[bytes]] | None = None,
                 delay: float = 0.0):
        self.replies = list(replies)
        self.delay = delay          # seconds each reply takes, as a model thinking
        # model id -> a script of its own, for several conversations at once
        self.by_model = {k: list(v) for k, v in (by_model or {}).items()}
        self.bodies: list[bytes] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with owner._lock:
                    owner.bodies.append(body)
                    try:
                        model = json.loads(body).get("model")
                    except (ValueError, AttributeError):
                        model = None
                    queue = owner.by_model.get(model, owner.replies)
                    data = queue.pop(0) if queue else answer_reply()
                if owner.delay:
                    time.sleep(owner.delay)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,),
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ScriptServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


class TrickleServer:
    """A raw-socket server whose every POST reply trickles in, one byte each `interval`:
    the status line (`status`), a header (`headers`), the body (`body`), or `100 Continue`
    without end (`continue`). `with TrickleServer("body") as server:` serves at `server.url`."""

    MODES = ("status", "headers", "body", "continue")

    def __init__(self, mode: str, interval: float = 0.1, limit: float = 30.0):
        import socket
        self.mode, self.interval, self.limit = mode, interval, limit
        self._stop = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.05)
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        host, port = self._sock.getsockname()[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "TrickleServer":
        thread = threading.Thread(target=self._accept, daemon=True)
        self._threads.append(thread)
        thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in list(self._threads):
            thread.join()
        self._sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn) -> None:
        import time
        started = time.monotonic()
        with conn:
            try:
                conn.settimeout(5.0)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head = {"status": b"", "headers": b"HTTP/1.1 200 OK\r\nX-Slow: ",
                        "body": b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n",
                        "continue": b""}[self.mode]
                drip = {"status": b"HTTP/1.1 200 OK\r\n", "headers": b"a", "body": b" ",
                        "continue": b"HTTP/1.1 100 Continue\r\n\r\n"}[self.mode]
                conn.sendall(head)
                while not self._stop.is_set() and time.monotonic() - started < self.limit:
                    for byte in (drip if self.mode != "continue" else [drip]):
                        conn.sendall(bytes([byte]) if isinstance(byte, int) else byte)
                        time.sleep(self.interval)
            except OSError:
                pass        # the client shut the connection down
