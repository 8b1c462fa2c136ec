"""Raw-socket helpers for server tests: read one HTTP response, send a body that drips in."""

from __future__ import annotations

import anyio
import anyio.abc


async def read_response(stream: anyio.abc.ByteStream) -> bytes:
    """One whole HTTP/1.1 response (head and ``content-length`` body), within 10 seconds."""
    data = b""
    with anyio.fail_after(10):
        while b"\r\n\r\n" not in data:
            data += await stream.receive()
        head, _, rest = data.partition(b"\r\n\r\n")
        length = int(
            next(
                line.split(b":", 1)[1]
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
        )
        while len(rest) < length:
            rest += await stream.receive()
    return head + b"\r\n\r\n" + rest


async def response_to_a_dripping_body(port: int, request_head: bytes) -> bytes:
    """Send ``request_head``, then one body byte every 50 ms (200 at most), and return the
    response the server sends meanwhile."""
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(request_head)

        async def drip() -> None:
            for _ in range(200):
                try:
                    await stream.send(b" ")
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    return
                await anyio.sleep(0.05)

        async with anyio.create_task_group() as group:
            group.start_soon(drip)
            raw = await read_response(stream)
            group.cancel_scope.cancel()
    return raw
