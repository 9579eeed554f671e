"""A TCP proxy a test starts and stops to make a server unreachable for one process only
(the machine's Postgres and Redis are shared with other runs: they are never stopped).

Stopped, it closes its listening socket and every connection through it: clients see
their connections drop and new ones refused, as when the server is down. With `delay_s`, every
answer of the server reaches the client that much later: a slow server."""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    def __init__(self, port: int, target_host: str, target_port: int, delay_s: float = 0.0) -> None:
        self.port = port
        self.delay_s = delay_s
        self.target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}

        async def pipe(
            src: asyncio.StreamReader, dst: asyncio.StreamWriter, delay_s: float = 0.0
        ) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    if delay_s:
                        await asyncio.sleep(delay_s)
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer, self.delay_s))
        self._writers -= {writer, up_writer}
