"""The witness's decision (c2sp.org/tlog-witness ``add-checkpoint``), pure: no I/O, no clock.

A request body is an ``old <size>`` line, zero to 63 consistency-proof lines (standard base64
of 32-byte hashes), an empty line, then a signed checkpoint note (c2sp.org/tlog-checkpoint).
``decide`` takes the parsed request, what the witness holds for the log (the latest checkpoint
it cosigned, or nothing) and returns one ``Decision``; the caller persists ``Decision.record``
*before* it answers (``ledger.witness.state`` does, atomically with the check). Answers, in the
order the spec checks them:

    400  the body or the checkpoint does not parse; old size > checkpoint size; a non-empty
         proof with old size 0 or with old size == checkpoint size
    404  the checkpoint's origin is not a log this witness knows
    403  no signature by a trusted key of that log verifies (or a trusted key's line fails)
    409  old size != the size of the latest checkpoint cosigned for the origin; the body is
         that size in decimal and a newline, Content-Type ``text/x.tlog.size``
    409  old size == checkpoint size == the cosigned size, but the root differs (plain text)
    422  the RFC 9162 §2.1.4 consistency proof from the cosigned checkpoint does not verify
    200  cosignature lines (c2sp.org/tlog-cosignature, type 0x04, ``cosignature/v1``)

Evidence of misbehaviour (``Decision.evidence``) is produced for a correctly signed checkpoint
whose root differs from the one cosigned at its size (the second 409) or whose proof fails
(422), with both signed notes, so anyone can check it. An ordinary stale old size (the first
409) is not evidence: it is how a log learns the witness's size.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ledger.core import merkle
from ledger.core.checkpoint import (
    Checkpoint,
    CosignatureSigner,
    SignedNote,
    Verifier,
    decode_b64,
    open_checkpoint,
)
from ledger.core.errors import FormatError, LedgerError, SignatureError, VerificationError

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_PROOF_LINES",
    "SIZE_CONTENT_TYPE",
    "AddCheckpoint",
    "Decision",
    "Evidence",
    "LogRecord",
    "build_request",
    "decide",
    "parse_request",
]

MAX_BODY_BYTES = 16 * 1024
MAX_PROOF_LINES = 63
SIZE_CONTENT_TYPE = "text/x.tlog.size"
_OLD_LINE = re.compile(r"old (0|[1-9][0-9]{0,19})")


@dataclass(frozen=True, slots=True, kw_only=True)
class AddCheckpoint:
    """A parsed add-checkpoint request."""

    old_size: int
    proof: tuple[bytes, ...]
    note: str  # the signed checkpoint note, verbatim


@dataclass(frozen=True, slots=True, kw_only=True)
class LogRecord:
    """What the witness holds for one log: the latest checkpoint it cosigned (signed note)."""

    origin: str
    size: int
    root_hash: bytes
    note: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """Two signed checkpoints of one origin that cannot both be honest, and the proof given."""

    kind: str  # "same-size-different-root" or "inconsistent-proof"
    origin: str
    cosigned_note: str  # what the witness had cosigned
    submitted_note: str  # the correctly signed checkpoint that contradicts it
    old_size: int
    proof: tuple[bytes, ...]
    detail: str

    @property
    def key(self) -> str:
        """Deduplication key: the kind and the submitted checkpoint body (not the proof, which
        anyone can vary), so replaying one signed checkpoint never grows the evidence."""
        body = SignedNote.from_text(self.submitted_note).text
        return hashlib.sha256(f"{self.kind}\n{body}".encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What to answer: status, text body, content type; a new record to persist first."""

    status: int
    body: str
    content_type: str = "text/plain; charset=utf-8"
    record: LogRecord | None = None  # persist before answering (None: nothing changes)
    evidence: Evidence | None = None


def build_request(old_size: int, proof: Sequence[bytes], note: str) -> bytes:
    """The add-checkpoint body a log sends (inverse of ``parse_request``)."""
    lines = [f"old {old_size}", *(_b64(h) for h in proof)]
    return ("\n".join(lines) + "\n\n" + note).encode()


def _b64(raw: bytes) -> str:
    """Standard padded base64 of a hash."""
    return base64.b64encode(raw).decode()


def parse_request(body: bytes) -> AddCheckpoint:
    """Parse an add-checkpoint body; ``FormatError`` says what is wrong (answered 400)."""
    if len(body) > MAX_BODY_BYTES:
        raise FormatError(f"request body is {len(body)} bytes, at most {MAX_BODY_BYTES}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FormatError(f"request body is not UTF-8 (byte {err.start})") from None
    head, blank, note = text.partition("\n\n")
    if not blank:
        raise FormatError("no empty line separates the old size and proof from the checkpoint")
    lines = head.split("\n")
    match = _OLD_LINE.fullmatch(lines[0])
    if match is None:
        raise FormatError(f"first line {lines[0][:40]!r} is not 'old <decimal size>'")
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise FormatError(f"{len(lines) - 1} proof lines, at most {MAX_PROOF_LINES}")
    proof = []
    for number, line in enumerate(lines[1:], 1):
        raw = decode_b64(line)
        if raw is None or len(raw) != merkle.HASH_SIZE:
            raise FormatError(f"proof line {number} is not canonical base64 of 32 bytes")
        proof.append(raw)
    return AddCheckpoint(old_size=int(match.group(1)), proof=tuple(proof), note=note)


def _plain(status: int, message: str, evidence: Evidence | None = None) -> Decision:
    return Decision(status=status, body=message + "\n", evidence=evidence)


def _open(request: AddCheckpoint, logs: Mapping[str, Sequence[Verifier]]) -> Checkpoint | Decision:
    """The checkpoint, verified by the log's keys; or the 400/404/403 decision."""
    try:
        checkpoint = Checkpoint.from_text(SignedNote.from_text(request.note).text)
    except FormatError as exc:
        return _plain(400, f"checkpoint: {exc}")
    keys = logs.get(checkpoint.origin)
    if keys is None:
        return _plain(404, f"unknown log origin {checkpoint.origin!r}")
    try:
        open_checkpoint(request.note, keys, origin=checkpoint.origin)
    except SignatureError as exc:
        return _plain(403, f"checkpoint signature: {exc}")
    except LedgerError as exc:
        return _plain(400, f"checkpoint: {exc}")
    return checkpoint


def decide(
    request: AddCheckpoint,
    *,
    logs: Mapping[str, Sequence[Verifier]],
    held: Mapping[str, LogRecord],
    signer: CosignatureSigner,
    now: int,
) -> Decision:
    """The witness's answer to ``request`` given what it ``held`` (see the module docstring).

    ``logs`` maps each known origin to its verifier keys; ``now`` is the cosignature time in
    Unix seconds.
    """
    opened = _open(request, logs)
    if isinstance(opened, Decision):
        return opened
    checkpoint, old = opened, request.old_size
    if checkpoint.size == 0 and checkpoint.root_hash != merkle.EMPTY_ROOT:
        return _plain(422, "a checkpoint of size 0 must carry the empty-tree root")
    if old > checkpoint.size:
        return _plain(400, f"old size {old} > checkpoint size {checkpoint.size}")
    if request.proof and old in (0, checkpoint.size):
        return _plain(400, f"old size {old} needs an empty consistency proof")
    record = held.get(checkpoint.origin)
    known = 0 if record is None else record.size
    if old != known:
        return Decision(status=409, body=f"{known}\n", content_type=SIZE_CONTENT_TYPE)
    new = LogRecord(
        origin=checkpoint.origin,
        size=checkpoint.size,
        root_hash=checkpoint.root_hash,
        note=request.note,
    )
    if record is not None:
        refusal = _check_extension(request, record, checkpoint)
        if refusal is not None:
            return refusal
        if checkpoint.size == record.size:
            new = record  # the same checkpoint again: cosign, keep the first note
    cosignature = signer.cosign(checkpoint, now)
    return Decision(
        status=200,
        body=cosignature.to_line() + "\n",
        record=None if new is record else new,
    )


def _check_extension(
    request: AddCheckpoint, record: LogRecord, checkpoint: Checkpoint
) -> Decision | None:
    """None when ``checkpoint`` provably extends ``record``; else the 409/422 with evidence."""
    if checkpoint.size == record.size:
        if checkpoint.root_hash == record.root_hash:
            return None
        detail = f"root at size {record.size} differs from the root this witness cosigned"
        found = _evidence("same-size-different-root", request, record, detail)
        return _plain(409, detail, evidence=found)
    if record.size == 0:
        return None  # every tree extends the empty tree: nothing to prove (empty proof)
    try:
        merkle.verify_consistency(
            record.size, checkpoint.size, record.root_hash, checkpoint.root_hash, request.proof
        )
    except VerificationError as exc:
        detail = f"consistency proof {record.size} -> {checkpoint.size} fails: {exc}"
        found = _evidence("inconsistent-proof", request, record, detail)
        return _plain(422, detail, evidence=found)
    return None


def _evidence(kind: str, request: AddCheckpoint, record: LogRecord, detail: str) -> Evidence:
    return Evidence(
        kind=kind,
        origin=record.origin,
        cosigned_note=record.note,
        submitted_note=request.note,
        old_size=request.old_size,
        proof=request.proof,
        detail=detail,
    )
