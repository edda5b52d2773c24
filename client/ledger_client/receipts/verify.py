"""Verifying receipts (``ledger_client.receipts.receipt``) offline, part by part, and whole runs.

Pure: no grpc, no rocksdict, no I/O. Each part is checked with the project's core: records and
disclosures (``ledger.records``: RFC 8785 digest, salted commitments), the v1 leaf
(``ledger.core.types``), the signed checkpoint (C2SP signed-note / tlog-checkpoint,
``ledger.core.checkpoint.open_checkpoint``), the inclusion and consistency proofs (RFC 9162 §2.1.3
and §2.1.4, ``ledger.core.merkle``) and the RFC 3161 anchors over SHA-256 of the checkpoint body
(``ledger.timestamp.verify_token``).

Authenticated (``verify_receipt`` rejects any change): record digest, record, disclosures,
leaf, index, tree size, every proof hash, both checkpoints' bodies and the log's signatures on
them, and each anchor token's signed content when TSA roots are given. Not authenticated, by
the formats themselves: signature lines of keys the verifier does not know (c2sp signed-note
says to ignore them), an anchor's ``tsa`` label and ``certificates`` (helpers: the token's own
signature and a configured root decide), and every anchor when no TSA root is given (reported
``not_checked``, never valid). A certificate an anchor carries that does not parse (not DER, a
bad X.509 version) rejects the receipt naming ``anchors[i].certificates[j]`` (one inside the
token: ``anchors[i].token``, "the token's certificates[j]"); well-formed certificates the chain
does not use are ignored by design (docs/formats.md "RFC 3161 anchors"). With roots, an
anchor that chains to none of them is reported ``untrusted`` and ignored; any other anchor
failure rejects the receipt, and at least one anchor must verify. A receipt that carries no
anchor at all (its checkpoint not anchored yet) is ``AnchorsPendingError``, raised only after
every other part verified: "anchors pending", never valid and never a failed check.

Anchor time policy (``ledger.timestamp.policy``): a valid anchor's genTime must not precede the
leaf's time (the stamped checkpoint covers the leaf) and must not lie in the future at ``now``,
both allowing the token's accuracy and ``skew``; violations are named ``TimestampError`` checks
``anchor-before-leaf`` / ``anchor-in-future``.

Batches: a ``ReceiptChecker`` verifies many receipts with one set of trust inputs and one
``now``. Each distinct checkpoint note, consistency proof and anchor token is verified once, its
verdict kept in a ``VerificationCache`` (``ledger_client.receipts.cache``) keyed by the exact
bytes verified (the note text; the token DER, the imprint and the DER of the certificates the
anchor carries; sizes, roots and proof hashes) and the trust inputs; the audit commands verify
through the same checker and cache. ``verify_receipt`` is a checker used once. Runs:
``ledger_client.receipts.run_verify``.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from cryptography import x509

from ledger.core import merkle
from ledger.core.checkpoint import (
    Checkpoint,
    Cosignature,
    VerifiedCheckpoint,
    Verifier,
    open_checkpoint,
)
from ledger.core.errors import (
    AnchorsPendingError,
    BoundsError,
    FormatError,
    LedgerError,
    OriginMismatchError,
    RecordError,
    SignatureError,
    StorageError,
    TimestampError,
    WitnessError,
)
from ledger.core.jcs import Json, index_path
from ledger.core.timefmt import rfc3339
from ledger.core.types import decode_leaf
from ledger.records.decision import DecisionRecord, record_digest, verify_disclosure
from ledger.timestamp.certs import pool_from
from ledger.timestamp.policy import (
    DEFAULT_SKEW,
    anchor_in_future,
    check_not_before_leaf,
    future_bound,
)
from ledger.timestamp.rfc3161 import VerifiedTimestamp, imprint_for_checkpoint_body, verify_token
from ledger_client.receipts.cache import ALWAYS, Interval, TrustInputs, VerificationCache
from ledger_client.receipts.inclusion import verify_inclusion
from ledger_client.receipts.receipt import MalformedReceiptError, Receipt, ReceiptAnchor

__all__ = [
    "NOT_CHECKED",
    "UNTRUSTED",
    "VALID",
    "AnchorCheck",
    "ReceiptChecker",
    "ReceiptReport",
    "TokenOutcome",
    "verify_receipt",
]

VALID, NOT_CHECKED, UNTRUSTED = "valid", "not_checked", "untrusted"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _iso(moment: datetime | None) -> str | None:
    """``2026-01-02T03:04:05Z`` (UTC; the fraction when there is one), or None."""
    return None if moment is None else rfc3339(moment)


@dataclass(frozen=True, slots=True, kw_only=True)
class AnchorCheck:
    """What one anchor showed: ``status`` is ``valid``, ``not_checked`` or ``untrusted``.

    ``signer`` is what the chain check proved (set only when ``valid``); ``tsa`` is the
    receipt's own label, which nothing authenticates: show ``signer``, never the label, as who
    stamped (JSON: ``unauthenticated_label``).
    """

    tsa: str  # the receipt's label: unauthenticated
    checkpoint_size: int
    status: str
    gen_time: datetime | None = None
    signer: str | None = None  # the verified signer certificate's subject (RFC 4514)
    tsa_name: str | None = None  # TSTInfo.tsa, when present
    detail: str | None = None

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "unauthenticated_label": self.tsa,
            "checkpoint_size": self.checkpoint_size,
            "status": self.status,
            "gen_time": _iso(self.gen_time),
            "signer": self.signer,
            "tsa_name": self.tsa_name,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiptReport:
    """What a receipt proves once ``verify_receipt`` accepted it."""

    record_digest: bytes
    index: int
    tree_size: int
    origin: str
    root_hash: bytes
    logged_at_ms: int  # the log's receive time, from the leaf
    signed_by: tuple[str, ...]
    cosigned_by: tuple[Cosignature, ...]  # valid lines of the witnesses given (tlog-cosignature)
    record: DecisionRecord | None
    disclosed: tuple[str, ...]
    anchors_checked: bool
    anchors: tuple[AnchorCheck, ...]
    previous_size: int | None

    @property
    def logged_at(self) -> datetime:
        """The log's receive time (the leaf's milliseconds), UTC."""
        return _ms_time(self.logged_at_ms)

    @property
    def anchored(self) -> AnchorCheck | None:
        """The earliest valid anchor: the record existed by its genTime."""
        valid = [a for a in self.anchors if a.status == VALID and a.gen_time is not None]
        return min(valid, key=lambda a: a.gen_time or self.logged_at, default=None)

    @property
    def anchored_at(self) -> datetime | None:
        """genTime of the earliest valid anchor (None: no anchor was checked and valid)."""
        first = self.anchored
        return None if first is None else first.gen_time

    def to_json_obj(self) -> dict[str, Json]:
        first = self.anchored
        return {
            "record_digest": self.record_digest.hex(),
            "index": self.index,
            "tree_size": self.tree_size,
            "origin": self.origin,
            "root_hash": _b64(self.root_hash),
            "logged_at": _iso(self.logged_at),
            "logged_at_ms": self.logged_at_ms,
            "signed_by": list(self.signed_by),
            "cosigned_by": [
                {"witness": f"{c.name}+{c.key_id.hex()}", "time": c.timestamp}
                for c in self.cosigned_by
            ],
            "record": _record_summary(self.record),
            "disclosed": list(self.disclosed),
            "anchors_checked": self.anchors_checked,
            "anchors": [a.to_json_obj() for a in self.anchors],
            "anchored_at": _iso(self.anchored_at),
            "anchored_by": None if first is None else first.signer,
            "previous_size": self.previous_size,
        }


def _record_summary(record: DecisionRecord | None) -> Json:
    if record is None:
        return None
    return {
        "kind": record.kind,
        "run_id": record.run_id,
        "step": record.step,
        "record_id": record.record_id,
    }


def _check_leaf(receipt: Receipt) -> int:
    try:
        entry = decode_leaf(receipt.index, receipt.leaf)
    except StorageError as exc:
        raise RecordError(f"leaf: {exc}") from None
    if entry.record_digest != receipt.record_digest:
        raise RecordError(
            f"leaf {receipt.index} logs record digest {entry.record_digest.hex()}, "
            f"the receipt is for {receipt.record_digest.hex()}"
        )
    return entry.timestamp_ms


def _ms_time(ms: int) -> datetime:
    seconds, millis = divmod(ms, 1000)
    return datetime.fromtimestamp(seconds, UTC) + timedelta(milliseconds=millis)


class _CertificateNotDer(FormatError):
    """``certificates[index]`` of an anchor is not a DER certificate that parses."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(f"{index_path('certificates', index)}: {message}")
        self.index = index
        self.reason = message


_TokenKey = tuple[bytes, bytes, tuple[bytes, ...]]
TokenOutcome = VerifiedTimestamp | TimestampError | FormatError


class ReceiptChecker:
    """Verifies receipts against fixed trust inputs (log keys, TSA roots, origin, witnesses and
    quorum, skew) at a fixed ``now``, through a ``VerificationCache`` (``ledger_client.receipts
    .cache``: shared with other checkers when given, their trust inputs kept apart). Not
    thread-safe; one per invocation."""

    def __init__(
        self,
        log_keys: Sequence[Verifier],
        *,
        tsa_roots: Sequence[x509.Certificate] | None = None,
        origin: str | None = None,
        now: datetime | None = None,
        skew: timedelta = DEFAULT_SKEW,
        witnesses: Sequence[Verifier] = (),
        min_witnesses: int = 0,
        cache: VerificationCache | None = None,
    ) -> None:
        if now is not None and now.tzinfo is None:
            raise FormatError("now must be timezone-aware")
        if skew < timedelta(0):
            raise FormatError(f"clock skew must be >= 0, got {skew}")
        self.trust = TrustInputs.of(
            log_keys, origin=origin, witnesses=witnesses, min_witnesses=min_witnesses,
            tsa_roots=tsa_roots, skew=skew,
        )  # fmt: skip
        self.now = now or datetime.now(UTC)
        self.cache = VerificationCache() if cache is None else cache

    @property
    def log_keys(self) -> tuple[Verifier, ...]:
        return self.trust.log_keys

    @property
    def tsa_roots(self) -> tuple[x509.Certificate, ...]:
        return self.trust.tsa_roots

    @property
    def origin(self) -> str | None:
        return self.trust.origin

    @property
    def witnesses(self) -> tuple[Verifier, ...]:
        return self.trust.witnesses

    @property
    def min_witnesses(self) -> int:
        return self.trust.min_witnesses

    @property
    def skew(self) -> timedelta:
        return self.trust.skew

    # --- cached pieces ------------------------------------------------------------------------

    def open_note(self, note: str) -> VerifiedCheckpoint:
        """``open_checkpoint`` with this checker's keys, origin and witness quorum, once per
        distinct note under these trust inputs."""
        trust = self.trust

        def compute() -> tuple[VerifiedCheckpoint | LedgerError, Interval]:
            try:
                verified = open_checkpoint(
                    note,
                    trust.log_keys,
                    origin=trust.origin,
                    witnesses=trust.witnesses,
                    min_witnesses=trust.min_witnesses,
                )
            except LedgerError as exc:
                return exc, ALWAYS
            return verified, ALWAYS

        found = self.cache.verdict("checkpoints", trust, note, compute, now=self.now)
        if isinstance(found, LedgerError):
            raise found.with_traceback(None)
        return found

    def open_previous(self, note: str) -> VerifiedCheckpoint:
        """``open_note`` for a receipt's ``previous`` checkpoint: the same log keys, witnesses
        and quorum as the current one; a failure names ``previous.checkpoint``."""
        try:
            return self.open_note(note)
        except (SignatureError, WitnessError, OriginMismatchError) as exc:
            raise type(exc)(f"previous.checkpoint: {exc}") from None

    def token(self, anchor: ReceiptAnchor, digest: bytes) -> TokenOutcome:
        """The anchor's token verified over the imprint ``digest`` against the TSA roots, with
        the certificates the anchor carries as helpers: the ``VerifiedTimestamp`` or the error
        (``TimestampError``; ``FormatError`` when the token or a certificate does not parse).
        Once per distinct (token, imprint, certificates)."""

        def compute() -> tuple[TokenOutcome, Interval]:
            helpers: list[x509.Certificate] = []
            for i, der in enumerate(anchor.certificates):
                try:
                    helpers.extend(pool.cert for pool in pool_from((der,)))
                except FormatError as exc:  # also a bad X.509 version (InvalidVersion)
                    return _CertificateNotDer(i, str(exc)), ALWAYS
            try:
                return verify_token(
                    anchor.token, digest=digest, roots=self.tsa_roots, intermediates=helpers
                ), ALWAYS
            except (TimestampError, FormatError) as exc:
                return exc, ALWAYS

        key: _TokenKey = (anchor.token, digest, anchor.certificates)
        return self.cache.verdict("tokens", self.trust, key, compute, now=self.now)

    def check_anchor_time(
        self, anchor: ReceiptAnchor, stamp: VerifiedTimestamp, leaf_time: datetime
    ) -> None:
        """The anchor time policy (``ledger.timestamp.policy``) for a valid anchor of a leaf
        logged at ``leaf_time``: ``anchor-before-leaf``, then ``anchor-in-future`` at ``now``,
        a verdict kept with the interval of ``now`` in which it holds."""
        gen_time, accuracy = stamp.gen_time, stamp.accuracy
        check_not_before_leaf(gen_time, accuracy, not_before=leaf_time, skew=self.skew)
        bound = future_bound(gen_time, accuracy, self.skew)

        def compute() -> tuple[bool, Interval]:
            if self.now < bound:
                return False, Interval(end=bound)
            return True, Interval(start=bound)

        key: _TokenKey = (anchor.token, stamp.digest, anchor.certificates)
        if not self.cache.verdict("anchor_times", self.trust, key, compute, now=self.now):
            raise anchor_in_future(gen_time, accuracy, now=self.now, skew=self.skew)

    def _consistency(self, old: Checkpoint, new: Checkpoint, proof: tuple[bytes, ...]) -> None:
        def compute() -> tuple[LedgerError | None, Interval]:
            try:
                merkle.verify_consistency(old.size, new.size, old.root_hash, new.root_hash, proof)
            except LedgerError as exc:
                return exc, ALWAYS
            return None, ALWAYS

        key = (old.size, new.size, old.root_hash, new.root_hash, proof)
        found = self.cache.verdict("consistency", self.trust, key, compute, now=self.now)
        if found is not None:
            raise found.with_traceback(None)

    # --- parts --------------------------------------------------------------------------------

    def _check_record(
        self, receipt: Receipt, given: DecisionRecord | None, given_digest: bytes | None
    ) -> DecisionRecord | None:
        seen: dict[int, bytes] = {}
        if given is not None and given_digest is not None:
            seen[id(given)] = given_digest
        for where, record in (("receipt's", receipt.record), ("given", given)):
            if record is None:
                continue
            digest = seen.get(id(record))
            if digest is None:
                digest = seen[id(record)] = record_digest(record)
            if digest != receipt.record_digest:
                raise RecordError(
                    f"the {where} record hashes to {digest.hex()}, "
                    f"the receipt is for {receipt.record_digest.hex()}"
                )
        record = given if given is not None else receipt.record
        for disclosure in receipt.disclosures:
            assert record is not None  # Receipt refuses disclosures without a record
            verify_disclosure(record, disclosure, receipt.record_digest)
        return record

    def _check_previous(self, receipt: Receipt, current: Checkpoint) -> Checkpoint | None:
        """The old checkpoint is signed, covers the entry, and the current one extends it."""
        previous = receipt.previous
        if previous is None:
            return None
        old = self.open_previous(previous.checkpoint).checkpoint
        if old.origin != current.origin:
            raise OriginMismatchError(
                f"previous checkpoint origin {old.origin!r} != current {current.origin!r}"
            )
        if receipt.index >= old.size:
            raise BoundsError(
                f"previous checkpoint of size {old.size} does not hold {receipt.index}"
            )
        self._consistency(old, current, previous.consistency_proof)
        return old

    def _check_anchor(
        self, anchor: ReceiptAnchor, checkpoint: Checkpoint, leaf_time: datetime, where: str
    ) -> AnchorCheck:
        digest = imprint_for_checkpoint_body(checkpoint.body_bytes())
        size = checkpoint.size
        stamp = self.token(anchor, digest)
        try:
            if isinstance(stamp, Exception):
                raise stamp.with_traceback(None)
            self.check_anchor_time(anchor, stamp, leaf_time)
        except TimestampError as exc:
            message = str(exc).removeprefix(f"{exc.check}: ")
            if exc.check == "chain":
                return AnchorCheck(
                    tsa=anchor.tsa, checkpoint_size=size, status=UNTRUSTED, detail=message
                )
            raise TimestampError(exc.check, f"{where}: {message}") from None
        except _CertificateNotDer as exc:
            field = index_path(f"{where}.certificates", exc.index)
            raise MalformedReceiptError(field, exc.reason) from None
        except FormatError as exc:
            raise MalformedReceiptError(f"{where}.token", str(exc)) from None
        return AnchorCheck(
            tsa=anchor.tsa,
            checkpoint_size=size,
            status=VALID,
            gen_time=stamp.gen_time,
            signer=stamp.signer_subject,
            tsa_name=stamp.tsa_name,
        )

    def _check_anchors(
        self, groups: Sequence[tuple[str, Sequence[ReceiptAnchor], Checkpoint]], leaf_time: datetime
    ) -> tuple[AnchorCheck, ...]:
        """Every anchor over its checkpoint; with roots, at least one must be valid."""
        checks = []
        for where, anchors, checkpoint in groups:
            for i, anchor in enumerate(anchors):
                if not self.tsa_roots:
                    checks.append(
                        AnchorCheck(
                            tsa=anchor.tsa, checkpoint_size=checkpoint.size, status=NOT_CHECKED
                        )
                    )
                else:
                    path = index_path(where, i)
                    checks.append(self._check_anchor(anchor, checkpoint, leaf_time, path))
        if self.tsa_roots and not checks:
            raise AnchorsPendingError(
                "anchors pending: the receipt carries no anchor yet (the log anchors on a "
                "schedule; run `ledger receipt upgrade` after the next anchor)"
            )
        if self.tsa_roots and not any(c.status == VALID for c in checks):
            why = "none chains to a given root"
            raise TimestampError("anchor", f"no anchor verifies against the given TSA roots: {why}")
        return tuple(checks)

    # --- the whole receipt --------------------------------------------------------------------

    def verify(
        self,
        receipt: Receipt,
        *,
        record: DecisionRecord | None = None,
        record_digest_known: bytes | None = None,
    ) -> ReceiptReport:
        """``verify_receipt`` with this checker's settings (``record_digest_known``: the
        caller already computed ``record_digest(record)``)."""
        used = self._check_record(receipt, record, record_digest_known)
        logged_ms = _check_leaf(receipt)
        verified = self.open_note(receipt.checkpoint)
        checkpoint = verified.checkpoint
        if checkpoint.size != receipt.tree_size:
            raise BoundsError(f"tree_size {receipt.tree_size} != checkpoint size {checkpoint.size}")
        leaf_hash = merkle.leaf_hash(receipt.leaf)
        verify_inclusion(  # once per shared subtree (ledger_client.receipts.inclusion)
            leaf_hash, receipt.index, checkpoint.size, receipt.inclusion_proof, checkpoint.root_hash
        )
        old = self._check_previous(receipt, checkpoint)
        groups = [("anchors", receipt.anchors, checkpoint)]
        if old is not None and receipt.previous is not None:
            groups.append(("previous.anchors", receipt.previous.anchors, old))
        report = ReceiptReport(
            record_digest=receipt.record_digest,
            index=receipt.index,
            tree_size=checkpoint.size,
            origin=checkpoint.origin,
            root_hash=checkpoint.root_hash,
            logged_at_ms=logged_ms,
            signed_by=tuple(f"{s.name}+{s.key_id.hex()}" for s in verified.log_signatures),
            cosigned_by=verified.cosignatures,
            record=used,
            disclosed=tuple(d.field_path for d in receipt.disclosures),
            anchors_checked=bool(self.tsa_roots),
            anchors=(),
            previous_size=None if old is None else old.size,
        )
        try:
            anchors = self._check_anchors(groups, _ms_time(logged_ms))
        except AnchorsPendingError as exc:
            raise AnchorsPendingError(str(exc), report=report) from None
        return replace(report, anchors=anchors)


def verify_receipt(
    receipt: Receipt,
    log_keys: Sequence[Verifier],
    *,
    tsa_roots: Sequence[x509.Certificate] | None = None,
    origin: str | None = None,
    record: DecisionRecord | None = None,
    now: datetime | None = None,
    skew: timedelta = DEFAULT_SKEW,
    witnesses: Sequence[Verifier] = (),
    min_witnesses: int = 0,
    cache: VerificationCache | None = None,
) -> ReceiptReport:
    """Check every part of ``receipt``; raise a ``VerificationError`` at the first failure.

    In order: the records (the receipt's and ``record``) hash to the record digest and the
    disclosures open their commitments; the v1 leaf logs that digest; the checkpoint is signed
    by one of ``log_keys`` (its origin is ``origin`` when given) and its size is ``tree_size``;
    the inclusion proof leads from the leaf hash at ``index`` to its root; the previous
    checkpoint (if any) is signed, covers ``index`` and is consistent with the current one; the
    anchors verify against ``tsa_roots`` (none given: reported ``not_checked``) and meet the
    anchor time policy at ``now`` (default: the current time) with ``skew``. At least
    ``min_witnesses`` of ``witnesses`` (tlog-cosignature keys) must have cosigned the checkpoint
    (``WitnessError``), and so must the previous checkpoint (its cosignatures are checked like
    the current one's; failures name ``previous.checkpoint``). ``cache``: a
    ``VerificationCache`` to share with other checks (default: a fresh one).
    """
    checker = ReceiptChecker(
        log_keys,
        tsa_roots=tsa_roots,
        origin=origin,
        now=now,
        skew=skew,
        witnesses=witnesses,
        min_witnesses=min_witnesses,
        cache=cache,
    )
    return checker.verify(receipt, record=record)
