"""``ledger append``: append one record (a file, or a digest) to a running log and save its
offline proof as ``c2sp.org/tlog-proof@v1`` plus the leaf, for ``ledger-verify tlog-proof``.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from ledger.core.backoff import Backoff, DeadlinePassed, retry
from ledger.core.errors import OutOfRangeError
from ledger.core.limits import HASH_SIZE
from ledger.core.packed import to_results
from ledger.core.tlogproof import TlogProof
from ledger_client.clikit.connection import connection_from, connection_options

__all__ = ["append"]

# The packed append returns once durable; its checkpoint follows within the server's interval.
_CHECKPOINT_POLL = Backoff(initial=0.02, maximum=0.5)


def _record_digest(record: Path | None, digest: str | None) -> bytes:
    if (record is None) == (digest is None):
        raise click.UsageError("give exactly one of --record FILE or --digest HEX")
    if digest is not None:
        try:
            value = bytes.fromhex(digest)
        except ValueError:
            raise click.BadParameter(f"{digest!r} is not hex", param_hint="--digest") from None
        if len(value) != HASH_SIZE:
            raise click.BadParameter(f"{len(value)} bytes, want {HASH_SIZE}", param_hint="--digest")
        return value
    assert record is not None
    data = record.read_bytes()
    if record.suffix == ".json":
        from ledger.core.errors import LedgerError
        from ledger.records.decision import DecisionRecord, record_digest

        try:
            return record_digest(DecisionRecord.from_json(data.decode()))
        except (LedgerError, UnicodeDecodeError) as exc:
            raise click.BadParameter(f"{record}: {exc}", param_hint="--record") from None
    return hashlib.sha256(data).digest()


@click.command()
@connection_options
@click.option(
    "--record",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="a decision record (.json: its RFC 8785 record digest; other files: SHA-256)",
)
@click.option("--digest", help="a record digest (64 hex digits)")
@click.option(
    "--proof-out", type=click.Path(dir_okay=False, path_type=Path), help="tlog-proof file"
)
@click.option("--leaf-out", type=click.Path(dir_okay=False, path_type=Path), help="raw leaf bytes")
def append(
    record: Path | None,
    digest: str | None,
    proof_out: Path | None,
    leaf_out: Path | None,
    **conn: Any,
) -> None:
    """Append one record digest, wait for its checkpoint, print (and save) its proof."""
    from ledger.core.errors import LedgerError
    from ledger_client.remote.log import RemoteLog

    value = _record_digest(record, digest)
    try:
        with RemoteLog(connection_from(**conn)) as log:
            (result,) = to_results(value, log.append_packed(value))
            bundle = retry(
                lambda: log.receipts([value], prefer_anchored=False),
                backoff=_CHECKPOINT_POLL,
                retry_on=lambda exc: isinstance(exc, OutOfRangeError),
                deadline=time.monotonic() + log.timeout,
            )
    except (LedgerError, DeadlinePassed) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    checkpoint, (included,) = bundle.checkpoint, bundle.proofs
    proof = TlogProof(index=result.index, proof=included.hashes, checkpoint_note=checkpoint.note)
    if proof_out is not None:
        proof_out.write_text(proof.to_text())
    if leaf_out is not None:
        leaf_out.write_bytes(included.entry.leaf)
    summary = {
        "record_digest": value.hex(),
        "index": result.index,
        "duplicate": result.duplicate,
        "leaf_hash": result.leaf_hash.hex(),
        "timestamp_ms": result.timestamp_ms,
        "tree_size": checkpoint.size,
        "root_hash": checkpoint.root_hash.hex(),
    }
    click.echo(json.dumps(summary, indent=2))
