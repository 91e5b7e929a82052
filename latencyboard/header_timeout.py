"""uvicorn's HTTP protocol with a deadline on each request's line and headers.

uvicorn bounds an idle kept-alive connection, but not one that sends its request line and
headers a byte every few seconds (or opens and sends nothing): such connections pile up for
as long as their clients like. Here the line and headers must be complete within
``header_timeout_s`` of the connection opening, or of a kept-alive connection's next request's
first byte; otherwise the connection is closed. The body has its own bounds (see
``ingest.http``). The ingest listener sets its deadline from ``INGEST_HEADER_TIMEOUT_SECONDS``;
the web app is served with ``--http latencyboard.header_timeout:HeaderTimeoutProtocol`` (10 s).
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HeaderTimeoutProtocol(HttpToolsProtocol):
    header_timeout_s = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._disarm_header_timer()
        super().on_headers_complete()

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def with_header_timeout(seconds: float) -> type[HeaderTimeoutProtocol]:
    """The protocol class for uvicorn's ``http=`` with this header deadline."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout_s": seconds})
