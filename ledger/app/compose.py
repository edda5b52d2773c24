"""Composing a running log server: store, log, service, gRPC server, the C2SP tlog-tiles HTTP
endpoint (with ``/metrics``) and static mirror (``ledger.http.tiles``, ``ledger.http.mirror``),
witnessing, and the anchorer. ``start_app`` is the library entry point (tests bind port 0);
``serve`` blocks until SIGTERM/SIGINT, then drains in-flight appends and publishes a final
checkpoint.

Order matters: the listen addresses are checked first (``ledger.app.preflight``), so a busy port
or a bad address creates nothing on disk; then the data dir's binding (origin, key); then
recovery; the gRPC server starts (health SERVING) only after the log has recovered.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from aiohttp import web

from ledger.api.auth import FailureThrottle, Policy, RateLimiter, TokenStore
from ledger.api.budget import ByteBudget
from ledger.api.interceptor import AuthInterceptor
from ledger.api.server import ConnectionLimits, ServerLimits, create_server, set_health
from ledger.api.tls import ServerTls, load_server_tls, server_ssl_context
from ledger.app.preflight import (
    check_file_limit,
    check_listen,
    check_mark_location,
    check_plaintext,
)
from ledger.app.settings import Settings, is_loopback, parse_listen
from ledger.app.trust import backup_trust
from ledger.app.tsa_setup import TsaSetup, setup_tsas
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import FormatError
from ledger.core.types import BackupOutcome, PublishedCheckpoint
from ledger.http.append import AppendRoute
from ledger.http.metrics import MetricsServer, add_metrics_route, start_metrics_server
from ledger.http.mirror_process import MirrorProcess
from ledger.http.tiles import TilesServer, start_tiles_server
from ledger.log.anchoring import Anchorer, AnchorSchedule, TsaTarget
from ledger.log.clock import BoundedClock
from ledger.log.evidence import Evidence
from ledger.log.facade import Log
from ledger.log.highwater import AckedSize, HighWaterMark, acked_path
from ledger.log.metrics import (
    LedgerMetrics,
    MetricsRegistry,
    ObservedSource,
    evidence_metrics,
    witness_metrics,
)
from ledger.log.service import LogService
from ledger.log.witnessing import Cosigning, WitnessEndpoint
from ledger.net.listener import ListenerLimits
from ledger.ops.backup import TRUST_DIR, backup_store, read_witnesses
from ledger.ops.binding import AccessWatch, bind_signer, open_bound_signer
from ledger.store.rocks import RocksStore
from ledger.store.tile_reader import TileReader

if TYPE_CHECKING:  # the object store (botocore) loads only where it is configured
    from ledger.app.primary_mode import PrimaryMode
    from ledger.objstore.mirror import BucketMirror, MirrorState

__all__ = ["App", "freeze_startup_heap", "serve", "start_app"]

SHUTDOWN_GRACE_S = 5.0
# Reader threads (proofs) and the writer share one GIL: a thread that wants it waits up to the
# switch interval (5 ms by default) each time. 1 ms keeps the writer's and the event loop's many
# short hand-offs from queueing behind a proof batch (B4R in
# docs/benchmarks.md "Quiet machine, 2026-11-30").
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
    evidence: Evidence
    metrics: LedgerMetrics
    policy: Policy
    acked: AckedSize
    mark: HighWaterMark | None = None
    metrics_server: MetricsServer | None = None
    tiles: TilesServer | None = None
    mirror: MirrorProcess | None = None
    bucket: BucketMirror | None = None
    primary: PrimaryMode | None = None
    key_created: bool = False
    budget: ByteBudget | None = None  # the in-flight byte budget of gRPC and the HTTP append

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
    def metrics_address(self) -> str | None:
        """``host:port`` of ``/metrics`` (None when disabled): its own server, else the tiles
        endpoint's."""
        if self.metrics_server is not None:
            host = self.settings.metrics_listen.rsplit(":", 1)[0]
            return f"{host}:{self.metrics_server.port}"
        if self.tiles is not None and self.settings.metrics_listen == "":
            return f"{self.tiles.host}:{self.tiles.port}"
        return None

    @property
    def verifier_key(self) -> str:
        """The log's C2SP verifier key string."""
        return self.signer.verifier().key_string()

    async def stop(self) -> None:
        """Stop taking calls, drain appends, publish a final checkpoint, close the store."""
        await self.server.stop(SHUTDOWN_GRACE_S)
        if self.tiles is not None:
            await self.tiles.stop()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        await self.cosigning.stop()
        await self.anchoring.stop()
        await self.service.stop()
        if self.primary is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.primary.stop)
        if self.mirror is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.mirror.stop)
        if self.bucket is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.bucket.stop)
        self.tsas.close()
        self.store.close()
        self.acked.close()
        if self.mark is not None:
            self.mark.close()


def server_limits(settings: Settings) -> ServerLimits:
    """The memory bounds of ``[server]`` (``ledger.api.server.ServerLimits``)."""
    return ServerLimits(
        max_request_bytes=settings.max_request_mb << 20,
        max_concurrent_rpcs=settings.max_concurrent_rpcs,
        idle_s=settings.stream_idle_s,
        stream_linger_s=settings.stream_linger_ms / 1000,
        budget=ByteBudget(settings.inflight_mb << 20),
    )


def listener_limits(settings: Settings) -> ListenerLimits:
    """The HTTP limits of ``[limits]`` (``ledger.net.listener``), for tiles and ``/metrics``."""
    return ListenerLimits(
        header_timeout_s=settings.http_header_timeout_s,
        body_timeout_s=settings.http_body_timeout_s,
        max_connections=settings.http_max_connections,
        max_per_address=settings.http_max_per_address,
    )


def connection_limits(settings: Settings) -> ConnectionLimits:
    """The gRPC connection limits of ``[limits]`` (``ledger.api.server.connection_options``)."""
    return ConnectionLimits(
        max_connections=settings.grpc_max_connections,
        idle_s=settings.grpc_idle_s,
        max_age_s=settings.grpc_max_age_s,
        age_grace_s=settings.grpc_age_grace_s,
        keepalive_s=settings.grpc_keepalive_s,
        handshake_timeout_s=settings.http_header_timeout_s,
    )


def _policy(settings: Settings, access: AccessWatch | None = None) -> Policy:
    host, _ = parse_listen(settings.listen)
    return Policy(
        tokens=TokenStore(settings.token_file),
        mtls={cn: list(scopes) for cn, scopes in settings.auth_mtls.items()},
        loopback=is_loopback(host),
        reads_need_token=settings.auth_reads == "token",
        access=access,
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


def _cosigning(settings: Settings, log: Log, evidence: Evidence) -> Cosigning:
    """Witness submission (``ledger.log.witnessing``) for the configured ``[[witness]]`` entries."""
    endpoints = [
        WitnessEndpoint(name=w.name, url=w.url, key=w.key, timeout_s=w.timeout_s)
        for w in settings.witnesses
    ]
    return Cosigning(
        log=log,
        witnesses=endpoints,
        quorum=settings.witness_quorum or len(settings.witnesses),
        status_dir=settings.data_dir,
        sink=evidence,
    )


_log = logging.getLogger("ledger.compose")


async def _start_check(
    settings: Settings, log: Log, cosigning: Cosigning, evidence: Evidence
) -> None:
    """With witnesses configured, ask them about the newest stored checkpoint before anything
    new is signed or served (``ledger.log.evidence``). When fewer than ``n - quorum + 1``
    answer within ``[witnessing] start_timeout_s``, the log starts read-only until enough do,
    unless ``[witnessing] start_override`` is set (logged)."""
    latest = log.latest_checkpoint()
    n = len(settings.witnesses)
    if n == 0 or latest is None or log.halted is not None:
        return
    needed = n - cosigning.quorum + 1
    without_mark = log.unconfirmed is not None  # lifted by a quorum (``Evidence``), not here
    if not without_mark:
        evidence.require(needed)
    answered = await cosigning.probe(latest, settings.witness_start_timeout_s)
    if without_mark or log.halted is not None or evidence.agreed >= needed:
        return
    why = (
        f"{answered} of {n} witnesses answered the start check within "
        f"{settings.witness_start_timeout_s:g} s and {evidence.agreed} agreed; {needed} must "
        "agree before the log signs"
    )
    if settings.witness_start_override:
        _log.warning("starting read-write without the witnesses' view (start_override): %s", why)
        return
    log.hold(
        f"the log is read-only: {why} (set [witnessing] start_override = true to start anyway)"
    )
    _log.warning("read-only until the witnesses answer: %s", why)


def _warn_unconfigured_witnesses(settings: Settings) -> None:
    """A restored data dir records the witnesses of the log it came from: say which of them
    the configuration lacks (only witnesses catch a restore of a whole host)."""
    configured = {w.name for w in settings.witnesses}
    missing = [
        w.name for w in read_witnesses(settings.data_dir / TRUST_DIR) if w.name not in configured
    ]
    if missing:
        _log.warning(
            "the restored trust record %s names witnesses the configuration lacks (%s): add "
            "them as [[witness]] tables so the start check can consult them",
            settings.data_dir / TRUST_DIR / "trust.json",
            ", ".join(missing),
        )


def _skewed_clock(offset_ms: int) -> BoundedClock | None:
    """The log's clock with its wall clock moved by ``offset_ms`` (``[log] clock_offset_ms``,
    for clock-skew fault tests); None (the default clock) without an offset."""
    if not offset_ms:
        return None
    return BoundedClock(wall_ms=lambda: time.time_ns() // 1_000_000 + offset_ms)


def _start_mirror(settings: Settings) -> MirrorProcess | None:
    if settings.tiles_dir is None:
        return None
    return MirrorProcess(
        db_dir=settings.db_dir,
        secondary_dir=settings.data_dir / "tiles-secondary",
        directory=settings.tiles_dir,
        origin=settings.origin,
    )


def _start_bucket(settings: Settings) -> BucketMirror | None:
    """Mirror mode (``ledger.objstore.mirror``): the child checks the store and reads the
    bucket's checkpoint, which the start weighs as evidence."""
    if not settings.object_store_url or settings.object_store_mode == "primary":
        return None
    from ledger.objstore.mirror import BucketMirror

    return BucketMirror(
        db_dir=settings.db_dir,
        secondary_dir=settings.data_dir / "bucket-secondary",
        origin=settings.origin,
        url=settings.object_store_url,
        endpoint=settings.object_store_endpoint,
        region=settings.object_store_region,
    )


BUCKET_HEALTH = "ledger.objstore"


def _bucket_health(bucket: BucketMirror, loop: asyncio.AbstractEventLoop) -> Callable[[Any], None]:
    """gRPC health of the named service ``ledger.objstore``: SERVING while the bucket answers
    and publishing has not stopped on a conflict (appends never depend on it)."""

    def hook(health: Any) -> None:
        pending: set[asyncio.Future[Any]] = set()

        def changed(state: MirrorState) -> None:  # on the mirror's reader thread
            def apply() -> None:
                task = asyncio.ensure_future(set_health(health, BUCKET_HEALTH, state.healthy))
                pending.add(task)
                task.add_done_callback(pending.discard)

            with contextlib.suppress(RuntimeError):  # the loop closed at shutdown
                loop.call_soon_threadsafe(apply)

        bucket.on_change = changed
        changed(bucket.state)

    return hook


def _publish_to(
    mirror: MirrorProcess | None, bucket: BucketMirror | None
) -> Callable[[PublishedCheckpoint], None] | None:
    """The service's ``on_publish``: each child mirror, after the local commit."""
    children = [c for c in (mirror, bucket) if c is not None]
    if not children:
        return None
    if len(children) == 1:
        return children[0].submit

    def both(checkpoint: PublishedCheckpoint) -> None:
        for child in children:
            child.submit(checkpoint)

    return both


def _check_addresses(settings: Settings) -> None:
    """Every fixed listen address must be free before anything touches the disk."""
    check_listen(settings.listen, "listen")
    if settings.metrics_listen not in ("", "off"):
        check_listen(settings.metrics_listen, "metrics listen")
    if settings.tiles_listen not in ("", "off"):
        check_listen(settings.tiles_listen, "tiles listen")


async def _http_endpoints(
    settings: Settings,
    port: int,
    reader: TileReader,
    registry: MetricsRegistry,
    tls: ServerTls | None,
    append: AppendRoute | None = None,
) -> tuple[TilesServer | None, MetricsServer | None]:
    """The tiles endpoint (with ``/metrics`` unless ``[metrics] listen`` names its own, and
    ``POST /append`` when ``append`` is given) and, when configured, a metrics endpoint of its
    own; both over TLS when the server has it."""
    ssl = server_ssl_context(tls) if tls is not None else None
    tiles_listen = settings.tiles_address(port)
    on_tiles = settings.metrics_listen == ""

    requests = registry.counter(
        "ledger_tile_requests", "tlog-tiles HTTP requests", ["kind", "status"]
    )

    def counted(request: web.Request, status: int) -> None:
        path = request.path
        first = path.split("/")[1] if path.startswith("/") else ""
        kind = "entries" if path.startswith("/tile/entries/") else first
        kind = kind if kind in ("tile", "entries", "checkpoint", "metrics") else "other"
        requests.labels(kind, str(status)).inc()

    @web.middleware
    async def count(request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            response: web.StreamResponse = await handler(request)
        except web.HTTPException as exc:
            counted(request, exc.status)
            raise
        counted(request, response.status)
        return response

    def mount(app: web.Application) -> None:
        app.middlewares.append(count)
        if on_tiles:
            add_metrics_route(app, registry)
        if append is not None:
            append.mount(app)  # POST /append: JSON records, the gRPC append's rules

    tiles = None
    if tiles_listen is not None:
        tiles = await start_tiles_server(
            reader, tiles_listen, ssl=ssl, mount=mount, limits=listener_limits(settings)
        )
    metrics_server = None
    if settings.metrics_listen not in ("", "off"):
        host, mport = parse_listen(settings.metrics_listen)
        try:
            metrics_server = await start_metrics_server(
                registry, host, mport, ssl=ssl, limits=listener_limits(settings)
            )
        except BaseException:
            if tiles is not None:
                await tiles.stop()
            raise
    return tiles, metrics_server


async def start_app(settings: Settings, signer: Ed25519Signer | None = None) -> App:
    """Check the addresses, bind the data dir, recover the log, start everything.

    Without ``signer`` the key comes from ``settings.signer_key_file`` (``ledger serve``)."""
    _check_addresses(settings)
    mark_warnings = check_mark_location(settings) + check_file_limit(settings)
    tls = _tls(settings)
    check_plaintext(settings, tls_enabled=tls is not None)
    _policy(settings)  # the tokens file parses before anything touches the disk
    created = False
    if signer is None:
        signer, created = open_bound_signer(
            settings.data_dir, settings.signer_key_file, settings.origin
        )
    else:
        bind_signer(settings.data_dir, signer, settings.origin)
    policy = _policy(settings, AccessWatch(settings.data_dir))
    policy.close_if_credentials()  # a credential exists: recorded as closed from now on
    _warn_unconfigured_witnesses(settings)
    store = RocksStore(
        settings.db_dir, memtable_mb=settings.memtable_mb, cache_mb=settings.cache_mb
    )
    registry = MetricsRegistry()
    metrics = LedgerMetrics(registry)
    mirror: MirrorProcess | None = None
    bucket: BucketMirror | None = None
    acked = AckedSize(acked_path(settings.high_water_file))
    mark = HighWaterMark(settings.high_water_file)
    primary: PrimaryMode | None = None
    try:
        if settings.object_store_url and settings.object_store_mode == "primary":
            from ledger.app.primary_mode import PrimaryMode

            primary = PrimaryMode.open(settings, store, signer.verifier())
        log = Log(
            store=store,
            signer=signer,
            origin=settings.origin,
            mark=mark,
            acked=acked,
            gate=primary,
            clock_ms=_skewed_clock(settings.clock_offset_ms),
        )
        store.open_dedup()  # a rebuild (a missing or stale dedup table) now, not in an append
        mark.reserve()  # the writer's files stay open: no append needs a new descriptor
        acked.reserve()
        for warning in mark_warnings:  # once the data dir opened and recovered
            _log.warning("%s", warning)
        reader = TileReader(store=store, published=log.latest_checkpoint)
        mirror = _start_mirror(settings)
        bucket = _start_bucket(settings)
        service = LogService(
            log,
            checkpoint_interval=settings.checkpoint_interval_ms / 1000,
            max_pending=settings.max_pending,
            on_publish=_publish_to(mirror, bucket),
            ack_on_publish=primary is not None,
        )
        service.observer = metrics
        evidence = Evidence(
            log=log,
            verifiers=[signer.verifier()],
            witnesses=[w.name for w in settings.witnesses],
            quorum=settings.witness_quorum or len(settings.witnesses),
        )
        if bucket is not None and bucket.start_checkpoint is not None:
            evidence.observe_checkpoint(f"bucket {bucket.state.url}", bucket.start_checkpoint)
        elif bucket is not None and not bucket.state.reachable:
            _log.warning(
                "object store %s did not answer at start (%s): its checkpoint was not weighed; "
                "publishing waits for it",
                bucket.state.url,
                bucket.state.last_error,
            )
        cosigning = _cosigning(settings, log, evidence)
        if primary is not None:  # the lock taken, the data dir at the bucket's checkpoint
            await asyncio.get_running_loop().run_in_executor(None, primary.start, log)
        await _start_check(settings, log, cosigning, evidence)
        if primary is not None:  # a bucket older than a witness's size is refused
            primary.weigh_witnesses(log, cosigning.status)
        await service.start()
        if primary is not None:
            primary.keep_lease(log)
        if (latest := log.latest_checkpoint()) is not None:
            for child in (mirror, bucket):
                if child is not None:
                    child.submit(latest)  # catch up with what was published before this start
        tsas = setup_tsas(settings)
    except BaseException:
        if primary is not None:
            primary.stop()
        if mirror is not None:
            mirror.stop()
        if bucket is not None:
            bucket.stop()
        store.close()
        acked.close()
        mark.close()
        raise
    tsas.targets = _observed(tsas.targets, metrics)
    registry.add_collector(witness_metrics(lambda: cosigning.status, lambda: cosigning.quorum_size))
    registry.add_collector(evidence_metrics(evidence, lambda: log.read_only is not None))
    if bucket is not None:
        registry.add_collector(bucket.collect)
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
            None, backup_store, store, settings.data_dir, Path(out_dir), backup_trust(settings)
        )

    server: grpc.aio.Server | None = None
    try:
        anchor_now = anchoring.anchor_now if tsas.targets else None
        limiter = RateLimiter(settings.rate_per_s, settings.burst)
        throttle = FailureThrottle(settings.auth_failures, settings.auth_failure_window_s)
        interceptor = AuthInterceptor(
            policy, limiter, metrics, access_log=settings.access_log, throttle=throttle
        )
        limits = server_limits(settings)  # one byte budget for gRPC and the HTTP append
        server, port = await create_server(
            service,
            settings.listen,
            anchor_now=anchor_now,
            backup=backup,
            credentials=_credentials(tls),
            interceptors=[interceptor],
            limits=limits,
            connections=connection_limits(settings),
            health_hook=None
            if bucket is None
            else _bucket_health(bucket, asyncio.get_running_loop()),
        )
        append = AppendRoute(
            service,
            policy,
            limiter,
            throttle,
            budget=limits.budget,
            access_log=settings.access_log,
        )
        tiles, metrics_server = await _http_endpoints(settings, port, reader, registry, tls, append)
    except BaseException:
        if server is not None:
            await server.stop(None)
        tsas.close()
        await service.stop()
        if primary is not None:
            primary.stop()
        if mirror is not None:
            mirror.stop()
        if bucket is not None:
            bucket.stop()
        store.close()
        acked.close()
        mark.close()
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
        evidence=evidence,
        metrics=metrics,
        policy=policy,
        acked=acked,
        mark=mark,
        metrics_server=metrics_server,
        tiles=tiles,
        mirror=mirror,
        bucket=bucket,
        primary=primary,
        key_created=created,
        budget=limits.budget,
    )


def freeze_startup_heap() -> None:
    """Collect, then move every object still alive (modules, gRPC, the store's caches: about
    73,000 objects) to the collector's permanent generation.

    Under typed appends the garbage of grpc.aio's calls and of the items set off a full
    collection about twice a second, and each walked those objects again: 50 ms apiece, about
    11 % of a core (docs/benchmarks.md "The collector's share of typed appends (issue 23),
    2026-12-02 16:23–16:31 (load average 1.5–2.5)"). Garbage made after this is collected as
    before, so memory stays bounded; only the startup objects are never freed, and they live as
    long as the server anyway."""
    gc.collect()
    gc.freeze()


async def serve(settings: Settings, on_ready: Callable[[App], None]) -> None:
    """Run until SIGTERM or SIGINT, then shut down gracefully."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    app = await start_app(settings)
    freeze_startup_heap()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    on_ready(app)
    await stop.wait()
    await app.stop()
