"""``ledger``: the operator's CLI (keygen, serve, config, anchor, receipts, tiles, witnesses, tsa,
tokens, fsck, backup, restore, migrate-storage, serve-reader).

It only parses and prints; the work lives in ``ledger.app``, ``ledger.fileio.keys`` and
``ledger.app.settings``. Exit codes: 0 ok, 1 the operation failed, 2 usage or bad input.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import click

from ledger.app.settings import DEFAULT_ORIGIN, Settings, load_settings
from ledger.cli.append import append
from ledger.cli.keys import create_key_file
from ledger.cli.migrate import migrate_storage
from ledger.cli.objstore import objstore_group
from ledger.cli.ops import register_ops
from ledger.cli.reader import serve_reader
from ledger.cli.receipt import receipt_group
from ledger.cli.restore import restore
from ledger.cli.settings import FLAGS, setting_option
from ledger.cli.tiles import tiles_group
from ledger.cli.witness import witness, witnesses
from ledger.core import accel
from ledger.core.errors import FormatError, LedgerError
from ledger_client.clikit.connection import connection_from, connection_options
from ledger_client.clikit.errors import CliGroup, fail

__all__ = ["main"]


@click.group(
    cls=CliGroup, context_settings={"help_option_names": ["-h", "--help"], "show_default": True}
)
@click.version_option(package_name="decision-ledger")
def main() -> None:
    """Run and operate a Decision Ledger transparency log."""


@main.command()
@click.argument("name")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="signer key file")
@click.option("--force", is_flag=True, help="overwrite an existing key file")
def keygen(name: str, out: Path | None, force: bool) -> None:
    """Create an Ed25519 signer key NAME (file mode 0600); print its verifier key."""
    from ledger.core.checkpoint import Ed25519Signer

    create_key_file(Ed25519Signer, name, out, force, what="signer")


@main.command("verifier-key")
@click.option(
    "--key",
    "key_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("ledger-data/signer.key"),
    show_default=True,
    help="signer key file",
)
def verifier_key(key_file: Path) -> None:
    """Print the verifier key of a signer key file (what third parties verify with)."""
    from ledger.fileio.keys import load_signer

    try:
        click.echo(load_signer(key_file).verifier().key_string())
    except LedgerError as exc:
        fail(str(exc), 2)


def _settings(config: Path | None, **flags: Any) -> Settings:
    try:
        return load_settings(config).with_overrides(FLAGS, **flags)
    except FormatError as exc:
        fail(str(exc), 2)


config_option = click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML configuration file (default: none, embedded defaults)",
)


@main.command()
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
    settings = _settings(config, **flags)
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
        }
        click.echo(json.dumps(line), nl=True)
        sys.stdout.flush()
        log = logging.getLogger("ledger")
        if accel.native_error is not None:
            log.info("append path on the pure core: %s", accel.native_error)
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


@main.command()
@config_option
@connection_options
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              help="work on a stopped log's data dir instead of a server")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--wait", is_flag=True, help="return once an anchor is stored (asking again)")
@click.option("--timeout", type=click.FloatRange(0), default=120.0, help="--wait limit, seconds")
def anchor(
    config: Path | None,
    data_dir: Path | None,
    as_json: bool,
    wait: bool,
    timeout: float,
    **conn: Any,
) -> None:
    """Anchor the latest checkpoint now with every configured TSA (for cron).

    By default, ask the running server (its AnchorNow RPC: an admin call, so give a token
    with the admin scope unless the server is an open development log). With --data-dir (or
    --config), work on the store directly: only while the server is stopped (RocksDB allows
    one process per data dir). A checkpoint is never stamped twice by the same TSA. With
    --wait, ask again (backing off) until an anchor of that checkpoint or a later one is stored.
    """
    source = click.get_current_context().get_parameter_source("server")
    local = data_dir is not None or config is not None
    if local and source is click.core.ParameterSource.COMMANDLINE:
        fail("give exactly one of --server ADDR or --data-dir DIR (or --config FILE)", 2)
    size, stored, failures = _anchor_waiting(config, data_dir, conn if not local else None, wait,
                                             timeout)  # fmt: skip
    if as_json:
        click.echo(json.dumps({"size": size, "anchored": stored, "failures": failures}))
    else:
        click.echo(f"checkpoint size {size}: anchored by {', '.join(stored) or 'no new TSA'}")
        for failure in failures:
            click.echo(f"failed: {failure}", err=True)
    sys.exit(1 if failures and not stored else 0)


def _anchor_waiting(
    config: Path | None,
    data_dir: Path | None,
    conn: dict[str, Any] | None,
    wait: bool,
    timeout: float,
) -> tuple[int, list[str], list[str]]:
    from ledger.cli.receipt import anchored_local, anchored_remote, wait_for_anchor

    once: Callable[[], tuple[int, list[str], list[str]]]
    if conn is not None:
        connection = connection_from(**conn)
        once, stored_from = (
            partial(_anchor_remote, connection),
            partial(anchored_remote, connection),
        )
    else:
        settings = _settings(config, data_dir=data_dir)
        once, stored_from = (
            partial(_anchor_local, settings),
            partial(anchored_local, settings.db_dir),
        )
    if not wait:
        return once()
    try:
        return wait_for_anchor(once, stored_from, timeout=timeout)
    except TimeoutError as exc:
        fail(str(exc), 1)


def _anchor_remote(connection: Any) -> tuple[int, list[str], list[str]]:
    from ledger_client.remote.log import RemoteLog

    try:
        with RemoteLog(connection, timeout=120) as remote:
            size, anchors, failures = remote.anchor_now()
    except LedgerError as exc:
        fail(str(exc), 1)
    return size, [a.tsa for a in anchors], failures


def _anchor_local(settings: Settings) -> tuple[int, list[str], list[str]]:
    from ledger.app.tsa_setup import setup_tsas
    from ledger.fileio.keys import load_signer
    from ledger.log.anchoring import Anchorer
    from ledger.log.facade import Log
    from ledger.log.highwater import HighWaterMark
    from ledger.store.rocks import RocksStore

    try:
        store = RocksStore(settings.db_dir)
    except LedgerError as exc:
        fail(f"{exc} (is the server running? then use --server)", 1)
    try:
        # the same check as `ledger serve` at start: a tree behind or off its high-water mark
        # (a rolled-back or another log's data dir) is refused before anything is stamped
        mark = HighWaterMark(settings.high_water_file)
        signer = load_signer(settings.signer_key_file)
        # the key names its log (`ledger serve` refuses any other origin)
        log = Log(store=store, signer=signer, origin=signer.name, mark=mark)
        tsas = setup_tsas(settings)
        try:
            outcome = Anchorer(log=log, tsas=tsas.targets).anchor_latest()
        finally:
            tsas.close()
    except LedgerError as exc:
        fail(str(exc), 1)
    finally:
        store.close()
    return outcome.size, [a.tsa for a in outcome.anchors], outcome.failures


@main.command()
@click.option("--listen", default="127.0.0.1:3161", show_default=True, help="HOST:PORT")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("ledger-data/tsa"),
    show_default=True,
    help="CA, TSA certificate, keys and serial state",
)
def tsa(listen: str, state_dir: Path) -> None:
    """Run the embedded development RFC 3161 TSA over HTTP.

    It proves nothing to a third party when the log's operator runs it: use it for
    development and tests; production anchors with independent TSAs.
    """
    from ledger.tsa.client import TsaAuthority, TsaServer, run_tsa

    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        fail(f"--listen {listen!r}: want HOST:PORT", 2)

    def ready(server: TsaServer, authority: TsaAuthority) -> None:
        click.echo(json.dumps({"event": "serving", "url": server.url,
                               "root": str(state_dir / "root.pem")}))  # fmt: skip
        sys.stdout.flush()

    run_tsa(host, int(port), state_dir, on_ready=ready)


for _command in (
    append,
    receipt_group,
    tiles_group,
    objstore_group,
    witness,
    witnesses,
    migrate_storage,
    serve_reader,
    restore,
):
    main.add_command(_command)


@main.group("config")
def config_group() -> None:
    """Inspect the configuration, or write a commented sample."""


@config_group.command("show")
@config_option
def config_show(config: Path | None) -> None:
    """Print the effective configuration (defaults < TOML file < environment) as JSON."""
    click.echo(json.dumps(_settings(config).to_dict(), indent=2, sort_keys=True))


register_ops(main)


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
