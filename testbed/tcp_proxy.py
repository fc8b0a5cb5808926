"""A loopback TCP proxy that can be cut and restored: a broker outage for tests, without losing the broker's data.

The embedded broker (Tansu) keeps its data in memory only, so stopping its process and starting it again would be
a broker that lost every topic, offset and group, not a broker that was down. :class:`TcpProxy` stands in front of
it instead (the broker advertises the proxy's address, ``TansuBroker(advertise=proxy.address)``, so every client
connects through it): :meth:`TcpProxy.cut` closes the listening socket and resets every open connection, so
clients see exactly what a stopped broker gives them (connection reset, then connection refused on the same
port); :meth:`TcpProxy.restore` listens on the same port again and the broker answers with everything it held.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from types import TracebackType

from flowtracer.embedded.managed_process import HOST, free_port

_CHUNK = 256 * 1024  # bytes read per copy step


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``127.0.0.1:<backend_port>`` from a daemon thread's event loop.

    Args:
        backend_port: where connections go (connected per client connection, so the backend may start later).
        port: the listening port; ``None`` picks a free one. It stays the same across :meth:`cut` and
            :meth:`restore`.
    """

    def __init__(self, backend_port: int, port: int | None = None) -> None:
        self.backend_port = backend_port
        self.port = port or free_port()
        self.accepted = 0  # connections accepted over the proxy's life
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"tcp-proxy-{self.port}", daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[asyncio.StreamWriter] = set()

    @property
    def address(self) -> str:
        """``"127.0.0.1:<port>"``: what clients bootstrap from and the broker advertises."""
        return f"{HOST}:{self.port}"

    @property
    def up(self) -> bool:
        """Whether the proxy listens (not cut)."""
        return self._server is not None

    def start(self) -> TcpProxy:
        if not self._thread.is_alive():
            self._thread.start()
        self.restore()
        return self

    def cut(self) -> None:
        """Stop listening and reset every open connection (clients get RST, then connection refused)."""
        self._call(self._cut())

    def restore(self) -> None:
        """Listen on the same port again (idempotent)."""
        self._call(self._listen())

    def stop(self) -> None:
        """Cut, then end the thread (idempotent)."""
        if self._thread.is_alive():
            self.cut()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5.0)

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # -- the event loop side ---------------------------------------------------------------------

    def _call(self, coro: object) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(10.0)  # type: ignore[arg-type]

    async def _listen(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, HOST, self.port, reuse_address=True)

    async def _cut(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()
        for writer in list(self._conns):
            sock = writer.get_extra_info("socket")
            if sock is not None:  # linger 0: close sends RST, as a dead broker's kernel does
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        self._conns.clear()

    async def _serve(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            b_reader, b_writer = await asyncio.open_connection(HOST, self.backend_port)
        except OSError:
            c_writer.transport.abort()
            return
        self._conns |= {c_writer, b_writer}
        try:
            await asyncio.gather(self._copy(c_reader, b_writer), self._copy(b_reader, c_writer))
        finally:
            for w in (c_writer, b_writer):
                self._conns.discard(w)
                w.transport.abort()

    @staticmethod
    async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy until EOF or an error on either side, then close the writer's side too."""
        with contextlib.suppress(OSError, ConnectionError):
            while data := await reader.read(_CHUNK):
                writer.write(data)
                await writer.drain()
        writer.transport.abort()
