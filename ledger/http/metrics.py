"""``/metrics`` over HTTP (aiohttp): the Prometheus text format of a ``MetricsRegistry``.

``add_metrics_route`` mounts the route on any ``aiohttp.web.Application`` (the HTTP endpoint of
the read path mounts it there); ``start_metrics_server`` runs a small app of its own on
``[metrics] listen`` (over TLS when ``ssl`` is given) until ``stop``.
"""

from __future__ import annotations

import ssl as ssl_module
from dataclasses import dataclass

from aiohttp import web

from ledger.log.metrics import MetricsRegistry

__all__ = ["MetricsServer", "add_metrics_route", "start_metrics_server"]

_REGISTRY = web.AppKey("ledger_metrics_registry", MetricsRegistry)


async def _metrics(request: web.Request) -> web.Response:
    registry = request.app[_REGISTRY]
    body = registry.exposition()
    return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4"})


def add_metrics_route(app: web.Application, registry: MetricsRegistry) -> None:
    """Serve ``GET /metrics`` from ``registry`` on ``app``."""
    app[_REGISTRY] = registry
    app.router.add_get("/metrics", _metrics)


@dataclass(slots=True)
class MetricsServer:
    """A running metrics endpoint."""

    runner: web.AppRunner
    port: int

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_metrics_server(
    registry: MetricsRegistry, host: str, port: int, *, ssl: ssl_module.SSLContext | None = None
) -> MetricsServer:
    """Start ``/metrics`` on ``host:port`` (port 0 picks one); return it with its port."""
    app = web.Application()
    add_metrics_route(app, registry)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl, reuse_address=True)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    bound = sockets[0].getsockname()[1] if sockets else port
    return MetricsServer(runner=runner, port=bound)
