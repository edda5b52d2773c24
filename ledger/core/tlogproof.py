"""Offline inclusion proofs in the c2sp.org/tlog-proof@v1 text format.

Pure (stdlib only, plus ``ledger.core.checkpoint`` for the embedded note). A proof file reads::

    c2sp.org/tlog-proof@v1
    extra <base64>            (optional; opaque, unauthenticated application data)
    index <n>                 (decimal, no leading zeros)
    <base64 hash>             (zero or more: the RFC 6962 inclusion proof, leaf sibling first)

    <the signed checkpoint note, verbatim>

Parsing checks the format only. Verifying the note (``checkpoint.open_checkpoint``) and the
inclusion proof against its root (``merkle``) is the caller's job; ``extra`` is never trusted.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

from ledger.core.checkpoint import Checkpoint, SignedNote, decode_b64
from ledger.core.errors import MalformedNoteError, MalformedProofFileError
from ledger.core.limits import HASH_SIZE

__all__ = ["HEADER", "MAX_PROOF_HASHES", "TlogProof"]

HEADER = "c2sp.org/tlog-proof@v1"
MAX_INDEX = 2**64 - 1
MAX_PROOF_HASHES = 64  # a tree of < 2^64 leaves has inclusion proofs of at most 64 hashes
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,19}")


def _check_note(note: str) -> None:
    """The embedded checkpoint must be a signed note whose text is a checkpoint."""
    try:
        Checkpoint.from_text(SignedNote.from_text(note).text)
    except MalformedNoteError as err:
        raise MalformedProofFileError(f"embedded checkpoint: {err}") from err


def _parse_index(line: str) -> int:
    value = line.removeprefix("index ")
    if value == line:
        raise MalformedProofFileError(
            f"expected 'index <n>' after the header and optional extra line, got {line[:40]!r}"
        )
    if not _DECIMAL.fullmatch(value) or int(value) > MAX_INDEX:
        raise MalformedProofFileError(
            f"index {value[:30]!r} is not a decimal in 0..2^64-1 without leading zeros"
        )
    return int(value)


def _parse_hash(line: str, number: int) -> bytes:
    raw = decode_b64(line)
    if raw is None or len(raw) != HASH_SIZE:
        raise MalformedProofFileError(
            f"proof line {number} ({line[:60]!r}) is not canonical base64 of a 32-byte hash"
        )
    return raw


@dataclass(frozen=True, slots=True, kw_only=True)
class TlogProof:
    """Entry ``index``, its inclusion ``proof`` and the signed ``checkpoint_note`` it is under."""

    index: int
    proof: tuple[bytes, ...]
    checkpoint_note: str
    extra: bytes | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.index <= MAX_INDEX:
            raise MalformedProofFileError(f"index {self.index} is outside 0..2^64-1")
        if len(self.proof) > MAX_PROOF_HASHES:
            raise MalformedProofFileError(
                f"{len(self.proof)} proof hashes; at most {MAX_PROOF_HASHES}"
            )
        for number, digest in enumerate(self.proof, 1):
            if len(digest) != HASH_SIZE:
                raise MalformedProofFileError(f"proof hash {number} is {len(digest)} bytes, not 32")
        if self.extra is not None and not self.extra:
            raise MalformedProofFileError("extra data is empty: use None to omit the extra line")
        _check_note(self.checkpoint_note)

    def to_text(self) -> str:
        """The proof file text (its last line is the note's last signature line)."""
        lines = [HEADER]
        if self.extra is not None:
            lines.append("extra " + base64.b64encode(self.extra).decode())
        lines.append(f"index {self.index}")
        lines.extend(base64.b64encode(digest).decode() for digest in self.proof)
        return "\n".join(lines) + "\n\n" + self.checkpoint_note

    @classmethod
    def from_text(cls, text: str) -> TlogProof:
        """Parse a proof file; raises MalformedProofFileError naming what is wrong."""
        head, blank, note = text.partition("\n\n")
        if not blank:
            raise MalformedProofFileError("no empty line between the proof and the checkpoint")
        lines = head.split("\n")
        if lines[0] != HEADER:
            raise MalformedProofFileError(f"first line must be {HEADER!r}, got {lines[0][:40]!r}")
        extra = None
        rest = lines[1:]
        if rest and rest[0].startswith("extra "):
            extra = decode_b64(rest.pop(0).removeprefix("extra "))
            if not extra:
                raise MalformedProofFileError("extra line is not non-empty canonical base64")
        if not rest:
            raise MalformedProofFileError("missing 'index <n>' line")
        index = _parse_index(rest[0])
        if len(rest) - 1 > MAX_PROOF_HASHES:
            raise MalformedProofFileError(f"{len(rest) - 1} proof hashes; at most 64")
        proof = tuple(_parse_hash(line, number) for number, line in enumerate(rest[1:], 1))
        return cls(index=index, proof=proof, checkpoint_note=note, extra=extra)

    @classmethod
    def from_bytes(cls, data: bytes) -> TlogProof:
        """Parse a proof file read as bytes (UTF-8)."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise MalformedProofFileError(f"proof file is not UTF-8 (byte {err.start})") from None
        return cls.from_text(text)
