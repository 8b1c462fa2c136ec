"""A TCP forwarder in front of a real PostgreSQL or Redis that a test can cut and restore.

A store pointed at the forwarder sees a real outage (its driver's own connection errors, its
pool's own reconnects) while the shared server, and every other test using it, is untouched.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import anyio
import anyio.abc


class CutProxy:
    """Forwards ``127.0.0.1:<port>`` to the upstream; :meth:`cut` drops every connection and
    refuses new ones until :meth:`restore`."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self.port = 0
        self.down = False
        self._scopes: set[anyio.CancelScope] = set()

    def url(self, upstream_url: str) -> str:
        """``upstream_url`` with its host and port replaced by the forwarder's."""
        parts = urlsplit(upstream_url)
        user = parts.netloc.rpartition("@")[0]
        netloc = f"{user}@127.0.0.1:{self.port}" if user else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    def cut(self) -> None:
        """Drop every live connection; refuse new ones."""
        self.down = True
        for scope in tuple(self._scopes):
            scope.cancel()

    def restore(self) -> None:
        """Accept and forward connections again."""
        self.down = False

    async def _pipe(self, source: anyio.abc.ByteStream, sink: anyio.abc.ByteStream) -> None:
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            while True:
                await sink.send(await source.receive())

    async def _handle(self, client: anyio.abc.SocketStream) -> None:
        async with client:
            if self.down:
                return
            try:
                upstream = await anyio.connect_tcp(*self._upstream)
            except OSError:
                return
            async with upstream:
                with anyio.CancelScope() as scope:
                    self._scopes.add(scope)
                    try:
                        async with anyio.create_task_group() as group:
                            group.start_soon(self._pipe, client, upstream)
                            await self._pipe(upstream, client)
                            group.cancel_scope.cancel()
                    finally:
                        self._scopes.discard(scope)


@contextlib.asynccontextmanager
async def cut_proxy(upstream_url: str) -> AsyncIterator[CutProxy]:
    """A :class:`CutProxy` in front of the server of ``upstream_url``, for the block."""
    parts = urlsplit(upstream_url)
    proxy = CutProxy(parts.hostname or "127.0.0.1", parts.port or 0)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    proxy.port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, proxy._handle)
        try:
            yield proxy
        finally:
            proxy.cut()
            group.cancel_scope.cancel()
