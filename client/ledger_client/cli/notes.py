"""``ledger-verify checkpoint`` and ``tlog-proof``: C2SP signed notes, offline.

* ``checkpoint``: a c2sp.org/tlog-checkpoint note (c2sp.org/signed-note), verified with
  ``checkpoint.open_checkpoint``: at least one ``--key`` signed it, no line of a given key (log or
  witness) fails, other keys' lines are ignored, the origin is the ``--origin`` when given, and at
  least ``--min-witnesses`` of the ``--witness`` keys (c2sp.org/tlog-cosignature, type 0x04)
  cosigned.
* ``tlog-proof``: a c2sp.org/tlog-proof@v1 file: its checkpoint note as above, then the RFC 9162
  §2.1.3 inclusion of the leaf at the file's index in the checkpoint's tree.

Witness policy: ``--min-witnesses`` defaults to 1 when any ``--witness`` is given (0 otherwise)
and may not exceed the number of witnesses given (a usage error, exit 2). Cosignature times are
reported, not compared with the local clock.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import click

from ledger.core import merkle
from ledger.core.checkpoint import (
    Checkpoint,
    VerifiedCheckpoint,
    open_checkpoint,
)
from ledger.core.timefmt import rfc3339
from ledger.core.tlogproof import TlogProof
from ledger_client.cli.options import MAX_INPUT_BYTES, read_input
from ledger_client.clikit.keys import log_verifiers, witness_options, witness_policy
from ledger_client.clikit.outcome import HASH_HELP, Outcome, finish, json_option, parse_hash

__all__ = [
    "MAX_INPUT_BYTES",
    "checkpoint",
    "describe_body",
    "describe_checkpoint",
    "iso_utc",
    "read_input",
    "tlog_proof",
]

_KEY_HELP = "log verifier key name+hexid+base64 (type 0x01); repeat for several"
_ORIGIN_HELP = "expected checkpoint origin (compared with the origin line, never a key name)"


def iso_utc(moment: datetime) -> str:
    """``2026-01-02T03:04:05Z`` (fractions kept when present)."""
    return rfc3339(moment)


def describe_body(checkpoint: Checkpoint) -> tuple[dict[str, Any], list[str]]:
    """JSON details and human lines for a checkpoint body: origin, size, root hash."""
    root = checkpoint.root_hash
    b64 = base64.b64encode(root).decode()
    details: dict[str, Any] = {
        "origin": checkpoint.origin,
        "size": checkpoint.size,
        "root_hash": b64,
        "root_hash_hex": root.hex(),
    }
    lines = [
        f"origin:      {checkpoint.origin}",
        f"size:        {checkpoint.size}",
        f"root hash:   {b64}",
        f"             {root.hex()} (hex)",
    ]
    if checkpoint.extensions:
        details["extensions"] = list(checkpoint.extensions)
        lines += [f"extension:   {line}" for line in checkpoint.extensions]
    return details, lines


def describe_checkpoint(verified: VerifiedCheckpoint) -> tuple[dict[str, Any], list[str]]:
    """JSON details and human lines for a verified checkpoint: body, signers, witnesses."""
    details, lines = describe_body(verified.checkpoint)
    signers = [f"{s.name}+{s.key_id.hex()}" for s in verified.log_signatures]
    cosigners = [
        {
            "witness": f"{c.name}+{c.key_id.hex()}",
            "time": c.timestamp,
            "time_utc": iso_utc(datetime.fromtimestamp(c.timestamp, UTC)),
        }
        for c in verified.cosignatures
    ]
    details |= {"signed_by": signers, "cosigned_by": cosigners}
    lines += [f"signed by:   {name}" for name in signers]
    lines += [f"cosigned by: {c['witness']} at {c['time_utc']} ({c['time']})" for c in cosigners]
    return details, lines


@click.command()
@click.argument("file", default="-", metavar="[FILE|-]")
@click.option("--key", "keys", multiple=True, required=True, metavar="VKEY", help=_KEY_HELP)
@click.option("--origin", metavar="ORIGIN", help=_ORIGIN_HELP)
@witness_options
@json_option
def checkpoint(
    file: str,
    keys: tuple[str, ...],
    origin: str | None,
    witnesses: tuple[str, ...],
    min_witnesses: int | None,
    as_json: bool,
) -> None:
    """Check a C2SP signed checkpoint note read from FILE (default: stdin)."""

    def run() -> Outcome:
        logs, (wits, required) = log_verifiers(keys), witness_policy(witnesses, min_witnesses)
        note = read_input(file, "checkpoint")
        verified = open_checkpoint(
            note, logs, origin=origin, witnesses=wits, min_witnesses=required
        )
        details, lines = describe_checkpoint(verified)
        return Outcome("checkpoint", details, lines)

    finish("checkpoint", as_json, run)


def _leaf_hash(leaf: str | None, leaf_hash: str | None) -> bytes:
    """The leaf hash from exactly one of --leaf (raw bytes, hashed) and --leaf-hash."""
    if leaf is not None and leaf_hash is None:
        return merkle.leaf_hash(read_input(leaf, "leaf"))
    if leaf_hash is not None and leaf is None:
        return parse_hash(leaf_hash, "--leaf-hash")
    raise click.BadParameter("give exactly one of --leaf FILE or --leaf-hash HASH")


@click.command("tlog-proof")
@click.argument("file", metavar="FILE|-")
@click.option("--key", "keys", multiple=True, required=True, metavar="VKEY", help=_KEY_HELP)
@click.option("--origin", metavar="ORIGIN", help=_ORIGIN_HELP)
@click.option(
    "--leaf", metavar="FILE", help="file holding the raw leaf bytes (hashed as RFC 6962 leaf)"
)
@click.option("--leaf-hash", metavar="HASH", help=f"the RFC 6962 leaf hash; {HASH_HELP}")
@witness_options
@json_option
def tlog_proof(
    file: str,
    keys: tuple[str, ...],
    origin: str | None,
    leaf: str | None,
    leaf_hash: str | None,
    witnesses: tuple[str, ...],
    min_witnesses: int | None,
    as_json: bool,
) -> None:
    """Check a c2sp.org/tlog-proof@v1 file: its checkpoint and the leaf's inclusion."""

    def run() -> Outcome:
        logs, (wits, required) = log_verifiers(keys), witness_policy(witnesses, min_witnesses)
        hashed = _leaf_hash(leaf, leaf_hash)
        proof = TlogProof.from_bytes(read_input(file, "proof file"))
        verified = open_checkpoint(
            proof.checkpoint_note, logs, origin=origin, witnesses=wits, min_witnesses=required
        )
        tree = verified.checkpoint
        merkle.verify_inclusion(hashed, proof.index, tree.size, proof.proof, tree.root_hash)
        details, lines = describe_checkpoint(verified)
        details |= {"index": proof.index, "leaf_hash": hashed.hex()}
        lines = [f"leaf {proof.index} of {tree.size}: {hashed.hex()}", *lines]
        if proof.extra is not None:  # opaque application data: shown, never trusted
            details["extra"] = base64.b64encode(proof.extra).decode()
            lines.append(f"extra (unauthenticated): {details['extra']}")
        return Outcome("tlog-proof", details, lines)

    finish("tlog-proof", as_json, run)
