"""Composing a running log server: store, log, service, gRPC server, metrics endpoint (and,
when configured, the anchorer). ``start_app`` is the library entry point (tests bind port 0);
``serve`` blocks until SIGTERM/SIGINT, then drains in-flight appends and publishes a final
checkpoint.

Order matters: the listen addresses are checked first (``ledger.preflight``), so a busy port
or a bad address creates nothing on disk; then the data dir's binding (origin, key); then
recovery; the gRPC server starts (health SERVING) only after the log has recovered.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

from ledger.anchoring import Anchorer, AnchorSchedule, TsaTarget
from ledger.auth import Policy, RateLimiter, TokenStore
from ledger.backup import BackupOutcome, backup_store
from ledger.binding import bind_signer, open_bound_signer
from ledger.checkpoint import Ed25519Signer
from ledger.config import Settings, is_loopback, parse_listen
from ledger.errors import FormatError
from ledger.http_metrics import MetricsServer, start_metrics_server
from ledger.interceptor import AuthInterceptor
from ledger.log import Log
from ledger.metrics import LedgerMetrics, MetricsRegistry, ObservedSource
from ledger.preflight import check_listen, check_plaintext
from ledger.rocks import RocksStore
from ledger.server import create_server
from ledger.service import LogService
from ledger.tls import ServerTls, load_server_tls, server_ssl_context
from ledger.tsa_setup import TsaSetup, setup_tsas

__all__ = ["App", "serve", "start_app"]

SHUTDOWN_GRACE_S = 5.0


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
    metrics: LedgerMetrics
    metrics_server: MetricsServer | None
    policy: Policy
    key_created: bool = False

    @property
    def address(self) -> str:
        """``host:port`` the server listens on."""
        host = self.settings.listen.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    @property
    def metrics_address(self) -> str | None:
        """``host:port`` of ``/metrics`` (None when disabled)."""
        if self.metrics_server is None:
            return None
        host = self.settings.metrics_listen.rsplit(":", 1)[0]
        return f"{host}:{self.metrics_server.port}"

    @property
    def verifier_key(self) -> str:
        """The log's C2SP verifier key string."""
        return self.signer.verifier().key_string()

    async def stop(self) -> None:
        """Stop taking calls, drain appends, publish a final checkpoint, close the store."""
        await self.server.stop(SHUTDOWN_GRACE_S)
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        await self.anchoring.stop()
        await self.service.stop()
        self.tsas.close()
        self.store.close()


def _policy(settings: Settings) -> Policy:
    host, _ = parse_listen(settings.listen)
    return Policy(
        tokens=TokenStore(settings.token_file),
        mtls={cn: list(scopes) for cn, scopes in settings.auth_mtls.items()},
        loopback=is_loopback(host),
        reads_need_token=settings.auth_reads == "token",
    )


def _tls(settings: Settings) -> ServerTls | None:
    if settings.tls_server_cert is None and settings.tls_server_key is None:
        return None
    if settings.tls_server_cert is None or settings.tls_server_key is None:
        raise FormatError("[tls] needs both cert and key")
    return load_server_tls(
        settings.tls_server_cert, settings.tls_server_key, settings.tls_client_ca
    )


def _credentials(tls: ServerTls | None) -> grpc.ServerCredentials | None:
    if tls is None:
        return None
    return grpc.ssl_server_credentials(
        [(tls.private_key, tls.cert_chain)],
        root_certificates=tls.client_ca,
        require_client_auth=tls.client_ca is not None,
    )


def _observed(targets: list[TsaTarget], metrics: LedgerMetrics) -> list[TsaTarget]:
    return [TsaTarget(t.name, ObservedSource(t.name, t.source, metrics)) for t in targets]


async def start_app(settings: Settings, signer: Ed25519Signer | None = None) -> App:
    """Check the addresses, bind the data dir, recover the log, start everything.

    Without ``signer`` the key comes from ``settings.signer_key_file`` (``ledger serve``)."""
    check_listen(settings.listen, "listen")
    if settings.metrics_listen:
        check_listen(settings.metrics_listen, "metrics listen")
    tls = _tls(settings)
    check_plaintext(settings, tls_enabled=tls is not None)
    policy = _policy(settings)
    created = False
    if signer is None:
        signer, created = open_bound_signer(
            settings.data_dir, settings.signer_key_file, settings.origin
        )
    else:
        bind_signer(settings.data_dir, signer, settings.origin)
    store = RocksStore(
        settings.db_dir, memtable_mb=settings.memtable_mb, cache_mb=settings.cache_mb
    )
    registry = MetricsRegistry()
    metrics = LedgerMetrics(registry)
    try:
        log = Log(store=store, signer=signer, origin=settings.origin)
        service = LogService(
            log,
            checkpoint_interval=settings.checkpoint_interval_ms / 1000,
            max_pending=settings.max_pending,
        )
        service.observer = metrics
        await service.start()
        tsas = setup_tsas(settings)
    except BaseException:
        store.close()
        raise
    tsas.targets = _observed(tsas.targets, metrics)
    metrics.watch(
        queue_depth=lambda: service.queue_depth,
        tree_size=lambda: log.size,
        rocksdb=store.properties,
    )
    anchoring = AnchorSchedule(
        Anchorer(log=log, tsas=tsas.targets), interval=settings.anchor_interval_s
    )

    async def backup(out_dir: str) -> BackupOutcome:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, backup_store, store, settings.data_dir, Path(out_dir)
        )

    metrics_server = None
    try:
        anchor_now = anchoring.anchor_now if tsas.targets else None
        limiter = RateLimiter(settings.rate_per_s, settings.burst)
        interceptor = AuthInterceptor(policy, limiter, metrics, access_log=settings.access_log)
        server, port = await create_server(
            service,
            settings.listen,
            anchor_now=anchor_now,
            backup=backup,
            credentials=_credentials(tls),
            interceptors=[interceptor],
        )
        if settings.metrics_listen:
            host, mport = parse_listen(settings.metrics_listen)
            ssl = server_ssl_context(tls) if tls is not None else None
            metrics_server = await start_metrics_server(registry, host, mport, ssl=ssl)
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
        metrics=metrics,
        metrics_server=metrics_server,
        policy=policy,
        key_created=created,
    )


async def serve(settings: Settings, on_ready: Callable[[App], None]) -> None:
    """Run until SIGTERM or SIGINT, then shut down gracefully."""
    app = await start_app(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    on_ready(app)
    await stop.wait()
    await app.stop()
