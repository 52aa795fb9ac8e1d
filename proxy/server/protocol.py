"""uvicorn's HTTP protocol with TCP_NODELAY on every connection.

asyncio sets TCP_NODELAY only on sockets whose ``proto`` is IPPROTO_TCP; the listening
socket uvicorn hands to its worker processes reports proto 0, so with ``--workers 2``
(measured on the h11 protocol, which writes headers and body separately) Nagle's
algorithm held each response body back until the client's delayed ACK, ~40 ms per
request. Setting it here makes 1 and N workers behave alike whatever the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base
except ImportError:  # pragma: no cover - httptools is a dependency; h11 is the fallback
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Base  # type: ignore[assignment]


class NoDelayProtocol(_Base):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # OSError: not a TCP socket (e.g. a Unix socket), nothing to do.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
