"""Agent signatures and agent chains: who wrote a record, and which runs an agent opened.

Pure (standard library and ``cryptography`` through ``ledger.core.note``), no I/O.
docs/formats.md "Agent signatures" and "Agent chains".

* Signature: Ed25519 over ``AGENT_RECORD_CONTEXT`` followed by the RFC 8785 bytes of the
  record's JSON object *without* its ``signature`` member (schema v3). The key is a C2SP
  signed-note key (the log's key-file format): ``signature.key`` is its name and
  ``signature.key_id`` its 4-byte key ID. The signature is inside the logged record, so the
  record digest (and the leaf time) covers it and every record verifies on its own.
* Chain: runs of one agent key form chains; a chain has a random 16-byte id and its runs are
  numbered 0, 1, 2, ... (``ChainLink.seq``) in the order the SDK opened them. The agent's
  *chain key* ``KA = HMAC-SHA256(seed, "decision-ledger/chain-key/v1")`` (given to auditors;
  it cannot sign) derives a key per chain ``KC = HMAC-SHA256(KA, "chain " || id)`` and a tag
  per run ``tag(seq) = HMAC-SHA256(KC, "open " || u64 seq)[:16]``.
* Beacons: digests the SDK logs beside a run's records, findable by whoever holds ``KA``:
  an *open beacon* ``tag(seq) || record_digest(run's first record)[:16]`` per run, and a
  *genesis beacon* ``HMAC-SHA256(KA, "genesis")[:16] || id`` per chain. Two open beacons with
  one tag are two runs opened with one sequence number (a fork).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import fields, replace

from ledger.core.jcs import canonical_plain
from ledger.core.note import Ed25519Signer, Ed25519Verifier
from ledger.records.decision import AgentSignature, DecisionRecord, record_digest

__all__ = [
    "AGENT_RECORD_CONTEXT",
    "BEACON_HALF",
    "RecordSigner",
    "agent_chain_key",
    "chain_key",
    "genesis_beacon",
    "genesis_prefix",
    "open_beacon",
    "open_tag",
    "sign_record",
    "signature_key",
    "signing_bytes",
    "verify_record_signature",
]

AGENT_RECORD_CONTEXT = b"decision-ledger/agent-record/v1\n"
_CHAIN_KEY_LABEL = b"decision-ledger/chain-key/v1"
BEACON_HALF = 16


def signing_bytes(record: DecisionRecord) -> bytes:
    """What the agent signs: the context string, then the record's RFC 8785 bytes without its
    ``signature`` member."""
    obj = record.to_json_obj()
    obj.pop("signature", None)
    return AGENT_RECORD_CONTEXT + canonical_plain(obj)


class RecordSigner:
    """An agent key ready to sign many records: the expanded Ed25519 key is kept (building it
    from the seed costs as much as a signature), and so are its name and key ID."""

    __slots__ = ("_sign", "key_id", "name")

    def __init__(self, signer: Ed25519Signer) -> None:
        self._sign = signer.prepared()
        self.name = signer.name
        self.key_id = signer.key_id.hex()

    def sign(self, record: DecisionRecord) -> DecisionRecord:
        """``record`` with this key's signature (a previous one is replaced)."""
        unsigned = replace(record, signature=None) if record.signature is not None else record
        sig = base64.b64encode(self._sign(signing_bytes(unsigned))).decode("ascii")
        signature = AgentSignature(key=self.name, key_id=self.key_id, sig=sig)
        return _with_signature(unsigned, signature)


def _with_signature(record: DecisionRecord, signature: AgentSignature) -> DecisionRecord:
    """A copy of the (validated) record with a signature this module built (valid by
    construction), without validating the whole record a second time."""
    copy = object.__new__(DecisionRecord)
    for f in fields(DecisionRecord):
        object.__setattr__(copy, f.name, getattr(record, f.name))
    object.__setattr__(copy, "signature", signature)
    return copy


def sign_record(record: DecisionRecord, signer: Ed25519Signer | RecordSigner) -> DecisionRecord:
    """``record`` with ``signer``'s signature (a previous one is replaced)."""
    ready = signer if isinstance(signer, RecordSigner) else RecordSigner(signer)
    return ready.sign(record)


def signature_key(record: DecisionRecord, keys: Sequence[Ed25519Verifier]) -> str | None:
    """The ``key_string`` of the key in ``keys`` whose valid signature the record carries."""
    problem, key = verify_record_signature(record, keys)
    return key if problem is None else None


def verify_record_signature(
    record: DecisionRecord, keys: Sequence[Ed25519Verifier]
) -> tuple[str | None, str | None]:
    """(problem, signing key string): the problem is None when the record carries a valid
    signature by one of ``keys``; else it says what is wrong (unsigned, unknown key, bad)."""
    signature = record.signature
    if signature is None:
        return "unsigned", None
    known = [k for k in keys if k.name == signature.key and k.key_id.hex() == signature.key_id]
    if not known:
        return f"signed by {signature.key}+{signature.key_id}, not a trusted agent key", None
    try:
        sig = base64.b64decode(signature.sig, validate=True)
    except binascii.Error:
        return "signature is not base64", None
    message = signing_bytes(record)
    for key in known:
        if key.verify(message, sig):
            return None, key.key_string()
    return f"bad signature by {signature.key}+{signature.key_id}", None


# --- chains -------------------------------------------------------------------------------------


def _mac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def agent_chain_key(signer: Ed25519Signer) -> bytes:
    """The agent's chain key ``KA`` (module docstring): finds its runs, cannot sign."""
    return _mac(signer.seed, _CHAIN_KEY_LABEL)


def chain_key(agent_key: bytes, chain_id: str) -> bytes:
    """The key of one chain, ``KC = HMAC(KA, "chain " || id)``."""
    return _mac(agent_key, b"chain " + bytes.fromhex(chain_id))


def open_tag(key_of_chain: bytes, seq: int) -> bytes:
    """The 16-byte tag of run ``seq`` of a chain (``ChainLink.tag``)."""
    return _mac(key_of_chain, b"open " + seq.to_bytes(8, "big"))[:BEACON_HALF]


def open_beacon(tag: bytes, first_record: DecisionRecord) -> bytes:
    """The digest logged for a run's opening: its tag, then half its first record's digest."""
    return tag + record_digest(first_record)[:BEACON_HALF]


def genesis_prefix(agent_key: bytes) -> bytes:
    """The first half of every genesis beacon of one agent chain key."""
    return _mac(agent_key, b"genesis")[:BEACON_HALF]


def genesis_beacon(agent_key: bytes, chain_id: str) -> bytes:
    """The digest logged when a chain starts: the genesis prefix, then the chain id."""
    return genesis_prefix(agent_key) + bytes.fromhex(chain_id)
