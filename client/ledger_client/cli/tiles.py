"""``ledger-verify receipt-fetch`` / ``receipt-upgrade``: receipts from a C2SP tlog-tiles URL
(``ledger_client.remote.receipt_tiles``), with no gRPC: the log's HTTP endpoint, a static mirror or
a CDN.

The checkpoint's signature (``--key``) and origin are verified and the proofs checked against it
before a receipt is written. Exit codes (``clikit.outcome``): 0 written, 1 a check failed (bad
signature, a proof that does not verify, a rewritten leaf), 2 usage, input that does not parse,
or a URL that cannot be read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ledger_client.clikit.keys import log_verifiers
from ledger_client.clikit.outcome import Outcome, finish, json_option, parse_hash
from ledger_client.receipts.receipt import Receipt

__all__ = ["receipt_fetch", "receipt_upgrade"]

_TILES_HELP = "C2SP tlog-tiles base URL (http, https or file)"
_INDEX = "the entry's index (else the entry bundles are scanned)"
_OUT = "where to write the receipt (JSON)"


def _verified_output(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options both commands share: log keys, origin, output file, timeout, --json."""
    fn = json_option(fn)
    fn = click.option(
        "--timeout",
        type=click.FloatRange(min=0.0, min_open=True),
        default=30.0,
        help="seconds per HTTP request",
    )(fn)
    fn = click.option(
        "--out", required=True, type=click.Path(dir_okay=False, path_type=Path), help=_OUT
    )(fn)
    fn = click.option("--origin", metavar="ORIGIN", help="expected origin")(fn)
    return click.option(
        "--key", "keys", multiple=True, required=True, metavar="VKEY", help="log key"
    )(fn)


def _written(check: str, receipt: Receipt, out: Path) -> Outcome:
    out.write_text(receipt.to_json() + "\n")
    details = {"tree_size": receipt.tree_size, "index": receipt.index, "out": str(out)}
    lines = [f"index {receipt.index} at tree size {receipt.tree_size}: receipt written to {out}"]
    return Outcome(check, details, lines)


@click.command("receipt-fetch")
@click.option("--tiles", required=True, metavar="URL", help=_TILES_HELP)
@click.option("--digest", required=True, metavar="HEX", help="record digest (hex or base64)")
@click.option(
    "--index", type=click.IntRange(0), help="the entry's index (else bundles are scanned)"
)
@_verified_output
def receipt_fetch(
    tiles: str,
    digest: str,
    index: int | None,
    keys: tuple[str, ...],
    origin: str | None,
    out: Path,
    timeout: float,
    as_json: bool,
) -> None:
    """Fetch the receipt of a logged record digest from tiles (with its anchors when the URL is a
    bucket the log publishes to; the log's endpoint and mirror folders carry none)."""

    def run() -> Outcome:
        from ledger_client.remote.receipt_tiles import fetch_receipt_from_tiles
        from ledger_client.remote.tiles import TileClient

        receipt = fetch_receipt_from_tiles(
            TileClient(tiles, timeout=timeout),
            parse_hash(digest, "--digest"),
            verifiers=log_verifiers(keys),
            origin=origin,
            index=index,
        )
        return _written("receipt-fetch", receipt, out)

    finish("receipt-fetch", as_json, run)


@click.command("receipt-upgrade")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--tiles", required=True, metavar="URL", help=_TILES_HELP)
@_verified_output
def receipt_upgrade(
    file: Path,
    tiles: str,
    keys: tuple[str, ...],
    origin: str | None,
    out: Path,
    timeout: float,
    as_json: bool,
) -> None:
    """Move a receipt, or every receipt of a run file (JSON lines), to the latest checkpoint
    served as tiles (consistency proof kept); written atomically to --out (which may be FILE).
    """

    def run() -> Outcome:
        from ledger_client.receipts.upgrade_file import upgrade_file
        from ledger_client.remote.receipt_tiles import upgrade_receipt_from_tiles
        from ledger_client.remote.tiles import TileClient

        client, verifiers = TileClient(tiles, timeout=timeout), log_verifiers(keys)

        def upgrade(receipt: Receipt) -> Receipt:
            return upgrade_receipt_from_tiles(client, receipt, verifiers=verifiers, origin=origin)

        done = upgrade_file(file, upgrade, out=out)
        if done.kind == "receipt":
            receipt = done.receipts[0]
            details = {"tree_size": receipt.tree_size, "index": receipt.index, "out": str(out)}
            line = f"index {receipt.index} at tree size {receipt.tree_size}: written to {out}"
            return Outcome("receipt-upgrade", details, [line])
        sizes = ", ".join(str(size) for size in sorted({r.tree_size for r in done.receipts}))
        line = f"{len(done.receipts)} receipts of run file {file} at tree size {sizes}: {out}"
        return Outcome("receipt-upgrade", done.to_json_obj(), [line])

    finish("receipt-upgrade", as_json, run)
