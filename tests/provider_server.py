"""A real HTTP server on 127.0.0.1 that plays a model provider in tests.

It serves a queue of scripted replies, one per request, and records every request it got
(path, headers, parsed JSON body) so tests can assert on what golem actually sent.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted HTTP answer. `body` may be a dict/list (sent as JSON) or raw str/bytes."""

    body: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0          # seconds to wait before answering
    drop: bool = False          # close the connection without answering


def chat(content: str | None = None, tool_calls: list[tuple[str, dict]] | None = None,
         finish: str | None = None, usage: dict | None = None, **extra_message) -> dict:
    """An OpenAI-style chat completion body with the given content and tool calls."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}_{name}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(tool_calls)]
    message.update(extra_message)
    if finish is None:
        finish = "tool_calls" if tool_calls else "stop"
    return {"id": "chatcmpl-test", "object": "chat.completion", "model": "test-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage if usage is not None else
            {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}


def anthropic_reply(text: str | None = None, tool_uses: list[tuple[str, dict]] | None = None,
                    stop: str | None = None, usage: dict | None = None,
                    before: list[dict] | None = None) -> dict:
    """An Anthropic Messages API reply: the `before` blocks (thinking), text, then tool_use."""
    content: list[dict[str, Any]] = list(before or [])
    if text:
        content.append({"type": "text", "text": text})
    for i, (name, args) in enumerate(tool_uses or []):
        content.append({"type": "tool_use", "id": f"toolu_{i}_{name}", "name": name,
                        "input": args})
    if stop is None:
        stop = "tool_use" if tool_uses else "end_turn"
    return {"id": "msg_test", "type": "message", "role": "assistant", "model": "claude-test",
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": usage if usage is not None else {"input_tokens": 100, "output_tokens": 20}}


class ProviderServer:
    """Context manager: `with ProviderServer([chat(...), ...]) as server: server.url`."""

    def __init__(self, replies: list[Any] | None = None, gets: dict[str, Any] | None = None,
                 by_model: dict[str, list[Any]] | None = None):
        self.replies: list[Any] = list(replies or [])
        # model id -> its own queue of replies (a request naming another model takes from
        # `replies`): several conversations at once, each scripted on its own
        self.by_model: dict[str, list[Any]] = {k: list(v) for k, v in (by_model or {}).items()}
        self.requests: list[dict[str, Any]] = []
        # GET path -> Reply (the preflight); any other GET is a 404, as from a local server
        # without that endpoint. `probes` records the GETs (path and headers).
        self.gets: dict[str, Any] = dict(gets or {})
        self.probes: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output quiet
                pass

            def do_GET(self):
                with server._lock:
                    server.probes.append({"path": self.path, "headers": dict(self.headers)})
                    reply = server.gets.get(self.path) or Reply(
                        {"error": {"message": f"no route for GET {self.path}"}}, status=404)
                self.answer(reply if isinstance(reply, Reply) else Reply(reply))

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw
                with server._lock:
                    server.requests.append({"path": self.path, "headers": dict(self.headers),
                                            "body": body})
                    model = body.get("model") if isinstance(body, dict) else None
                    queue = server.by_model.get(model) if model in server.by_model else \
                        server.replies
                    reply = queue.pop(0) if queue else Reply(
                        {"error": {"message": "no scripted reply left"}}, status=500)
                if not isinstance(reply, Reply):
                    reply = Reply(reply)
                self.answer(reply)

            def answer(self, reply: Reply) -> None:
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.drop:
                    self.close_connection = True
                    self.connection.close()
                    return
                data = reply.body
                content_type = "application/json"
                if isinstance(data, (dict, list)):
                    data = json.dumps(data).encode()
                elif isinstance(data, str):
                    data = data.encode()
                    content_type = "text/html" if data.lstrip().startswith(b"<") else "text/plain"
                data = data or b""
                self.send_response(reply.status)
                headers = {"Content-Type": content_type, **reply.headers}
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                # A client that gave up (a timeout under test) is expected, not an error.
                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # A short poll keeps shutdown quick: each test starts and stops its own server.
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,),
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def root(self) -> str:
        """The URL without `/v1`: the base URL for Anthropic, whose paths start with /v1."""
        return self.url.removesuffix("/v1")

    def __enter__(self) -> ProviderServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()
