"""The log over HTTP as C2SP tlog-tiles: ``/checkpoint``, ``/tile/<L>/<N>[.p/<W>]`` and
``/tile/entries/<N>[.p/<W>]``, GET and HEAD, served by aiohttp on the server's event loop.

Responses (C2SP tlog-tiles):

* ``/checkpoint``: the latest signed note (``text/plain; charset=utf-8``, a short max-age);
  503 before the first checkpoint.
* tiles: ``application/octet-stream``, ``Cache-Control: public, max-age=31536000, immutable``
  (full and partial tiles never change); 404 for a tile the published tree does not have at the
  width asked; a partial width of a tile that is now full is served cut to width.
* entry bundles are sent with ``Content-Encoding: gzip`` whatever the request's
  ``Accept-Encoding`` (C2SP tlog-tiles lets a log do so; ``ledger.core.tiles.gzip_bundle``);
  hash tiles (random hashes) are sent as they are.
* 400 (text body) for a malformed or non-canonical path, 404 for any other path, 405 for other
  methods; never a 500 for anything a client sends.
* Odd request targets (RFC 9112 §3.2): ``CONNECT`` (authority-form) and ``OPTIONS`` (including
  ``OPTIONS *``) get 405 with ``Allow: GET, HEAD``; an absolute-form target
  (``GET http://host/checkpoint``) is served by its path, as §3.2.2 requires; any other target
  that is not a path gets 400.

Connections are accepted through ``ledger.net.listener`` (header and body timeouts, caps in all
and per address, 503 beyond them).

Storage reads run on a small thread pool of their own, never on the event loop thread, so tile
readers do not stall the loop that acknowledges appends.
"""

from __future__ import annotations

import asyncio
import logging
import ssl as ssl_module
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from aiohttp import web

from ledger.core import tiles
from ledger.core.errors import (
    MalformedTilePathError,
    NotFoundError,
    NotYetPublishedError,
    ServiceError,
)
from ledger.net.listener import HttpListener, ListenerLimits, serve_limited
from ledger.store.tile_reader import TileReader

__all__ = [
    "ALLOW",
    "CHECKPOINT_CACHE",
    "TILE_CACHE",
    "TilesServer",
    "create_tiles_app",
    "start_tiles_server",
]

TILE_CACHE = "public, max-age=31536000, immutable"
CHECKPOINT_CACHE = "public, max-age=1"
_TEXT = "text/plain"
_BINARY = "application/octet-stream"
_log = logging.getLogger("ledger.http")
_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message + "\n", content_type=_TEXT)


class _Routes:
    """The two handlers, reading through a ``TileReader`` on an executor."""

    def __init__(self, reader: TileReader, executor: ThreadPoolExecutor) -> None:
        self._reader = reader
        self._executor = executor

    async def _off_loop(self, fn: Callable[[], bytes | str]) -> bytes | str:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def checkpoint(self, request: web.Request) -> web.StreamResponse:
        try:
            note = self._reader.checkpoint().note
        except NotYetPublishedError as exc:
            return _text(503, str(exc))
        return web.Response(
            text=note,
            content_type=_TEXT,
            charset="utf-8",
            headers={"Cache-Control": CHECKPOINT_CACHE},
        )

    async def tile(self, request: web.Request) -> web.StreamResponse:
        try:
            tile = tiles.parse_tile_path(request.path.removeprefix("/"))
        except MalformedTilePathError as exc:
            return _text(400, str(exc))
        try:
            data = await self._off_loop(lambda: self._read(tile))
        except (NotFoundError, NotYetPublishedError) as exc:
            return _text(404, str(exc))
        assert isinstance(data, bytes)
        headers = {"Cache-Control": TILE_CACHE}
        if tile.entries:
            headers["Content-Encoding"] = "gzip"
        return web.Response(body=data, content_type=_BINARY, headers=headers)

    def _read(self, tile: tiles.TileID) -> bytes:
        data = self._reader.read(tile)
        return tiles.gzip_bundle(data) if tile.entries else data


ALLOW = "GET, HEAD"


@web.middleware
async def _request_target(request: web.Request, handler: _Handler) -> web.StreamResponse:
    """Answer what no route can: CONNECT, OPTIONS and targets that are not a path."""
    if request.method in ("CONNECT", "OPTIONS"):
        return web.Response(
            status=405,
            text=f"{request.method} is not served here; use GET or HEAD\n",
            content_type=_TEXT,
            headers={"Allow": ALLOW},
        )
    if not request.path.startswith("/"):
        return _text(400, "the request target must be a path such as /checkpoint")
    return await handler(request)


@web.middleware
async def _errors(request: web.Request, handler: _Handler) -> web.StreamResponse:
    """A store failure is logged and answered 503 with a text body, never 500."""
    try:
        return await handler(request)
    except ServiceError as exc:
        _log.error("tiles: %s: %s", request.path, exc)
        return _text(503, f"the log cannot serve this now: {exc}")


def create_tiles_app(reader: TileReader, executor: ThreadPoolExecutor) -> web.Application:
    """The aiohttp application (GET also answers HEAD)."""
    routes = _Routes(reader, executor)
    app = web.Application(middlewares=[_request_target, _errors])
    app.router.add_get("/checkpoint", routes.checkpoint)
    app.router.add_get(r"/tile/{tail:.+}", routes.tile)
    return app


@dataclass(slots=True)
class TilesServer:
    """A started tiles endpoint."""

    runner: web.AppRunner
    listener: HttpListener
    executor: ThreadPoolExecutor
    host: str
    port: int
    tls: bool = False

    @property
    def url(self) -> str:
        """Base URL, ending in ``/``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}/"

    async def stop(self) -> None:
        """Stop listening, finish in-flight requests, stop the reader threads."""
        await self.listener.close()
        await self.runner.cleanup()
        self.executor.shutdown(wait=True)


async def start_tiles_server(
    reader: TileReader,
    listen: str,
    *,
    threads: int = 2,
    ssl: ssl_module.SSLContext | None = None,
    mount: Callable[[web.Application], None] | None = None,
    limits: ListenerLimits | None = None,
) -> TilesServer:
    """Serve tiles on ``listen`` (``HOST:PORT``, port 0 picks one) on the running event loop;
    over TLS with ``ssl``; ``mount`` adds more routes (``/metrics``); ``limits``: timeouts and
    connection caps (``ledger.net.listener``)."""
    host, _, port_text = listen.rpartition(":")
    host = host.strip("[]")
    if not host or not port_text.isdigit():
        raise ServiceError(f"tiles listen address {listen!r}: want HOST:PORT")
    limits = limits or ListenerLimits()
    executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="ledger-tiles")
    app = create_tiles_app(reader, executor)
    if mount is not None:
        mount(app)
    runner = web.AppRunner(app, **limits.handler_options("tiles"))
    await runner.setup()
    assert runner.server is not None
    try:
        listener = await serve_limited(
            runner.server, host, int(port_text), limits, name="tiles", ssl=ssl
        )
    except OSError as exc:
        await runner.cleanup()
        executor.shutdown(wait=False)
        raise ServiceError(f"cannot serve tiles on {listen}: {exc.strerror}") from None
    return TilesServer(
        runner=runner,
        listener=listener,
        executor=executor,
        host=host,
        port=int(listener.port),
        tls=ssl is not None,
    )
