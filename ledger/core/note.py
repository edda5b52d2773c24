"""C2SP signed notes (c2sp.org/signed-note): parse and print notes, Ed25519 keys, sign, verify.

Pure (stdlib and ``cryptography`` only, no I/O). A note is a text ending in a newline, one blank
line, then one or more lines ``— <key name> base64(4-byte key ID || signature)``. Ed25519 keys
(type 0x01) have key ID ``SHA-256(name || 0x0A || type || public key)[:4]`` and the key strings
``name+hexid+base64(type || key)`` (verifier) and ``PRIVATE+KEY+name+hexid+...`` (signer).
Verifiers ignore lines by unknown keys; a known key's failing line rejects the note.
Checkpoints and witness cosignatures, built on this, are in ``ledger.core.checkpoint``.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol, Self

from ledger.core.errors import MalformedKeyError, MalformedNoteError, SignatureError

if TYPE_CHECKING:  # ``cryptography`` is loaded when a key signs or verifies, not to parse one
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

__all__ = [
    "ALG_COSIGNATURE_V1",
    "ALG_ED25519",
    "MAX_SIGNATURES",
    "Ed25519Signer",
    "Ed25519Verifier",
    "NoteSignature",
    "SignedNote",
    "Signer",
    "Verifier",
    "add_signatures",
    "compute_key_id",
    "decode_b64",
    "sign_note",
    "verify_signatures",
]

ED25519_KEY_SIZE = 32  # an Ed25519 public key or seed (RFC 8032 §5.1.5)


ALG_ED25519 = 0x01
ALG_COSIGNATURE_V1 = 0x04
MAX_SIGNATURES = 100  # the spec requires accepting at least 16


_ALG_NAMES = {ALG_ED25519: "Ed25519", ALG_COSIGNATURE_V1: "Ed25519 cosignature/v1"}
_DASH = "\u2014 "
_PRIVATE = "PRIVATE+KEY+"
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,19}")
_HEX_ID = re.compile(r"[0-9a-fA-F]{8}")
_BAD_CHAR = re.compile("[\x00-\x09\x0b-\x1f\ud800-\udfff]")  # controls but \n; lone surrogates


def decode_b64(text: str) -> bytes | None:
    """Decode canonical standard base64 (RFC 4648 §4, padded); None if ``text`` is not that."""
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        return None
    return raw if base64.b64encode(raw).decode() == text else None


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _check_chars(text: str, what: str) -> None:
    """Reject ASCII control characters other than newline, and lone surrogates (not UTF-8)."""
    bad = _BAD_CHAR.search(text)
    if bad:
        raise MalformedNoteError(
            f"{what} contains U+{ord(bad.group()):04X} at offset {bad.start()}: signed notes "
            "allow no control characters other than newline"
        )


def _is_valid_name(name: str) -> bool:
    """A key name is non-empty, without Unicode spaces, '+' or control characters."""
    return (
        bool(name)
        and "+" not in name
        and not _BAD_CHAR.search(name)
        and not any(c.isspace() for c in name)
    )


# --- signed notes -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class NoteSignature:
    """One signature line: key name, 4-byte key ID and the signature bytes after the ID."""

    name: str
    key_id: bytes
    signature: bytes

    def __post_init__(self) -> None:
        if not _is_valid_name(self.name):
            raise MalformedNoteError(
                f"key name {self.name!r} is empty or contains spaces, '+' or control characters"
            )
        if len(self.key_id) != 4:
            raise MalformedNoteError(f"key ID is {len(self.key_id)} bytes, must be 4")
        if not self.signature:
            raise MalformedNoteError(
                f"signature by {self.name} is empty: key ID and signature need 5+ bytes"
            )

    def to_line(self) -> str:
        """``— <name> <base64(key ID || signature)>`` without the final newline."""
        return f"{_DASH}{self.name} {_b64(self.key_id + self.signature)}"

    @classmethod
    def from_line(cls, line: str) -> NoteSignature:
        """Parse one signature line given without its final newline."""
        if not line.startswith(_DASH):
            raise MalformedNoteError(f"signature line {line[:40]!r} does not start with '— '")
        name, space, encoded = line[len(_DASH) :].partition(" ")
        if not space:
            raise MalformedNoteError(f"signature line {line[:40]!r} has no space after the name")
        raw = decode_b64(encoded)
        if raw is None:
            raise MalformedNoteError(f"signature by {name!r} is not canonical standard base64")
        if len(raw) < 5:
            raise MalformedNoteError(
                f"signature by {name!r} decodes to {len(raw)} bytes; key ID and signature need 5+"
            )
        return cls(name=name, key_id=raw[:4], signature=raw[4:])


def _check_note_text(text: str) -> None:
    if not text.endswith("\n"):
        raise MalformedNoteError("note text does not end with a newline")
    _check_chars(text, "note text")


@dataclass(frozen=True, slots=True, kw_only=True)
class SignedNote:
    """A note text (ending in a newline) and its 1..MAX_SIGNATURES signature lines."""

    text: str
    signatures: tuple[NoteSignature, ...]

    def __post_init__(self) -> None:
        _check_note_text(self.text)
        if not 1 <= len(self.signatures) <= MAX_SIGNATURES:
            raise MalformedNoteError(
                f"note has {len(self.signatures)} signature lines; 1..{MAX_SIGNATURES} accepted"
            )

    def to_text(self) -> str:
        """Text, a blank line, then each signature line followed by a newline."""
        return self.text + "\n" + "".join(sig.to_line() + "\n" for sig in self.signatures)

    @classmethod
    def from_text(cls, note: str) -> SignedNote:
        """Parse a signed note; the text ends at the last blank line."""
        _check_chars(note, "signed note")
        split = note.rfind("\n\n")
        if split < 0:
            raise MalformedNoteError("no blank line separates the note text from its signatures")
        text, block = note[: split + 1], note[split + 2 :]
        if not block:
            raise MalformedNoteError("no signature lines follow the blank line")
        if not block.endswith("\n"):
            raise MalformedNoteError("the last signature line does not end with a newline")
        lines = block[:-1].split("\n")
        if len(lines) > MAX_SIGNATURES:
            raise MalformedNoteError(f"{len(lines)} signature lines; at most {MAX_SIGNATURES}")
        return cls(text=text, signatures=tuple(NoteSignature.from_line(ln) for ln in lines))

    @classmethod
    def from_bytes(cls, data: bytes) -> SignedNote:
        """Parse UTF-8 bytes (as read from a file or the network)."""
        try:
            note = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise MalformedNoteError(f"signed note is not UTF-8 (byte {err.start})") from None
        return cls.from_text(note)


# --- keys ---------------------------------------------------------------------------------------


def compute_key_id(name: str, sig_type: int, public_key: bytes) -> bytes:
    """Key ID = SHA-256(name || 0x0A || signature type byte || public key)[:4]."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([sig_type]) + public_key).digest()[:4]


class Verifier(Protocol):
    """Checks signatures by one key, identified in signature lines by (name, key_id)."""

    @property
    def name(self) -> str: ...
    @property
    def key_id(self) -> bytes: ...
    def verify(self, message: bytes, signature: bytes) -> bool: ...


class Signer(Protocol):
    """Signs note texts with one key; ``sign`` returns the bytes after the key ID."""

    @property
    def name(self) -> str: ...
    @property
    def key_id(self) -> bytes: ...
    def sign(self, message: bytes) -> bytes: ...


def _parse_key(text: str, alg: int) -> tuple[str, bytes, bytes]:
    """Split ``name+hexid+base64(alg || 32-byte key)`` into (name, stated ID, key)."""
    parts = text.split("+", 2)
    if len(parts) != 3:
        raise MalformedKeyError("key string must have the form name+hexid+base64key")
    name, id_hex, encoded = parts
    if not _is_valid_name(name):
        raise MalformedKeyError(f"key name {name!r} is empty or contains spaces or '+'")
    if not _HEX_ID.fullmatch(id_hex):
        raise MalformedKeyError(f"key ID {id_hex!r} of {name} is not 8 hex digits")
    raw = decode_b64(encoded)
    if not raw:
        raise MalformedKeyError(f"key material of {name} is empty or not canonical base64")
    if raw[0] != alg:
        raise MalformedKeyError(
            f"unsupported signature type 0x{raw[0]:02x} for key {name}: "
            f"only {_ALG_NAMES[alg]} (0x{alg:02x}) is supported here"
        )
    if len(raw) != 33:
        raise MalformedKeyError(f"key of {name} is {len(raw) - 1} bytes, Ed25519 needs 32")
    return name, bytes.fromhex(id_hex), raw[1:]


def _check_id(name: str, stated: bytes, computed: bytes) -> None:
    if stated != computed:
        raise MalformedKeyError(
            f"key ID mismatch for {name}: the key string says {stated.hex()}, "
            f"the key hashes to {computed.hex()}"
        )


def _ed25519_verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    if len(signature) != 64:
        return False
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except InvalidSignature:
        return False
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class _PublicKey:
    """An Ed25519 public key under a name; ``ALG`` is the signature type byte."""

    ALG: ClassVar[int] = ALG_ED25519
    name: str
    public_key: bytes

    def __post_init__(self) -> None:
        if not _is_valid_name(self.name) or len(self.public_key) != ED25519_KEY_SIZE:
            raise MalformedKeyError(f"bad key name {self.name!r} or public key length")

    @property
    def key_id(self) -> bytes:
        """The 4-byte key ID for this name, type and key."""
        return compute_key_id(self.name, self.ALG, self.public_key)

    @classmethod
    def from_key_string(cls, text: str) -> Self:
        """Parse ``name+hexid+base64(type || key)``, checking the type byte and the ID."""
        name, stated, key = _parse_key(text.strip(), cls.ALG)
        _check_id(name, stated, compute_key_id(name, cls.ALG, key))
        return cls(name=name, public_key=key)

    def key_string(self) -> str:
        """``name+hexid+base64(type || key)``."""
        return f"{self.name}+{self.key_id.hex()}+{_b64(bytes([self.ALG]) + self.public_key)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Ed25519Verifier(_PublicKey):
    """Verifies plain Ed25519 note signatures (type 0x01) over the note text."""

    def verify(self, message: bytes, signature: bytes) -> bool:
        """True when ``signature`` is this key's Ed25519 signature of ``message``."""
        return _ed25519_verify(self.public_key, message, signature)


@dataclass(frozen=True, slots=True, kw_only=True)
class _PrivateKey:
    """An Ed25519 seed under a name; never printed."""

    ALG: ClassVar[int] = ALG_ED25519
    name: str
    seed: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not _is_valid_name(self.name) or len(self.seed) != ED25519_KEY_SIZE:
            raise MalformedKeyError(f"bad key name {self.name!r} or seed length")

    @property
    def public_key(self) -> bytes:
        """The 32-byte Ed25519 public key."""
        return self._private().public_key().public_bytes_raw()

    @property
    def key_id(self) -> bytes:
        """The 4-byte key ID for this name, type and public key."""
        return compute_key_id(self.name, self.ALG, self.public_key)

    @classmethod
    def generate(cls, name: str) -> Self:
        """A fresh random key named ``name``."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        return cls(name=name, seed=Ed25519PrivateKey.generate().private_bytes_raw())

    @classmethod
    def from_key_string(cls, text: str) -> Self:
        """Parse ``PRIVATE+KEY+name+hexid+base64(type || seed)``; the ID must match."""
        if not text.startswith(_PRIVATE):
            raise MalformedKeyError("signer key string must start with PRIVATE+KEY+")
        name, stated, seed = _parse_key(text[len(_PRIVATE) :].strip(), cls.ALG)
        signer = cls(name=name, seed=seed)
        _check_id(name, stated, signer.key_id)
        return signer

    def key_string(self) -> str:
        """``PRIVATE+KEY+name+hexid+base64(type || seed)``: a secret."""
        return f"{_PRIVATE}{self.name}+{self.key_id.hex()}+{_b64(bytes([self.ALG]) + self.seed)}"

    def _private(self) -> Ed25519PrivateKey:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        return Ed25519PrivateKey.from_private_bytes(self.seed)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ed25519Signer(_PrivateKey):
    """Signs note texts with plain Ed25519 (type 0x01)."""

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message``."""
        return self._private().sign(message)

    def verifier(self) -> Ed25519Verifier:
        """The matching verifier."""
        return Ed25519Verifier(name=self.name, public_key=self.public_key)

    def prepared(self) -> Callable[[bytes], bytes]:
        """``sign`` with the expanded key kept: for signing many messages (building the key
        from the seed costs about as much as a signature)."""
        return self._private().sign


# --- signing and verifying ---------------------------------------------------------------


def sign_note(text: str, signers: Sequence[Signer]) -> str:
    """The signed note: ``text`` (ending in a newline) signed by every signer, in order."""
    _check_note_text(text)
    message = text.encode()
    signatures = tuple(
        NoteSignature(name=s.name, key_id=s.key_id, signature=s.sign(message)) for s in signers
    )
    return SignedNote(text=text, signatures=signatures).to_text()


def add_signatures(note_text: str, signatures: Iterable[NoteSignature]) -> str:
    """Append signature lines (e.g. cosignatures); a line by the same key is replaced."""
    note = SignedNote.from_text(note_text)
    added = tuple(signatures)
    replaced = {(s.name, s.key_id) for s in added}
    kept = tuple(s for s in note.signatures if (s.name, s.key_id) not in replaced)
    return SignedNote(text=note.text, signatures=kept + added).to_text()


_Known = Mapping[tuple[str, bytes], Verifier]


def _index_keys(
    verifiers: Sequence[Verifier], witnesses: Sequence[Verifier]
) -> tuple[_Known, _Known]:
    """Map (name, key ID) to verifier for logs and witnesses; a key may appear only once."""
    logs: dict[tuple[str, bytes], Verifier] = {}
    wits: dict[tuple[str, bytes], Verifier] = {}
    for table, other, keys in ((logs, wits, verifiers), (wits, logs, witnesses)):
        for key in keys:
            ref = (key.name, key.key_id)
            if ref in other or table.get(ref, key) != key:
                raise MalformedKeyError(f"ambiguous key {key.name}+{key.key_id.hex()} given twice")
            table[ref] = key
    return logs, wits


def _verify_known(note: SignedNote, known: _Known) -> list[NoteSignature]:
    """Every line by a known key must verify; lines by unknown keys are skipped."""
    message = note.text.encode()
    valid = []
    for sig in note.signatures:
        key = known.get((sig.name, sig.key_id))
        if key is None:
            continue
        if not key.verify(message, sig.signature):
            raise SignatureError(f"invalid signature by known key {sig.name}+{sig.key_id.hex()}")
        valid.append(sig)
    return valid


def verify_signatures(note: SignedNote, verifiers: Sequence[Verifier]) -> tuple[NoteSignature, ...]:
    """The lines by ``verifiers`` (all must verify: else SignatureError); others are ignored."""
    return tuple(_verify_known(note, _index_keys(verifiers, ())[0]))
