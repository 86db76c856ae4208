"""Relay TCP connections on a sandbox's own loopback to a Unix socket bound into it.

Run inside a sandbox, by any ``python3`` (standard library only)::

    python3 forward.py PORT SOCKET

It listens on ``127.0.0.1:PORT`` in the sandbox's network namespace (which has nothing but
its own loopback) and relays every connection to the Unix socket ``SOCKET`` (a host
server's, bound into the sandbox read-only), prints ``ready`` once it listens, and runs
until its sandbox stops it. See :mod:`agentgym.sandboxes.bridge`.
"""

import asyncio
import contextlib
import sys


async def _pipe(reader, writer):
    """Copy until ``reader`` ends, then end ``writer``'s side only (a client that has sent
    its whole request still reads the answer)."""
    with contextlib.suppress(ConnectionError, OSError):
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


async def _main(port, path):
    async def handle(reader, writer):
        try:
            upstream_reader, upstream_writer = await asyncio.open_unix_connection(path)
        except OSError:
            writer.close()
            return
        try:
            await asyncio.gather(_pipe(reader, upstream_writer),
                                 _pipe(upstream_reader, writer))
        finally:
            for each in (writer, upstream_writer):
                with contextlib.suppress(OSError):
                    each.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_main(int(sys.argv[1]), sys.argv[2]))
