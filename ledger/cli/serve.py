"""``ledger serve``: run the log (``ledger.app.compose``) with its settings from the defaults,
``--config``, ``LEDGER_*`` and the flags (``ledger.cli.settings``), and its log lines in the
configured format."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import click

from ledger.app.settings import DEFAULT_ORIGIN
from ledger.cli.config import config_option, settings_from
from ledger.cli.settings import FLAGS, setting_option
from ledger.core import accel

__all__ = ["GRPC_VERBOSITY", "serve"]


@click.command()
@config_option
@setting_option("--data-dir", "data_dir", type=click.Path(file_okay=False, path_type=Path))
@setting_option("--key", "key_file", type=click.Path(dir_okay=False, path_type=Path))
@setting_option("--origin", "origin")
@setting_option("--listen", "listen")
@setting_option(
    "--checkpoint-interval-ms", "checkpoint_interval_ms", type=click.IntRange(1, 60_000)
)
@setting_option("--max-pending", "max_pending", type=click.IntRange(1, 10_000_000))
@setting_option("--log-format", "log_format", type=click.Choice(["text", "json"]))
@setting_option("--anchor-interval-s", "anchor_interval_s", type=click.FloatRange(0, 86_400))
@setting_option("--embedded-tsa/--no-embedded-tsa", "embedded_tsa", default=None)
@setting_option("--metrics-listen", "metrics_listen")
@setting_option("--tls-cert", "tls_server_cert", type=click.Path(dir_okay=False, path_type=Path))
@setting_option("--tls-key", "tls_server_key", type=click.Path(dir_okay=False, path_type=Path))
@setting_option("--tls-client-ca", "tls_client_ca", type=click.Path(dir_okay=False, path_type=Path))
@setting_option("--tiles-listen", "tiles_listen")
@setting_option("--tiles-dir", "tiles_dir", type=click.Path(file_okay=False, path_type=Path))
@setting_option("--object-store-url", "object_store_url")
@setting_option("--object-store-endpoint", "object_store_endpoint")
@setting_option("--object-store-region", "object_store_region")
@setting_option(
    "--object-store-mode", "object_store_mode", type=click.Choice(["mirror", "primary"])
)
@setting_option("--object-store-writer", "object_store_writer")
@setting_option("--standby/--no-standby", "standby", default=None)
@setting_option(
    "--witness-start-override/--no-witness-start-override",
    "witness_start_override",
    default=None,
)
def serve(config: Path | None, **flags: Any) -> None:
    """Run the log (embedded defaults: ./ledger-data, a dev key, localhost, embedded TSA).

    Precedence: defaults < --config TOML < LEDGER_<FIELD> environment variables < flags.
    """
    settings = settings_from(config, FLAGS, **flags)
    _configure_logging(settings.log_format)
    from ledger.app.compose import App
    from ledger.app.compose import serve as run

    def ready(app: App) -> None:
        line = {
            "event": "serving",
            "address": app.address,
            "origin": settings.origin,
            "verifier_key": app.verifier_key,
            "data_dir": str(settings.data_dir),
            "key_created": app.key_created,
            "tls": settings.tls_enabled,
            "mtls": settings.tls_client_ca is not None,
            "auth": app.policy.mode,
            "tiles_url": app.tiles_url,
            "metrics": app.metrics_address,
            "tsas": [t.name for t in app.tsas.targets],
            "embedded_tsa_root": str(app.tsas.embedded_root) if app.tsas.embedded_root else None,
            "core": accel.CORE,
            "cores": accel.cores(),
        }
        click.echo(json.dumps(line), nl=True)
        sys.stdout.flush()
        log = logging.getLogger("ledger")
        for part, why in accel.pure_reasons().items():
            log.info("%s on the pure core: %s", _PARTS[part], why)
        if not settings.tls_enabled:
            log.warning("plaintext gRPC on %s: for loopback development only", app.address)
        if app.policy.open_log:
            log.warning("appends are open: %s", app.policy.mode)
        if settings.origin == DEFAULT_ORIGIN:
            log.warning(
                "origin is the development default %r: set [log] origin before real use",
                DEFAULT_ORIGIN,
            )

    asyncio.run(run(settings, ready))


_PARTS = {"append": "append path", "json": "strict JSON reader", "record": "record reader"}


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        access = getattr(record, "access", None)
        if isinstance(access, dict):
            payload.update(access)
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return json.dumps(payload)


# grpc core's own verbosity under ``ledger serve`` unless the operator sets GRPC_VERBOSITY
GRPC_VERBOSITY = "ERROR"


def _configure_logging(fmt: str) -> None:
    """Every log line of ``ledger serve`` in the configured format (``text`` or JSON lines).

    grpc's Python-side loggers (``grpc``, ``grpc._cython``, ``grpc._server``, ...) propagate to
    the root handler, so they get the format. grpc core's native lines (C++, written straight
    to stderr by absl, e.g. ``I1201 ... ssl_transport_security.cc] Handshake failed``) cannot
    be reformatted from Python: GRPC_VERBOSITY defaults to ``ERROR`` here (read once, when grpc
    is first imported, which is after this), so only core errors appear, unformatted; the
    per-connection INFO chatter (one line per failed TLS handshake: a plaintext client at a
    TLS server) stays out. ``GRPC_VERBOSITY=INFO`` (and ``GRPC_TRACE``) bring it back.
    """
    if "grpc" not in sys.modules:
        os.environ.setdefault("GRPC_VERBOSITY", GRPC_VERBOSITY)
    for name in ("grpc", "grpc._cython", "grpc._server", "grpc._channel"):
        grpc_logger = logging.getLogger(name)
        grpc_logger.handlers[:] = [
            h for h in grpc_logger.handlers if isinstance(h, logging.NullHandler)
        ]
        grpc_logger.propagate = True
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
