"""A recording HTTPS relay between a BI tool and dpsql's Trino door (tests only).

dpsql never logs SQL text, so to list what a tool actually sends the test puts this relay
in front of the server: every request is forwarded unchanged, each POSTed statement is
recorded with its outcome (answered, cached, or the error name and message), and
``nextUri`` links are rewritten to point back at the relay.
"""

from __future__ import annotations

import json
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx


@dataclass(frozen=True)
class Exchange:
    sql: str
    outcome: str  # "answered", "answered (cached)", "answered (charged)" or "refused"
    error_name: str = ""
    message: str = ""
    rows: int = 0


class Recorder:
    def __init__(self, upstream: str, cert: Path, key: Path):
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._client = httpx.Client(
            verify=ssl.create_default_context(cafile=str(cert)), timeout=120.0
        )
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def _relay(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                recorder.relay(self, body)

            do_GET = do_POST = do_DELETE = _relay

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = int(self._server.server_address[1])
        self.url = f"https://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Recorder:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()

    def relay(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("host",)}
        response = self._client.request(
            handler.command, self.upstream + handler.path, content=body, headers=headers
        )
        content = response.content.replace(self.upstream.encode(), self.url.encode())
        if handler.command == "POST" and handler.path == "/v1/statement":
            self._record(body.decode("utf-8", "replace"), response)
        handler.send_response(response.status_code)
        for name, value in response.headers.items():
            if name.lower() not in ("content-length", "transfer-encoding", "connection", "date"):
                handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(content)))
        handler.end_headers()
        handler.wfile.write(content)

    def _record(self, sql: str, response: httpx.Response) -> None:
        try:
            doc = json.loads(response.content)
        except ValueError:
            doc = {}
        error = doc.get("error") if isinstance(doc, dict) else None
        if response.status_code != 200:
            exchange = Exchange(sql, "refused", f"HTTP {response.status_code}", response.text[:200])
        elif error:
            exchange = Exchange(
                sql, "refused", error.get("errorName", ""), error.get("message", "")
            )
        else:
            cached = response.headers.get("X-DPSQL-Cached")
            outcome = {"true": "answered (cached)", "false": "answered (charged)"}.get(
                cached or "", "answered"
            )
            exchange = Exchange(sql, outcome, rows=len(doc.get("data") or []))
        with self._lock:
            self.exchanges.append(exchange)
