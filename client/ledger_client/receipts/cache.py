"""The one verification cache of the offline verifier: verdicts keyed by bytes and trust inputs.

Pure: no grpc, no rocksdict, no I/O. ``ledger-verify receipt``, ``run``, ``lineage``,
``report`` and ``index`` verify the same few checkpoint notes, anchor tokens and consistency
proofs for many receipts; each distinct one is verified once per ``VerificationCache``.

A verdict is stored under the exact bytes verified and every trust input it was verified
under, and reused only under both:

* the bytes: the checkpoint note text; the token DER, the message imprint it must carry and
  the DER of every certificate the receipt's anchor carries (a helper for chain building: the
  same token with other certificates is another verification); the consistency proof's sizes,
  roots and hashes;
* the trust inputs (``TrustInputs``): log keys, expected origin, witness keys and quorum, TSA
  roots and the anchor time policy's skew. Two checkers with different trust inputs share a
  cache object but never a verdict.

A verdict is a value or the error it raised. One that depends on the current time (the anchor
time policy's ``anchor-in-future``, ``ledger.timestamp.policy.future_bound``) is stored with
the interval of verification times in which it holds and reused only for a ``now`` inside it;
every other verdict holds at all times. Not thread-safe; one per process (the index builds one
per worker).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar, cast

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from ledger.core.checkpoint import Verifier
from ledger.timestamp.policy import DEFAULT_SKEW

__all__ = ["ALWAYS", "Interval", "TrustInputs", "VerificationCache"]

T = TypeVar("T")


def _key_identity(verifier: Verifier) -> bytes:
    """What identifies a key: its type, name, key ID and public key (when it shows one)."""
    public = getattr(verifier, "public_key", None)
    if not isinstance(public, bytes):  # an unknown verifier type: only this very object
        public = b"object:%d" % id(verifier)
    kind = type(verifier).__qualname__.encode()
    return b"\0".join((kind, verifier.name.encode(), verifier.key_id, public))


@dataclass(frozen=True, slots=True)
class TrustInputs:
    """Everything a verdict depends on besides the bytes verified and the current time."""

    log_keys: tuple[Verifier, ...]
    origin: str | None = None
    witnesses: tuple[Verifier, ...] = ()
    min_witnesses: int = 0
    tsa_roots: tuple[x509.Certificate, ...] = ()
    skew: timedelta = DEFAULT_SKEW
    fingerprint: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts = [
            b"log",
            *sorted(_key_identity(k) for k in self.log_keys),
            b"origin",
            b"-" if self.origin is None else b"=" + self.origin.encode(),
            b"witnesses",
            *sorted(_key_identity(k) for k in self.witnesses),
            b"quorum %d" % self.min_witnesses,
            b"roots",
            *sorted(c.public_bytes(Encoding.DER) for c in self.tsa_roots),
            b"skew %d" % (self.skew // timedelta(microseconds=1)),
        ]
        digest = hashlib.sha256()
        for part in parts:  # length-prefixed: no two lists of parts hash alike
            digest.update(len(part).to_bytes(8, "big") + part)
        object.__setattr__(self, "fingerprint", digest.digest())

    @classmethod
    def of(
        cls,
        log_keys: Sequence[Verifier],
        *,
        origin: str | None = None,
        witnesses: Sequence[Verifier] = (),
        min_witnesses: int = 0,
        tsa_roots: Sequence[x509.Certificate] | None = None,
        skew: timedelta = DEFAULT_SKEW,
    ) -> TrustInputs:
        return cls(
            log_keys=tuple(log_keys),
            origin=origin,
            witnesses=tuple(witnesses),
            min_witnesses=min_witnesses,
            tsa_roots=tuple(tsa_roots or ()),
            skew=skew,
        )


@dataclass(frozen=True, slots=True)
class Interval:
    """Verification times ``start <= now < end``; None: unbounded on that side."""

    start: datetime | None = None
    end: datetime | None = None

    def holds_at(self, now: datetime) -> bool:
        return (self.start is None or self.start <= now) and (self.end is None or now < self.end)


ALWAYS = Interval()


class VerificationCache:
    """Verdicts by (kind, trust inputs, bytes), each with the interval in which it holds.

    ``stats`` counts the verdicts computed (not reused) per kind: how many distinct checkpoints,
    tokens, ... were actually verified."""

    def __init__(self) -> None:
        self._verdicts: dict[tuple[str, bytes, Hashable], list[tuple[Interval, object]]] = {}
        self.stats: dict[str, int] = {"checkpoints": 0, "tokens": 0}

    def verdict(
        self,
        kind: str,
        trust: TrustInputs,
        key: Hashable,
        compute: Callable[[], tuple[T, Interval]],
        *,
        now: datetime,
    ) -> T:
        """The verdict of ``kind`` on ``key`` under ``trust`` at ``now``: a stored one whose
        interval holds ``now``, else ``compute()`` (the verdict and where it holds), stored."""
        slot = self._verdicts.setdefault((kind, trust.fingerprint, key), [])
        for interval, found in slot:
            if interval.holds_at(now):
                return cast(T, found)  # stored by this kind's ``compute``
        value, interval = compute()
        assert interval.holds_at(now), f"{kind}: a verdict that does not hold when computed"
        self.stats[kind] = self.stats.get(kind, 0) + 1
        slot.append((interval, value))
        return value
