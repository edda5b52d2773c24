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
from ledger.net.listener import HttpListener, ListenerLimits, serve_limited

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
    listener: HttpListener
    port: int

    async def stop(self) -> None:
        await self.listener.close()
        await self.runner.cleanup()


async def start_metrics_server(
    registry: MetricsRegistry,
    host: str,
    port: int,
    *,
    ssl: ssl_module.SSLContext | None = None,
    limits: ListenerLimits | None = None,
) -> MetricsServer:
    """Start ``/metrics`` on ``host:port`` (port 0 picks one); return it with its port;
    ``limits``: timeouts and connection caps (``ledger.net.listener``)."""
    limits = limits or ListenerLimits()
    app = web.Application()
    add_metrics_route(app, registry)
    runner = web.AppRunner(app, **limits.handler_options("metrics"))
    await runner.setup()
    assert runner.server is not None
    try:
        listener = await serve_limited(runner.server, host, port, limits, name="metrics", ssl=ssl)
    except BaseException:
        await runner.cleanup()
        raise
    return MetricsServer(runner=runner, listener=listener, port=int(listener.port))
