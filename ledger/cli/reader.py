"""``ledger serve-reader``: serve proofs and reads from a running log's data dir, read-only, on
a port of its own (``ledger.log.reader``); appends must go to the writer (``ledger serve``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import click

from ledger.core.errors import LedgerError

__all__ = ["serve_reader"]


async def _run(data_dir: Path, listen: str, interval: float) -> None:
    from ledger.api.server import create_server
    from ledger.log.reader import ReaderService, open_reader_log, refresh
    from ledger.store.rocks import RocksStore

    scratch = Path(tempfile.mkdtemp(prefix="reader-", dir=data_dir))
    store = RocksStore.secondary(data_dir / "db", scratch)
    try:
        service = ReaderService(await asyncio.to_thread(open_reader_log, store))
        server, port = await create_server(service, listen)
        host = listen.rpartition(":")[0]
        click.echo(json.dumps({"event": "serving", "role": "reader", "address": f"{host}:{port}"}))
        sys.stdout.flush()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        refresher = asyncio.create_task(refresh(service, store, interval))
        await stop.wait()
        refresher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await refresher
        await server.stop(1)
    finally:
        store.close()
        shutil.rmtree(scratch, ignore_errors=True)


@click.command("serve-reader")
@click.option(
    "--data-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
    help="the running log's data dir",
)  # fmt: skip
@click.option("--listen", default="127.0.0.1:6963", show_default=True, help="HOST:PORT (0: any)")
@click.option(
    "--interval-ms",
    type=click.IntRange(10, 60_000),
    default=100,
    show_default=True,
    help="catch up with the writer this often (ms)",
)
def serve_reader(data_dir: Path, listen: str, interval_ms: int) -> None:
    """Serve reads of a running log from its data dir (a RocksDB secondary), read-only."""
    if not (data_dir / "db" / "CURRENT").exists():
        click.echo(f"error: {data_dir} holds no log (no {data_dir / 'db'})", err=True)
        sys.exit(2)
    try:
        asyncio.run(_run(data_dir, listen, interval_ms / 1000))
    except LedgerError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
