"""Follow a transparency log: every new checkpoint must extend the last one trusted.

Specs: C2SP tlog-checkpoint and signed-note (each checkpoint is opened with
``ledger.core.checkpoint.open_checkpoint``: a valid signature by the log key, the expected origin);
RFC 9162 §2.1.4 (consistency of the trusted tree with the newer one); the C2SP tlog-witness idea
of keeping, per log, the latest checkpoint verified and accepting only provable extensions of it.

Trust on first use (TOFU): with no state yet, the first checkpoint is trusted on its signature
alone, and its origin is remembered unless one is given. From then on a new checkpoint is

* smaller than the trusted one: a **rollback** (``InconsistencyError``, evidence kind
  ``"rollback"``); the log signed a larger tree before;
* the same size: its root must be the trusted root, else a **fork** (two signed roots, one size);
* larger: the RFC 9162 consistency proof from the trusted size must verify, else a **fork**.
  A trusted size of 0 is extended on the signature alone: ``ledger.core.merkle`` refuses
  ``size1 == 0`` proofs because every tree extends the empty tree.

The evidence (``InconsistencyError.evidence``) is JSON-ready: both signed notes, their sizes and
roots, and the proof hashes, so anyone can re-check it offline (``ledger-verify checkpoint``,
``ledger-verify consistency``). The state changes only after a check passed.

Full audit: entries up to the trusted size are fetched page by page, hashed as RFC 6962 leaves
and folded into a ``CompactRange``; its root must equal the trusted root. The range is saved
with the state, so the next audit starts where the last one ended. Only a completed audit is
saved: a range is stored only once it matched a signed root.

State file (``MonitorState.to_json``), one JSON object, written atomically (temp file, fsync,
rename, fsync of the folder)::

    {"format": "ledger-monitor-state/v1", "origin": ..., "verifier_key": "name+id+base64",
     "size": N, "root_hash": base64, "checkpoint": "<signed note>",
     "audited_size": A, "audit_range": [base64, ...]}   # popcount(A) subtree roots
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from ledger.core import merkle
from ledger.core.backoff import Backoff, retry
from ledger.core.checkpoint import Checkpoint, Ed25519Verifier, Verifier, open_checkpoint
from ledger.core.errors import (
    FormatError,
    InconsistencyError,
    RootMismatchError,
    ServiceError,
    VerificationError,
    WitnessError,
)
from ledger.core.limits import MAX_PAGE
from ledger.fileio.durable import write_file

__all__ = [
    "MAX_STATE_BYTES",
    "PAGE_SIZE",
    "STATE_FORMAT",
    "Advance",
    "FetchedEntry",
    "LogSource",
    "Monitor",
    "MonitorState",
    "PollResult",
    "ProgressFactory",
    "StateFile",
    "StateFileError",
    "StateStore",
    "follow",
    "no_progress",
]

STATE_FORMAT = "ledger-monitor-state/v1"
PAGE_SIZE = MAX_PAGE  # the server's GetEntries maximum
MAX_STATE_BYTES = 1 << 20

Advance = Callable[[int], None]
ProgressFactory = Callable[[int], AbstractContextManager[Advance]]
Status = Literal["first-use", "unchanged", "extended"]
_T = TypeVar("_T")


class StateFileError(FormatError):
    """A state file that does not parse, or belongs to another key or origin (CLI exit 2)."""


# --- what the monitor reads ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchedEntry:
    """One served entry: its index, the raw leaf and, when the server sent it, its leaf hash."""

    index: int
    leaf: bytes
    leaf_hash: bytes | None = None


class LogSource(Protocol):
    """Where the monitor reads the log (a gRPC server in the CLI, fakes in tests)."""

    def latest_checkpoint(self) -> str:
        """The signed note of the log's latest checkpoint."""
        ...

    def consistency_proof(self, size1: int, size2: int) -> Sequence[bytes]:
        """RFC 9162 consistency proof hashes from ``size1`` to ``size2``."""
        ...

    def entries(self, start: int, count: int) -> Sequence[FetchedEntry]:
        """Up to ``count`` entries from ``start`` (fewer at a page limit)."""
        ...


def no_progress(total: int) -> AbstractContextManager[Advance]:
    """A progress factory that shows nothing."""
    return nullcontext(_ignore)


def _ignore(done: int) -> None:
    return None


# --- state ---------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise StateFileError(f"state {what} is not a string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise StateFileError(f"state {what} is not base64") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorState:
    """The checkpoint trusted last, and how far the entries were audited against a signed root."""

    origin: str
    verifier_key: str
    note: str
    size: int
    root_hash: bytes
    audited_size: int = 0
    audit_hashes: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.audited_size <= self.size:
            raise StateFileError(f"audited_size {self.audited_size} is outside 0..{self.size}")
        try:
            self.audit_range()
        except VerificationError as exc:
            raise StateFileError(f"audit_range: {exc}") from None

    def audit_range(self) -> merkle.CompactRange:
        """A fresh compact range over the audited leaves ``[0, audited_size)``."""
        return merkle.CompactRange(self.audited_size, self.audit_hashes)

    def to_json(self) -> str:
        """The state file text: sorted keys, two-space indent, final newline."""
        document = {
            "format": STATE_FORMAT,
            "origin": self.origin,
            "verifier_key": self.verifier_key,
            "size": self.size,
            "root_hash": _b64(self.root_hash),
            "checkpoint": self.note,
            "audited_size": self.audited_size,
            "audit_range": [_b64(h) for h in self.audit_hashes],
        }
        return json.dumps(document, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> MonitorState:
        """Inverse of :meth:`to_json`; StateFileError names what is wrong."""
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StateFileError(f"state file is not JSON: {exc}") from None
        if not isinstance(document, dict) or document.get("format") != STATE_FORMAT:
            raise StateFileError(f"state file is not a {STATE_FORMAT} object")
        hashes = document.get("audit_range")
        if not isinstance(hashes, list):
            raise StateFileError("state audit_range is not a list")
        return cls(
            origin=_field(document, "origin", str),
            verifier_key=_field(document, "verifier_key", str),
            note=_field(document, "checkpoint", str),
            size=_field(document, "size", int),
            root_hash=_unb64(document.get("root_hash"), "root_hash"),
            audited_size=_field(document, "audited_size", int),
            audit_hashes=tuple(_unb64(h, f"audit_range[{i}]") for i, h in enumerate(hashes)),
        )


def _field(document: dict[str, Any], name: str, kind: type[_T]) -> _T:
    value = document.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise StateFileError(f"state {name} is missing or not a {kind.__name__}")
    return value


class StateStore(Protocol):
    """Where the monitor keeps its state; ``save`` is durable and atomic when it returns."""

    def load(self) -> MonitorState | None:
        """The saved state, or None before the first save."""
        ...

    def save(self, state: MonitorState) -> None:
        """Replace the saved state."""
        ...


class StateFile:
    """A JSON state file replaced atomically: temp file, fsync, rename, fsync of the folder."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> MonitorState | None:
        """The state in the file; None when the file does not exist."""
        try:
            with self.path.open("rb") as stream:
                data = stream.read(MAX_STATE_BYTES + 1)
        except FileNotFoundError:
            return None
        if len(data) > MAX_STATE_BYTES:
            raise StateFileError(f"state file {self.path} is larger than {MAX_STATE_BYTES} bytes")
        try:
            return MonitorState.from_json(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise StateFileError(f"state file {self.path} is not UTF-8") from None

    def save(self, state: MonitorState) -> None:
        """Write the state durably; a crash leaves the old file or the new one, never a mix."""
        write_file(self.path, state.to_json(), mode=0o600)


# --- evidence ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Signed:
    """A checkpoint whose note passed ``open_checkpoint``, with the note text."""

    checkpoint: Checkpoint
    note: str


def _describe(size: int, root: bytes, note: str) -> dict[str, object]:
    return {"size": size, "root_hash": _b64(root), "root_hash_hex": root.hex(), "note": note}


def _inconsistent(
    kind: str,
    message: str,
    trusted: MonitorState,
    observed: _Signed,
    proof: Sequence[bytes] | None = None,
) -> InconsistencyError:
    """An InconsistencyError carrying both signed checkpoints (and the proof, when there is one)."""
    new = observed.checkpoint
    evidence: dict[str, object] = {
        "kind": kind,
        "origin": trusted.origin,
        "trusted": _describe(trusted.size, trusted.root_hash, trusted.note),
        "observed": _describe(new.size, new.root_hash, observed.note),
    }
    if proof is not None:
        hashes = [h.hex() for h in proof]
        evidence["proof"] = {"size1": trusted.size, "size2": new.size, "hashes": hashes}
    return InconsistencyError(message, evidence=evidence)


# --- the monitor ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PollResult:
    """What one poll found; ``audited`` counts the entries audited by this poll."""

    status: Status
    previous_size: int | None
    size: int
    root_hash: bytes
    audited_size: int
    audited: int


class Monitor:
    """Checks each checkpoint a ``LogSource`` serves against the state in a ``StateStore``."""

    def __init__(
        self,
        *,
        source: LogSource,
        verifier: Ed25519Verifier,
        store: StateStore,
        origin: str | None = None,
        progress: ProgressFactory = no_progress,
        page_size: int = PAGE_SIZE,
        witnesses: Sequence[Verifier] = (),
        min_witnesses: int = 0,
    ) -> None:
        if page_size < 1:
            raise ValueError(f"page_size {page_size} < 1")
        self._witnesses = list(witnesses)
        self._min_witnesses = min_witnesses
        self._source = source
        self._verifier = verifier
        self._store = store
        self._origin = origin
        self._progress = progress
        self._page_size = page_size
        self._state: MonitorState | None = None
        self._loaded = False

    @property
    def state(self) -> MonitorState | None:
        """The trusted state (loaded on first use)."""
        return self._load()

    def poll(self, *, full_audit: bool = False) -> PollResult:
        """Fetch the latest checkpoint, check it against the trusted one, save; maybe audit."""
        previous = self._load()
        observed = self._fetch(previous)
        if previous is None:
            status: Status = "first-use"
            state = self._trust_first(observed)
        else:
            status, state = self._follow(previous, observed)
        audited = 0
        if full_audit:
            state, audited = self._audit(state)
        return PollResult(
            status=status,
            previous_size=None if previous is None else previous.size,
            size=state.size,
            root_hash=state.root_hash,
            audited_size=state.audited_size,
            audited=audited,
        )

    # --- loading and fetching ----------------------------------------------------------------

    def _load(self) -> MonitorState | None:
        if not self._loaded:
            state = self._store.load()
            if state is not None:
                self._check_state(state)
            self._state, self._loaded = state, True
        return self._state

    def _check_state(self, state: MonitorState) -> None:
        """The state must be for this key and origin, and its note must be signed by the key."""
        try:
            saved_key = Ed25519Verifier.from_key_string(state.verifier_key)
        except FormatError as exc:
            raise StateFileError(f"state verifier_key: {exc}") from None
        if saved_key != self._verifier:
            raise StateFileError(
                f"the state is for key {state.verifier_key}, not {self._verifier.key_string()}"
            )
        if self._origin is not None and self._origin != state.origin:
            raise StateFileError(f"the state is for origin {state.origin!r}, not {self._origin!r}")
        try:
            opened = open_checkpoint(state.note, [self._verifier], origin=state.origin).checkpoint
        except (VerificationError, FormatError) as exc:
            raise StateFileError(f"state checkpoint: {exc}") from None
        if (opened.size, opened.root_hash) != (state.size, state.root_hash):
            raise StateFileError("state size or root_hash differs from its checkpoint note")

    def _fetch(self, state: MonitorState | None) -> _Signed:
        """The latest checkpoint, signed by the key, for the expected origin, and cosigned by
        ``min_witnesses`` of the witnesses (else ``WitnessError``: not trusted, state kept)."""
        note = self._source.latest_checkpoint()
        origin = self._origin if state is None else state.origin
        verified = open_checkpoint(
            note,
            [self._verifier],
            origin=origin,
            witnesses=self._witnesses,
            min_witnesses=self._min_witnesses,
        )
        return _Signed(verified.checkpoint, note)

    def _save(self, state: MonitorState) -> MonitorState:
        self._store.save(state)
        self._state = state
        return state

    # --- consistency ---------------------------------------------------------------------------

    def _trust_first(self, observed: _Signed) -> MonitorState:
        """TOFU: the first checkpoint is trusted on its signature (and a sane empty root)."""
        cp = observed.checkpoint
        if cp.size == 0 and cp.root_hash != merkle.EMPTY_ROOT:
            raise RootMismatchError(
                "a size-0 checkpoint", expected=merkle.EMPTY_ROOT, computed=cp.root_hash
            )
        state = MonitorState(
            origin=cp.origin,
            verifier_key=self._verifier.key_string(),
            note=observed.note,
            size=cp.size,
            root_hash=cp.root_hash,
        )
        return self._save(state)

    def _follow(self, trusted: MonitorState, observed: _Signed) -> tuple[Status, MonitorState]:
        new = observed.checkpoint
        if new.size < trusted.size:
            raise _inconsistent(
                "rollback",
                f"rollback: the log serves size {new.size} after signing size {trusted.size}",
                trusted,
                observed,
            )
        if new.size == trusted.size:
            if new.root_hash != trusted.root_hash:
                raise _inconsistent(
                    "fork", f"fork: two signed roots for size {new.size}", trusted, observed
                )
            return "unchanged", trusted
        if trusted.size > 0:
            self._prove_extension(trusted, observed)
        moved = replace(trusted, note=observed.note, size=new.size, root_hash=new.root_hash)
        return "extended", self._save(moved)

    def _prove_extension(self, trusted: MonitorState, observed: _Signed) -> None:
        """RFC 9162 §2.1.4.2: the trusted tree must be a prefix of the new one."""
        new = observed.checkpoint
        proof = list(self._source.consistency_proof(trusted.size, new.size))
        try:
            merkle.verify_consistency(
                trusted.size, new.size, trusted.root_hash, new.root_hash, proof
            )
        except VerificationError as exc:
            message = f"fork: size {new.size} does not extend trusted size {trusted.size}: {exc}"
            raise _inconsistent("fork", message, trusted, observed, proof) from exc

    # --- audit ---------------------------------------------------------------------------------

    def _audit(self, state: MonitorState) -> tuple[MonitorState, int]:
        """Hash every entry from the audited size to the trusted size; the root must match."""
        compact = state.audit_range()
        start = compact.size
        if start == state.size:
            return state, 0
        with self._progress(state.size - start) as advance:
            while compact.size < state.size:
                advance(self._fold_page(compact, state.size))
        computed = compact.root()
        if computed != state.root_hash:
            raise InconsistencyError(
                f"audit: entries 0..{state.size - 1} hash to {computed.hex()}, "
                f"not the signed root {state.root_hash.hex()}",
                evidence={
                    "kind": "audit",
                    "origin": state.origin,
                    "trusted": _describe(state.size, state.root_hash, state.note),
                    "computed_root_hash": _b64(computed),
                    "computed_root_hash_hex": computed.hex(),
                    "audited_from": start,
                },
            )
        audited = replace(state, audited_size=compact.size, audit_hashes=compact.hashes)
        return self._save(audited), compact.size - start

    def _fold_page(self, compact: merkle.CompactRange, target: int) -> int:
        """Fetch the next page below ``target``, check it and fold its leaf hashes in."""
        start = compact.size
        count = min(self._page_size, target - start)
        page = self._source.entries(start, count)
        if not page:
            raise ServiceError(f"the log served no entry at {start} (signed size {target})")
        if len(page) > count:
            raise VerificationError(f"the log served {len(page)} entries for a page of {count}")
        for entry in page:
            compact.append(_checked_leaf_hash(entry, compact.size))
        return len(page)


def _checked_leaf_hash(entry: FetchedEntry, index: int) -> bytes:
    """RFC 6962 leaf hash of the entry served at ``index``; a served hash must agree."""
    if entry.index != index:
        raise VerificationError(f"the log served entry {entry.index} where {index} belongs")
    computed = merkle.leaf_hash(entry.leaf)
    if entry.leaf_hash is not None and entry.leaf_hash != computed:
        raise RootMismatchError(
            f"served leaf hash of entry {index}", expected=entry.leaf_hash, computed=computed
        )
    return computed


# --- polling -------------------------------------------------------------------------------------


def follow(
    monitor: Monitor,
    *,
    interval: float,
    full_audit: bool = False,
    on_poll: Callable[[PollResult], None] = lambda result: None,
    on_error: Callable[[ServiceError | WitnessError], None] = lambda error: None,
    sleep: Callable[[float], None] | None = None,
    max_polls: int | None = None,
) -> int:
    """Poll every ``interval`` seconds; return the number of polls made.

    A ``ServiceError`` (server down, request refused) or a ``WitnessError`` (the latest checkpoint
    is not cosigned by enough witnesses yet: not trusted) is reported to ``on_error`` and retried
    at the next poll; any other ``VerificationError`` (fork, rollback, bad signature) ends the
    loop. Runs until interrupted (KeyboardInterrupt propagates) or, when given, ``max_polls``
    polls.
    ``sleep`` defaults to ``time.sleep``.
    """
    pause = sleep or time.sleep
    polls = 0

    def more() -> bool:
        return max_polls is None or polls < max_polls

    def poll() -> PollResult | None:
        nonlocal polls
        polls += 1
        try:
            return monitor.poll(full_audit=full_audit)
        except (ServiceError, WitnessError) as exc:
            on_error(exc)
            if more():
                raise _PollAgain from exc
            return None

    while more():
        if polls:
            pause(interval)
        result = retry(
            poll,
            backoff=Backoff.fixed(interval),
            retry_on=lambda exc: isinstance(exc, _PollAgain),
            sleep=pause,
        )
        if result is not None:
            on_poll(result)
    return polls


class _PollAgain(Exception):
    """A poll failed in a way the next poll may cure (reported to ``on_error``)."""
