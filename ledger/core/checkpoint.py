"""Checkpoints (c2sp.org/tlog-checkpoint) and witness cosignatures (c2sp.org/tlog-cosignature).

Pure (stdlib and ``cryptography`` only, no I/O). A checkpoint body is ``origin\nsize\n
base64(root)\n`` plus optional non-empty extension lines, carried in a C2SP signed note
(``ledger.core.note``, whose names are re-exported here). A witness (v1, Ed25519, type 0x04) signs
``cosignature/v1\ntime <t>\n`` + the checkpoint text; its line carries key ID || u64 t || sig.

``open_checkpoint`` is the verification entry point: unknown keys are ignored, a known key's bad
signature rejects the note, and the origin is compared only with the origin the caller expects
(never with a key name: sum.golang.org signs ``go.sum database tree``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from ledger.core.errors import (
    BoundsError,
    MalformedNoteError,
    OriginMismatchError,
    SignatureError,
    WitnessError,
)
from ledger.core.limits import HASH_SIZE
from ledger.core.note import (
    _DECIMAL,
    ALG_COSIGNATURE_V1,
    ALG_ED25519,
    MAX_SIGNATURES,
    Ed25519Signer,
    Ed25519Verifier,
    NoteSignature,
    SignedNote,
    Signer,
    Verifier,
    _b64,
    _check_chars,
    _ed25519_verify,
    _index_keys,
    _PrivateKey,
    _PublicKey,
    _verify_known,
    add_signatures,
    compute_key_id,
    decode_b64,
    sign_note,
    verify_signatures,
)

__all__ = [
    "ALG_COSIGNATURE_V1",
    "ALG_ED25519",
    "MAX_SIGNATURES",
    "Checkpoint",
    "Cosignature",
    "CosignatureSigner",
    "CosignatureVerifier",
    "Ed25519Signer",
    "Ed25519Verifier",
    "NoteSignature",
    "SignedNote",
    "Signer",
    "VerifiedCheckpoint",
    "Verifier",
    "add_signatures",
    "compute_key_id",
    "decode_b64",
    "open_checkpoint",
    "sign_checkpoint",
    "sign_note",
    "verify_signatures",
]

MAX_TREE_SIZE = 2**64 - 1
MAX_TIMESTAMP = 2**63 - 1


# --- checkpoint body ----------------------------------------------------------------------------


def _check_origin(origin: str) -> None:
    if not origin:
        raise MalformedNoteError("checkpoint origin line is empty")
    _check_chars(origin, "checkpoint origin")
    if origin != origin.strip() or any(c.isspace() and c != " " for c in origin):
        raise MalformedNoteError(
            f"checkpoint origin {origin!r} has leading/trailing whitespace or whitespace "
            "other than U+0020"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """A tlog-checkpoint note text: origin, tree size, root hash and extension lines."""

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_origin(self.origin)
        if not 0 <= self.size <= MAX_TREE_SIZE:
            raise MalformedNoteError(f"tree size {self.size} is outside 0..2^64-1")
        if len(self.root_hash) != HASH_SIZE:
            raise MalformedNoteError(f"root hash is {len(self.root_hash)} bytes, must be 32")
        for number, line in enumerate(self.extensions, 1):
            if not line or "\n" in line:
                raise MalformedNoteError(f"extension line {number} is empty or contains a newline")
            _check_chars(line, f"extension line {number}")

    def to_text(self) -> str:
        """The note text: every line, extensions included, ends in a newline."""
        lines = [self.origin, str(self.size), _b64(self.root_hash), *self.extensions]
        return "".join(line + "\n" for line in lines)

    def body_bytes(self) -> bytes:
        """UTF-8 of :meth:`to_text`: the bytes a log signs and an RFC 3161 anchor stamps."""
        return self.to_text().encode()

    @classmethod
    def from_text(cls, text: str) -> Checkpoint:
        """Parse a note text; raises MalformedNoteError naming what is wrong."""
        if not text.endswith("\n"):
            raise MalformedNoteError("checkpoint text does not end with a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3:
            raise MalformedNoteError(
                f"checkpoint has {len(lines)} line(s); origin, tree size and root hash are required"
            )
        origin, size_text, root_text, *extensions = lines
        if not _DECIMAL.fullmatch(size_text):
            raise MalformedNoteError(
                f"tree size {size_text[:30]!r} is not an ASCII decimal without leading zeros"
            )
        root = decode_b64(root_text)
        if root is None or len(root) != HASH_SIZE:
            raise MalformedNoteError(
                f"root hash {root_text[:60]!r} is not canonical base64 of 32 bytes"
            )
        return cls(origin=origin, size=int(size_text), root_hash=root, extensions=tuple(extensions))


# --- witness cosignatures (c2sp.org/tlog-cosignature) ---------------------------------------


def _cosigned_message(text: bytes, timestamp: int) -> bytes:
    return f"cosignature/v1\ntime {timestamp}\n".encode() + text


@dataclass(frozen=True, slots=True, kw_only=True)
class CosignatureVerifier(_PublicKey):
    """Verifies tlog-cosignature/v1 Ed25519 witness cosignatures (type 0x04)."""

    ALG: ClassVar[int] = ALG_COSIGNATURE_V1

    def verify(self, message: bytes, signature: bytes) -> bool:
        """``signature`` is u64 timestamp || Ed25519 over ``cosignature/v1`` + time + text."""
        if len(signature) != 72:
            return False
        timestamp = int.from_bytes(signature[:8], "big")
        if timestamp > MAX_TIMESTAMP:
            return False
        return _ed25519_verify(
            self.public_key, _cosigned_message(message, timestamp), signature[8:]
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CosignatureSigner(_PrivateKey):
    """A witness key producing tlog-cosignature/v1 Ed25519 cosignatures (type 0x04)."""

    ALG: ClassVar[int] = ALG_COSIGNATURE_V1

    def sign_at(self, message: bytes, timestamp: int) -> bytes:
        """u64 big-endian ``timestamp`` || Ed25519 of ``cosignature/v1``, time line, text."""
        if not 0 <= timestamp <= MAX_TIMESTAMP:
            raise BoundsError(f"cosignature timestamp {timestamp} is outside 0..2^63-1")
        signed = _cosigned_message(message, timestamp)
        return timestamp.to_bytes(8, "big") + self._private().sign(signed)

    def cosign(self, checkpoint: Checkpoint, timestamp: int) -> NoteSignature:
        """The cosignature line for ``checkpoint`` at ``timestamp`` (Unix seconds)."""
        signature = self.sign_at(checkpoint.body_bytes(), timestamp)
        return NoteSignature(name=self.name, key_id=self.key_id, signature=signature)

    def verifier(self) -> CosignatureVerifier:
        """The matching witness verifier."""
        return CosignatureVerifier(name=self.name, public_key=self.public_key)


# --- signing and opening checkpoints ----------------------------------------------------------


def sign_checkpoint(checkpoint: Checkpoint, signer: Signer) -> str:
    """The checkpoint as a note signed by the log's ``signer``."""
    return sign_note(checkpoint.to_text(), [signer])


@dataclass(frozen=True, slots=True, kw_only=True)
class Cosignature:
    """A valid witness cosignature: who, and the time it states (Unix seconds)."""

    name: str
    key_id: bytes
    timestamp: int


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifiedCheckpoint:
    """A checkpoint whose note passed :func:`open_checkpoint`, and who vouched for it."""

    checkpoint: Checkpoint
    note: SignedNote
    log_signatures: tuple[NoteSignature, ...]
    cosignatures: tuple[Cosignature, ...]


def _witness_quorum(
    lines: list[NoteSignature], min_witnesses: int, now: int | None
) -> tuple[Cosignature, ...]:
    """One cosignature per witness, dropping timestamps after ``now``; enforce the minimum."""
    counted: dict[tuple[str, bytes], Cosignature] = {}
    future = 0
    for sig in lines:
        stamp = int.from_bytes(sig.signature[:8], "big")
        if now is not None and stamp > now:
            future += 1
            continue
        counted.setdefault(
            (sig.name, sig.key_id), Cosignature(name=sig.name, key_id=sig.key_id, timestamp=stamp)
        )
    if len(counted) < min_witnesses:
        note = f"; {future} cosignature(s) dated after now={now} ignored" if future else ""
        raise WitnessError(
            f"{len(counted)} trusted witness(es) cosigned validly, {min_witnesses} required{note}"
        )
    return tuple(counted.values())


def open_checkpoint(
    note: str | bytes,
    verifiers: Sequence[Verifier],
    *,
    origin: str | None = None,
    witnesses: Sequence[Verifier] = (),
    min_witnesses: int = 0,
    now: int | None = None,
) -> VerifiedCheckpoint:
    """Parse and verify a signed checkpoint note.

    Requires at least one valid signature by a log key in ``verifiers``; every line whose
    (name, key ID) matches a given log key or witness must verify (else SignatureError);
    other lines are ignored. ``origin``, when given, must equal the checkpoint's origin
    (OriginMismatchError). At least ``min_witnesses`` distinct ``witnesses`` (cosignature
    verifiers) must have cosigned, not later than ``now`` when given (WitnessError).
    """
    signed = SignedNote.from_bytes(note) if isinstance(note, bytes) else SignedNote.from_text(note)
    checkpoint = Checkpoint.from_text(signed.text)
    logs, wits = _index_keys(verifiers, witnesses)
    log_sigs = _verify_known(signed, logs)
    cosig_lines = _verify_known(signed, wits)
    if not log_sigs:
        names = ", ".join(sorted(f"{n}+{i.hex()}" for n, i in logs)) or "none given"
        raise SignatureError(f"no signature by a trusted log key ({names})")
    if origin is not None and checkpoint.origin != origin:
        raise OriginMismatchError(
            f"checkpoint origin {checkpoint.origin!r} is not the expected {origin!r}"
        )
    cosignatures = _witness_quorum(cosig_lines, min_witnesses, now)
    return VerifiedCheckpoint(
        checkpoint=checkpoint,
        note=signed,
        log_signatures=tuple(log_sigs),
        cosignatures=cosignatures,
    )
