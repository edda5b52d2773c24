"""Composing a running log server: store, log, service, gRPC server, the C2SP tlog-tiles HTTP
endpoint and static mirror (``ledger.http_tiles``, ``ledger.tiles_mirror``; when configured) and
the anchorer. ``start_app`` is the library entry point (tests bind port 0); ``serve`` blocks until
SIGTERM/SIGINT, then drains in-flight appends and publishes a final checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from ledger.anchoring import Anchorer, AnchorSchedule
from ledger.checkpoint import Ed25519Signer
from ledger.config import Settings
from ledger.http_tiles import TilesServer, start_tiles_server
from ledger.log import Log
from ledger.rocks import RocksStore
from ledger.server import create_server
from ledger.service import LogService
from ledger.tile_reader import TileReader
from ledger.tiles_mirror_process import MirrorProcess
from ledger.tsa_setup import TsaSetup, setup_tsas
from ledger.witnessing import Cosigning

__all__ = ["App", "serve", "start_app"]

SHUTDOWN_GRACE_S = 5.0
# Reader threads (proofs) and the writer share one GIL: a thread that wants it waits up to the
# switch interval (5 ms by default) each time. 1 ms keeps the writer's and the event loop's many
# short hand-offs from queueing behind a proof batch (B4R in the README's benchmark table).
GIL_SWITCH_INTERVAL_S = 0.001


@dataclass(slots=True)
class App:
    """A started server and its parts."""

    settings: Settings
    signer: Ed25519Signer
    store: RocksStore
    service: LogService
    server: grpc.aio.Server
    port: int
    anchoring: AnchorSchedule
    tsas: TsaSetup
    cosigning: Cosigning
    tiles: TilesServer | None = None
    mirror: MirrorProcess | None = None

    @property
    def address(self) -> str:
        """``host:port`` the server listens on."""
        host = self.settings.listen.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    @property
    def tiles_url(self) -> str | None:
        """Base URL of the tiles endpoint (None when it is off)."""
        return None if self.tiles is None else self.tiles.url

    @property
    def verifier_key(self) -> str:
        """The log's C2SP verifier key string."""
        return self.signer.verifier().key_string()

    async def stop(self) -> None:
        """Stop taking calls, drain appends, publish a final checkpoint, close the store."""
        await self.server.stop(SHUTDOWN_GRACE_S)
        if self.tiles is not None:
            await self.tiles.stop()
        await self.anchoring.stop()
        await self.cosigning.stop()
        await self.service.stop()
        if self.mirror is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.mirror.stop)
        self.tsas.close()
        self.store.close()


async def start_app(settings: Settings, signer: Ed25519Signer) -> App:
    """Open the store, recover the log, start the service, the anchorer and the gRPC server."""
    store = RocksStore(
        settings.db_dir, memtable_mb=settings.memtable_mb, cache_mb=settings.cache_mb
    )
    mirror: MirrorProcess | None = None
    try:
        log = Log(store=store, signer=signer, origin=settings.origin)
        reader = TileReader(store=store, published=log.latest_checkpoint)
        mirror = _start_mirror(settings)
        service = LogService(
            log,
            checkpoint_interval=settings.checkpoint_interval_ms / 1000,
            max_pending=settings.max_pending,
            on_publish=None if mirror is None else mirror.submit,
        )
        cosigning = _cosigning(settings, log)
        await service.start()
        if mirror is not None and (latest := log.latest_checkpoint()) is not None:
            mirror.submit(latest)  # catch up with what was published before this start
        tsas = setup_tsas(settings)
    except BaseException:
        if mirror is not None:
            mirror.stop()
        store.close()
        raise
    anchoring = AnchorSchedule(
        Anchorer(log=log, tsas=tsas.targets), interval=settings.anchor_interval_s
    )
    try:
        anchor_now = anchoring.anchor_now if tsas.targets else None
        server, port = await create_server(service, settings.listen, anchor_now=anchor_now)
    except BaseException:
        tsas.close()
        await service.stop()
        if mirror is not None:
            mirror.stop()
        store.close()
        raise
    try:
        tiles_listen = settings.tiles_address(port)
        tiles = None if tiles_listen is None else await start_tiles_server(reader, tiles_listen)
    except BaseException:
        await server.stop(None)
        tsas.close()
        await service.stop()
        if mirror is not None:
            mirror.stop()
        store.close()
        raise
    anchoring.start()
    await cosigning.start()
    return App(
        settings=settings,
        signer=signer,
        store=store,
        service=service,
        server=server,
        port=port,
        anchoring=anchoring,
        tsas=tsas,
        cosigning=cosigning,
        tiles=tiles,
        mirror=mirror,
    )


def _cosigning(settings: Settings, log: Log) -> Cosigning:
    """Witness submission (``ledger.witnessing``) for the configured ``[[witness]]`` entries."""
    return Cosigning(
        log=log,
        witnesses=settings.witnesses,
        quorum=settings.witness_quorum or len(settings.witnesses),
        status_dir=settings.data_dir,
    )


def _start_mirror(settings: Settings) -> MirrorProcess | None:
    if settings.tiles_dir is None:
        return None
    return MirrorProcess(
        db_dir=settings.db_dir,
        secondary_dir=settings.data_dir / "tiles-secondary",
        directory=settings.tiles_dir,
        origin=settings.origin,
    )


async def serve(settings: Settings, signer: Ed25519Signer, on_ready: Callable[[App], None]) -> None:
    """Run until SIGTERM or SIGINT, then shut down gracefully."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    app = await start_app(settings, signer)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    on_ready(app)
    await stop.wait()
    await app.stop()
