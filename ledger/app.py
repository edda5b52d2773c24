"""Composing a running log server: store, log, service, gRPC server (and, when configured, the
anchorer). ``start_app`` is the library entry point (tests bind port 0); ``serve`` blocks until
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
from ledger.budget import ByteBudget
from ledger.checkpoint import Ed25519Signer
from ledger.config import Settings
from ledger.highwater import HighWaterMark
from ledger.log import Log
from ledger.rocks import RocksStore
from ledger.server import ServerLimits, create_server
from ledger.service import LogService
from ledger.tsa_setup import TsaSetup, setup_tsas

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

    @property
    def address(self) -> str:
        """``host:port`` the server listens on."""
        host = self.settings.listen.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    @property
    def verifier_key(self) -> str:
        """The log's C2SP verifier key string."""
        return self.signer.verifier().key_string()

    async def stop(self) -> None:
        """Stop taking calls, drain appends, publish a final checkpoint, close the store."""
        await self.server.stop(SHUTDOWN_GRACE_S)
        await self.anchoring.stop()
        await self.service.stop()
        self.tsas.close()
        self.store.close()


def server_limits(settings: Settings) -> ServerLimits:
    """The memory bounds of ``[server]`` (``ledger.server.ServerLimits``)."""
    return ServerLimits(
        max_request_bytes=settings.max_request_mb << 20,
        max_concurrent_rpcs=settings.max_concurrent_rpcs,
        idle_s=settings.stream_idle_s,
        budget=ByteBudget(settings.inflight_mb << 20),
    )


async def start_app(settings: Settings, signer: Ed25519Signer) -> App:
    """Open the store, recover the log, start the service, the anchorer and the gRPC server."""
    store = RocksStore(
        settings.db_dir, memtable_mb=settings.memtable_mb, cache_mb=settings.cache_mb
    )
    try:
        mark = HighWaterMark(settings.high_water_file)
        log = Log(store=store, signer=signer, origin=settings.origin, mark=mark)
        service = LogService(
            log,
            checkpoint_interval=settings.checkpoint_interval_ms / 1000,
            max_pending=settings.max_pending,
        )
        await service.start()
        tsas = setup_tsas(settings)
    except BaseException:
        store.close()
        raise
    anchoring = AnchorSchedule(
        Anchorer(log=log, tsas=tsas.targets), interval=settings.anchor_interval_s
    )
    try:
        anchor_now = anchoring.anchor_now if tsas.targets else None
        server, port = await create_server(
            service, settings.listen, anchor_now=anchor_now, limits=server_limits(settings)
        )
    except BaseException:
        tsas.close()
        await service.stop()
        store.close()
        raise
    anchoring.start()
    return App(
        settings=settings,
        signer=signer,
        store=store,
        service=service,
        server=server,
        port=port,
        anchoring=anchoring,
        tsas=tsas,
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
