"""``ledger receipt fetch | upgrade | run`` and ``ledger anchor --wait``: anchored receipts from
the command line (receipts: ``ledger_client.receipts.receipt``; RFC 3161 anchors, RFC 9162 proofs).

* ``fetch --server ADDR (--digest HEX | --leaf FILE) --out R.json``: the receipt of one logged
  record (``ledger_client.remote.receipt_fetch.fetch_receipt``): on the earliest anchored checkpoint
  that covers it, else the latest one (then without anchors: run ``ledger anchor --wait`` and
  ``upgrade``). ``--leaf`` takes the raw leaf ``ledger append --leaf-out`` saved (the record
  digest is in it). Tiles (``--tiles URL``) have no digest index: they need an index instead.
* ``upgrade FILE --server ADDR [--out FILE2]``: add the anchors that reached the receipt's
  checkpoint (and its ``previous`` one) since it was fetched, keeping everything else; when its
  checkpoint still has none, move it to the newest anchored checkpoint with a fresh inclusion
  proof (``upgrade_receipt``: the old checkpoint, its anchors and the consistency proof stay in
  ``previous``). FILE is one receipt or a run file (JSON lines of ``{"record", "receipt"}``, as
  the SDK writes it): every receipt is upgraded and the file replaced atomically, or written to
  ``--out`` (``ledger_client.receipts.upgrade_file``); nothing is written when one fails (exit
  1 when no anchored checkpoint covers it yet; ``--wait S`` waits that long for the log's next
  scheduled anchor, never asking for one).
* ``run --spool SPOOL --server ADDR --out RUN.jsonl [--run RUN_ID]``: write or complete a run's
  receipts file after the fact (``ledger_client.sdk.run_file``): the run's records are read from
  the spool before the client opens it (and delivers what is pending).
* ``wait_for_anchor``: what ``ledger anchor --wait`` runs: ask again until an anchor of the
  checkpoint (or a later one) is stored, or the timeout passes.

Neither command verifies what the server sent beyond its shape: ``ledger-verify receipt`` does.
Exit codes: 0 done, 1 the server could not (unreachable, not found, not yet covered), 2 bad
input, 4 a record or receipt of a newer schema version (the message ``ledger-verify`` gives:
"unsupported schema version N ..., upgrade"; ``clikit.errors.EXIT_UNSUPPORTED``).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ledger.core.backoff import Backoff, DeadlinePassed, retry
from ledger.core.errors import (
    FormatError,
    LedgerError,
    MalformedReceiptError,
    NotFoundError,
    UnsupportedSchemaError,
)
from ledger.core.types import decode_leaf
from ledger_client.clikit.connection import connection_from, connection_options
from ledger_client.clikit.errors import EXIT_UNSUPPORTED, fail
from ledger_client.remote.connection import Connection

if TYPE_CHECKING:
    from ledger_client.receipts.receipt import Receipt, ReceiptAnchor
    from ledger_client.remote.log import RemoteLog

__all__ = ["receipt_group", "wait_for_anchor"]


def _SERVER(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--server`` and the token/TLS options, as one ``Connection`` argument ``address``."""

    def with_address(**kw: Any) -> Any:
        conn = {k: kw.pop(k) for k in ("server", "token_file", "tls_ca", "tls_cert", "tls_key")}
        return fn(address=connection_from(**conn), **kw)

    functools.update_wrapper(with_address, fn)
    return connection_options(with_address)


_TIMEOUT = click.option(
    "--timeout", type=click.FloatRange(0), default=60.0, show_default=True, help="seconds"
)


def _remote_call(address: str | Connection, work: Callable[[RemoteLog], Any]) -> Any:
    """Run ``work`` against ``address``; server and ledger failures exit 1 with one line (the
    remote client names the server and the status)."""
    from ledger_client.remote.log import RemoteLog

    try:
        with RemoteLog(address, timeout=60) as remote:
            return work(remote)
    except UnsupportedSchemaError as exc:
        fail(str(exc), EXIT_UNSUPPORTED)
    except FormatError as exc:
        fail(str(exc), 2)
    except (LedgerError, TimeoutError) as exc:
        fail(str(exc), 1)


# --- fetch ------------------------------------------------------------------------------------


def _digest(digest: str | None, leaf: Path | None) -> bytes:
    if (digest is None) == (leaf is None):
        raise click.UsageError("give exactly one of --digest HEX or --leaf FILE")
    if digest is not None:
        try:
            value = bytes.fromhex(digest)
        except ValueError:
            raise click.BadParameter(f"{digest!r} is not hex", param_hint="--digest") from None
        if len(value) != 32:
            raise click.BadParameter(f"{len(value)} bytes, want 32", param_hint="--digest")
        return value
    assert leaf is not None
    try:
        return decode_leaf(0, leaf.read_bytes()).record_digest
    except (LedgerError, OSError) as exc:
        raise click.BadParameter(f"{leaf}: not a v1 leaf ({exc})", param_hint="--leaf") from None


def _summary(receipt: Receipt, out: Path) -> str:
    return json.dumps(
        {
            "record_digest": receipt.record_digest.hex(),
            "index": receipt.index,
            "tree_size": receipt.tree_size,
            "anchors": len(receipt.anchors),
            "previous_size": None if receipt.previous is None else _size(receipt.previous),
            "out": str(out),
        }
    )


def _size(previous: Any) -> int:
    from ledger.core.checkpoint import Checkpoint, SignedNote

    return Checkpoint.from_text(SignedNote.from_text(previous.checkpoint).text).size


@click.group("receipt")
def receipt_group() -> None:
    """Fetch, upgrade and complete receipts from a running log (check them: ledger-verify)."""


@receipt_group.command("fetch")
@_SERVER
@click.option("--tiles", "tiles_url", help="read the log's C2SP tiles at this URL instead")
@click.option("--index", type=click.IntRange(min=0), help="the entry's index (with --tiles)")
@click.option("--key", "key", help="the log's verifier key (with --tiles: checks the checkpoint)")
@click.option("--digest", help="record digest, 64 hex digits")
@click.option("--leaf", type=click.Path(dir_okay=False, path_type=Path), help="raw v1 leaf file")
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="receipt file"
)
def fetch(
    address: Connection,
    tiles_url: str | None,
    index: int | None,
    key: str | None,
    digest: str | None,
    leaf: Path | None,
    out: Path,
) -> None:
    """Fetch the receipt of a logged record: over gRPC (--server, by --digest or --leaf) on the
    earliest anchored checkpoint that covers it; or from the log's tiles (--tiles URL --index I
    --key VKEY) on the latest checkpoint, without anchors. Tiles have no digest index, so the
    entry's index is needed there (its leaf names the digest; --digest/--leaf are checked)."""
    if tiles_url is not None:
        receipt = _fetch_from_tiles(tiles_url, index, key, digest, leaf)
    else:
        if index is not None or key is not None:
            fail("--index and --key go with --tiles", 2)
        from ledger_client.remote.receipt_fetch import fetch_receipt

        value = _digest(digest, leaf)
        receipt = _remote_call(address, lambda remote: fetch_receipt(remote, value))
    out.write_text(receipt.to_json())
    click.echo(_summary(receipt, out))


def _fetch_from_tiles(
    url: str, index: int | None, key: str | None, digest: str | None, leaf: Path | None
) -> Receipt:
    from ledger.core.types import decode_leaf
    from ledger_client.clikit.keys import log_verifiers
    from ledger_client.remote.receipt_tiles import fetch_receipt_from_tiles
    from ledger_client.remote.tiles import TileClient

    if index is None or key is None:
        fail("--tiles needs --index I (tiles have no digest index) and --key VKEY", 2)
    try:
        verifiers = log_verifiers([key])
    except (click.BadParameter, LedgerError) as exc:
        fail(str(exc), 2)
    client = TileClient(url)
    try:
        if digest is None and leaf is None:
            size = client.checkpoint(verifiers).checkpoint.size
            if index >= size:
                fail(f"--index {index}: the latest checkpoint has size {size}", 1)
            value = decode_leaf(index, client.leaves(index, 1, size)[0]).record_digest
        else:
            value = _digest(digest, leaf)
        return fetch_receipt_from_tiles(client, value, verifiers=verifiers, index=index)
    except UnsupportedSchemaError as exc:
        fail(str(exc), EXIT_UNSUPPORTED)
    except FormatError as exc:
        fail(str(exc), 2)
    except (LedgerError, OSError) as exc:
        fail(str(exc), 1)


# --- upgrade ----------------------------------------------------------------------------------


def _anchors_at(remote: RemoteLog, size: int) -> tuple[ReceiptAnchor, ...]:
    """The anchors the log holds for checkpoint ``size`` (none: empty)."""
    from ledger.core.limits import MAX_ANCHORED_SIZES
    from ledger.timestamp.rfc3161 import token_certificates
    from ledger_client.receipts.receipt import ReceiptAnchor

    if size not in remote.anchored_sizes(MAX_ANCHORED_SIZES):
        return ()
    checkpoint, anchors = remote.anchors(size)
    if checkpoint.size != size or any(a.size != size for a in anchors):
        raise LedgerError(f"the server answered anchors of size {checkpoint.size} for {size}")
    return tuple(
        ReceiptAnchor(tsa=a.tsa, token=a.token, certificates=tuple(token_certificates(a.token)))
        for a in anchors
    )


def _merged(have: tuple[ReceiptAnchor, ...], new: tuple[ReceiptAnchor, ...]) -> tuple[Any, ...]:
    tokens = {a.token for a in have}
    return have + tuple(a for a in new if a.token not in tokens)


def upgrade_with(
    remote: RemoteLog,
    receipt: Receipt,
    *,
    anchors_at: Callable[[int], tuple[ReceiptAnchor, ...]] | None = None,
) -> Receipt:
    """``receipt`` with the anchors that arrived later; moved to the newest anchored
    checkpoint (keeping the old one in ``previous``) when its own still has none.
    ``anchors_at``: the anchors of a size (default: asked of ``remote`` each time)."""
    from ledger_client.remote.receipt_fetch import upgrade_receipt

    lookup = anchors_at or functools.partial(_anchors_at, remote)
    anchors = _merged(receipt.anchors, lookup(receipt.tree_size))
    previous = receipt.previous
    if previous is not None:
        old = _merged(previous.anchors, lookup(_size(previous)))
        previous = replace(previous, anchors=old)
    updated = replace(receipt, anchors=anchors, previous=previous)
    if updated.anchors:
        return updated
    return upgrade_receipt(remote, updated)


class _Upgrader:
    """``upgrade_with`` for many receipts, asking the server once per checkpoint size."""

    def __init__(self, remote: RemoteLog) -> None:
        self.remote = remote
        self.anchors: dict[int, tuple[ReceiptAnchor, ...]] = {}

    def anchors_at(self, size: int) -> tuple[ReceiptAnchor, ...]:
        if size not in self.anchors:
            self.anchors[size] = _anchors_at(self.remote, size)
        return self.anchors[size]

    def __call__(self, receipt: Receipt) -> Receipt:
        return upgrade_with(self.remote, receipt, anchors_at=self.anchors_at)


@receipt_group.command("upgrade")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_SERVER
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="default: FILE")
@click.option(
    "--wait",
    type=click.FloatRange(0),
    default=0.0,
    metavar="SECONDS",
    help="wait this long for the log's next scheduled anchor when none covers FILE yet",
)
def upgrade(file: Path, address: Connection, out: Path | None, wait: float) -> None:
    """Add anchors that arrived later, or move to the newest anchored checkpoint: one receipt,
    or every receipt of a run file (JSON lines), replaced atomically (or written to --out)."""
    from ledger_client.receipts.upgrade_file import UpgradedFile, upgrade_file

    def work(remote: RemoteLog) -> UpgradedFile:
        try:
            return retry(
                lambda: upgrade_file(file, _Upgrader(remote), out=out),
                backoff=Backoff.doubling(0.5, 5.0),
                retry_on=lambda exc: isinstance(exc, NotFoundError),
                deadline=time.monotonic() + wait,
            )
        except DeadlinePassed:
            fail(f"{file}: no anchored checkpoint covers it yet (waited {wait} s)", 1)

    try:
        done: UpgradedFile = _remote_call(address, work)
    except UnsupportedSchemaError as exc:
        fail(str(exc), EXIT_UNSUPPORTED)
    except (MalformedReceiptError, FormatError) as exc:
        fail(str(exc), 2)
    if done.kind == "receipt":
        click.echo(_summary(done.receipts[0], done.out))
    else:
        click.echo(json.dumps(done.to_json_obj()))


# --- run --------------------------------------------------------------------------------------


@receipt_group.command("run")
@click.option(
    "--spool",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="the agent's spool file (records of the run still in it)",
)
@_SERVER
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="the run's receipts file (JSON lines), written or completed",
)
@click.option("--run", "run_id", help="the run id (default: the spool's only run)")
@click.option("--with-disclosures", is_flag=True, help="put spooled disclosures in the receipts")
@_TIMEOUT
def run(
    spool: Path,
    address: Connection,
    out: Path,
    run_id: str | None,
    with_disclosures: bool,
    timeout: float,
) -> None:
    """Write or complete a run's receipts file (JSON lines) after the fact, from its spool."""
    from ledger_client.sdk.client import LedgerClient
    from ledger_client.sdk.run_file import complete_run_receipts, spooled_run

    try:
        records = spooled_run(spool, run_id)
    except (LedgerError, OSError) as exc:
        fail(str(exc), 2)
    if not records and not out.exists():
        fail(f"{spool} holds no record of run {run_id or '(any)'} and {out} does not exist", 2)
    try:
        with LedgerClient(address, spool=spool, register_atexit=False) as client:
            if not client.flush(timeout, checkpoint=True):
                fail(
                    f"{address.address}: the spooled records were not acknowledged in {timeout} s",
                    1,
                )
            lines = complete_run_receipts(
                client, out, records=records, with_disclosures=with_disclosures, timeout=timeout
            )
    except FormatError as exc:
        fail(str(exc), 2)
    except (LedgerError, TimeoutError) as exc:
        fail(str(exc), 1)
    click.echo(json.dumps({"records": len(lines), "run_id": lines[0].record.run_id if lines
                           else None, "out": str(out)}))  # fmt: skip


# --- ledger anchor --wait ---------------------------------------------------------------------


def anchored_remote(address: str | Connection, size: int) -> bool:
    """An anchor of checkpoint ``size`` or a later one is stored on the server."""
    newest = _remote_call(address, lambda remote: remote.anchored_sizes(1))
    return bool(newest) and newest[0] >= size


def anchored_local(db_dir: Path, size: int) -> bool:
    """The same, read from a stopped server's store."""
    from ledger.store.rocks import RocksStore

    store = RocksStore(db_dir)
    try:
        newest = store.anchored_sizes(1)
    finally:
        store.close()
    return bool(newest) and newest[0] >= size


def wait_for_anchor(
    anchor_once: Callable[[], tuple[int, list[str], list[str]]],
    anchored_from: Callable[[int], bool],
    *,
    timeout: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[int, list[str], list[str]]:
    """Anchor until an anchor of the first run's checkpoint size (or a later one) is stored.

    ``anchor_once()`` runs one anchoring (size, stored TSAs, failures); ``anchored_from(size)``
    says whether an anchor of ``size`` or later is stored. Raises ``TimeoutError``.
    """
    deadline = clock() + timeout
    runs: list[tuple[int, list[str], list[str]]] = []

    def anchor() -> tuple[int, list[str], list[str]]:
        again, stored, failures = anchor_once()
        size = (runs[-1][0] if runs else 0) or again  # the first run's size, once known
        runs.append((size, stored, failures))
        if not stored and not (size and anchored_from(size)):
            raise _NotAnchored
        return size, stored, failures

    try:
        return retry(
            anchor,
            backoff=Backoff.doubling(0.2, 5.0),
            retry_on=lambda exc: isinstance(exc, _NotAnchored),
            deadline=deadline,
            sleep=sleep,
            clock=clock,
        )
    except DeadlinePassed:
        size, _, failures = runs[-1]
        raise TimeoutError(
            f"no anchor of checkpoint size {size} was stored within {timeout} s: "
            + ("; ".join(failures) or "no failure reported")
        ) from None


class _NotAnchored(Exception):
    """No anchor of the size waited for is stored yet."""
