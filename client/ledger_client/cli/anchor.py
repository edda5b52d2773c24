"""``ledger-verify anchor``: an RFC 3161 time-stamp token over a checkpoint body, offline.

The stamped imprint must be SHA-256 of the checkpoint *body* (origin, size and root lines,
C2SP tlog-checkpoint; ``timestamp.imprint_for_checkpoint_body``), never of the whole signed note,
so cosignatures added later do not change what was stamped. ``--checkpoint`` takes the signed
note or the bare body; with ``--key`` the note's signature is checked too (``open_checkpoint``).

``--token`` takes a TimeStampToken (RFC 3161 §2.4.2, CMS SignedData, RFC 5652) or a whole
TimeStampResp, as DER or as base64 text of either. ``timestamp.verify_token`` checks it against
the ``--tsa-root`` certificates; a failed check (``TimestampError.check``) is reported as
``failed_check`` beside ``error`` in the JSON object, still with exit code 1 (``clikit.outcome``).
A genTime after the current time plus the allowed skew fails ``anchor-in-future``
(``ledger.timestamp.policy``; with no leaf, there is no lower bound here).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import click
from asn1crypto import parser
from cryptography import x509

from ledger.core.checkpoint import Checkpoint, SignedNote, open_checkpoint
from ledger.core.errors import FormatError
from ledger.timestamp.policy import check_gen_time
from ledger.timestamp.rfc3161 import (
    VerifiedTimestamp,
    imprint_for_checkpoint_body,
    token_from_response,
    verify_token,
)
from ledger_client.cli.notes import (
    describe_body,
    describe_checkpoint,
    iso_utc,
    read_input,
)
from ledger_client.cli.options import load_certificates
from ledger_client.clikit.keys import log_verifiers
from ledger_client.clikit.outcome import Outcome, finish, json_option

__all__ = ["anchor", "load_token"]

_SEQUENCE_TAG = 16  # universal tag of SEQUENCE: a TimeStampResp starts with PKIStatusInfo
_WHITESPACE = re.compile(rb"\s+")


# --- inputs -----------------------------------------------------------------------------------


def _der_or_base64(data: bytes) -> bytes:
    if data[:1] == b"\x30":  # a DER SEQUENCE: ContentInfo or TimeStampResp
        return data
    try:
        return base64.b64decode(_WHITESPACE.sub(b"", data), validate=True)
    except (binascii.Error, ValueError):
        raise FormatError("token is neither DER nor base64 text of DER") from None


def _is_response(der: bytes) -> bool:
    """TimeStampResp opens with a SEQUENCE (PKIStatusInfo), a token with an OID (ContentInfo)."""
    try:
        contents = parser.parse(der, strict=True)[4]
        first_tag: int = parser.parse(contents)[2]
    except ValueError as exc:
        raise FormatError(f"token is not DER: {exc}") from None
    return first_tag == _SEQUENCE_TAG


def load_token(data: bytes) -> bytes:
    """The DER TimeStampToken in ``data``: a token or a granted response, DER or base64."""
    der = _der_or_base64(data)
    return token_from_response(der) if _is_response(der) else der


def _checkpoint(data: bytes, keys: Sequence[str]) -> tuple[Checkpoint, dict[str, Any], list[str]]:
    """The checkpoint and its description; its signature is checked only when keys are given."""
    if keys:
        verified = open_checkpoint(data, log_verifiers(keys))
        details, lines = describe_checkpoint(verified)
        return verified.checkpoint, details | {"signature_checked": True}, lines
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FormatError(f"checkpoint is not UTF-8 (byte {err.start})") from None
    body = SignedNote.from_text(text).text if "\n\n" in text else text
    checkpoint = Checkpoint.from_text(body)
    details, lines = describe_body(checkpoint)
    lines.append("signature:   not checked (give --key to check it)")
    return checkpoint, details | {"signature_checked": False}, lines


# --- output -----------------------------------------------------------------------------------


def _subject(der: bytes) -> str:
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def _describe_stamp(stamp: VerifiedTimestamp) -> tuple[dict[str, Any], list[str]]:
    accuracy = None if stamp.accuracy is None else stamp.accuracy.total_seconds()
    chain = [_subject(der) for der in stamp.chain_ders]
    details: dict[str, Any] = {
        "imprint": stamp.digest.hex(),
        "gen_time": iso_utc(stamp.gen_time),
        "accuracy_seconds": accuracy,
        "tsa_name": stamp.tsa_name,
        "signer_subject": stamp.signer_subject,
        "serial_number": str(stamp.serial_number),  # may exceed 2^53: a string in JSON
        "policy": stamp.policy,
        "nonce": None if stamp.nonce is None else str(stamp.nonce),
        "chain": chain,
    }
    lines = [
        f"imprint:     sha256 {stamp.digest.hex()} (checkpoint body)",
        f"gen time:    {details['gen_time']}"
        + ("" if accuracy is None else f" (accuracy {accuracy:g}s)"),
        f"TSA name:    {stamp.tsa_name or '(none in token)'}",
        f"signer:      {stamp.signer_subject}",
        f"serial:      {stamp.serial_number} (0x{stamp.serial_number:x})",
        f"policy:      {stamp.policy}",
        f"chain:       {' -> '.join(chain)}",
    ]
    return details, lines


# --- command ----------------------------------------------------------------------------------


@click.command()
@click.option(
    "--checkpoint",
    "checkpoint_file",
    required=True,
    metavar="FILE",
    help="signed note or bare body",
)
@click.option(
    "--token",
    "token_file",
    required=True,
    metavar="FILE",
    help="TimeStampToken/Resp, DER or base64",
)
@click.option(
    "--tsa-root", "roots", multiple=True, required=True, metavar="PEM", help="trusted TSA root PEM"
)
@click.option(
    "--tsa-intermediate", "intermediates", multiple=True, metavar="PEM", help="intermediate CA PEM"
)
@click.option(
    "--key", "keys", multiple=True, metavar="VKEY", help="also check the note's signature (VKEY)"
)
@json_option
def anchor(
    checkpoint_file: str,
    token_file: str,
    roots: tuple[str, ...],
    intermediates: tuple[str, ...],
    keys: tuple[str, ...],
    as_json: bool,
) -> None:
    """Check an RFC 3161 token stamping SHA-256 of a checkpoint body."""

    def run() -> Outcome:
        trusted = load_certificates(roots, "--tsa-root")
        extra = load_certificates(intermediates, "--tsa-intermediate")
        checkpoint, details, lines = _checkpoint(read_input(checkpoint_file, "checkpoint"), keys)
        token = load_token(read_input(token_file, "token"))
        digest = imprint_for_checkpoint_body(checkpoint.body_bytes())
        stamp = verify_token(token, digest=digest, roots=trusted, intermediates=extra)
        check_gen_time(stamp.gen_time, stamp.accuracy, now=datetime.now(UTC))
        stamp_details, stamp_lines = _describe_stamp(stamp)
        return Outcome("anchor", details | stamp_details, lines + stamp_lines)

    finish("anchor", as_json, run)
