"""A witness's durable state and evidence (c2sp.org/tlog-witness: "check and update atomically").

``Witness.add_checkpoint`` runs ``ledger.witness.core.decide`` and persists its outcome under
one lock, so two concurrent requests can never both pass the old-size check against the same
record (the race the spec warns about): the second one sees the first one's record. The state
is written before the cosignature is returned, so a witness that crashes after answering never
forgets what it cosigned. One process per state folder: an exclusive ``flock`` on ``LOCK``.

Files in the state folder:

    state.jsonl     the latest checkpoint cosigned per log: an append-only journal, one
                    fdatasync per change (``ledger.witness.journal``)
    evidence.json   replaced atomically (temp file, fsync, rename, fsync folder):
                    {"format": "ledger-witness-evidence/v1", "dropped": D,
                     "items": [{"key", "kind", "origin", "time", "detail", "old_size",
                                "proof": [base64], "cosigned": note, "submitted": note}]}

Evidence is deduplicated by ``Evidence.key`` (kind + submitted checkpoint body) and bounded
(``max_evidence`` items; later ones are counted in ``dropped``), because anyone can replay
old signed checkpoints.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ledger.core.checkpoint import CosignatureSigner, Verifier
from ledger.core.errors import FormatError, StorageError
from ledger.fileio.durable import write_file
from ledger.witness.core import Decision, Evidence, LogRecord, decide, parse_request
from ledger.witness.journal import STATE_FORMAT, StateJournal, load_records

__all__ = [
    "EVIDENCE_FORMAT",
    "MAX_EVIDENCE",
    "STATE_FORMAT",
    "Witness",
    "load_evidence",
    "load_records",
]

EVIDENCE_FORMAT = "ledger-witness-evidence/v1"
MAX_EVIDENCE = 256


def _read_json(path: Path, fmt: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise FormatError(f"{path}: not a readable {fmt} file: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        raise FormatError(f"{path}: not a {fmt} file")
    return doc


def load_evidence(folder: Path) -> dict[str, Any]:
    """The evidence document (``items`` and ``dropped``); empty when there is none."""
    doc = _read_json(folder / "evidence.json", EVIDENCE_FORMAT)
    if doc is None:
        return {"format": EVIDENCE_FORMAT, "dropped": 0, "items": []}
    if not isinstance(doc.get("items"), list) or not isinstance(doc.get("dropped"), int):
        raise FormatError(f"{folder / 'evidence.json'}: malformed evidence file")
    return doc


def _evidence_item(evidence: Evidence, now: int) -> dict[str, Any]:
    return {
        "key": evidence.key,
        "kind": evidence.kind,
        "origin": evidence.origin,
        "time": now,
        "detail": evidence.detail,
        "old_size": evidence.old_size,
        "proof": [base64.b64encode(h).decode() for h in evidence.proof],
        "cosigned": evidence.cosigned_note,
        "submitted": evidence.submitted_note,
    }


class _FolderLock:
    """An exclusive ``flock`` on ``<folder>/LOCK`` held for the witness's lifetime."""

    def __init__(self, folder: Path) -> None:
        self._fd = os.open(folder / "LOCK", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise StorageError(f"{folder} is in use by another witness process") from None

    def release(self) -> None:
        os.close(self._fd)


class Witness:
    """A tlog-witness over a state folder: decide, persist, then answer (thread-safe)."""

    def __init__(
        self,
        *,
        folder: Path,
        signer: CosignatureSigner,
        logs: Mapping[str, Sequence[Verifier]],
        clock: Callable[[], float],
        max_evidence: int = MAX_EVIDENCE,
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._lock = threading.Lock()
        self._folder_lock = _FolderLock(folder)
        self._signer = signer
        self.verifier_key = signer.verifier().key_string()
        self._logs = dict(logs)
        self._clock = clock
        self._max_evidence = max_evidence
        try:
            self._journal = StateJournal(folder)
            self._evidence = load_evidence(folder)
        except BaseException:
            self._folder_lock.release()
            raise

    @property
    def records(self) -> dict[str, LogRecord]:
        """A copy of the latest cosigned checkpoint per origin."""
        with self._lock:
            return dict(self._journal.records)

    def add_checkpoint(self, body: bytes) -> Decision:
        """Answer one add-checkpoint request; the new state is durable before this returns."""
        try:
            request = parse_request(body)
        except FormatError as exc:
            return Decision(status=400, body=f"{exc}\n")
        with self._lock:
            now = int(self._clock())
            decision = decide(
                request, logs=self._logs, held=self._journal.records, signer=self._signer, now=now
            )
            if decision.evidence is not None:
                self._keep(decision.evidence, now)
            if decision.record is not None:
                self._journal.put(decision.record)
            return decision

    def _keep(self, evidence: Evidence, now: int) -> None:
        items: list[dict[str, Any]] = self._evidence["items"]
        if any(item.get("key") == evidence.key for item in items):
            return
        doc = dict(self._evidence)
        if len(items) >= self._max_evidence:
            doc["dropped"] = int(doc["dropped"]) + 1
        else:
            doc["items"] = [*items, _evidence_item(evidence, now)]
        write_file(self.folder / "evidence.json", json.dumps(doc, indent=2) + "\n")
        self._evidence = doc

    def close(self) -> None:
        """Close the journal and release the folder lock."""
        self._journal.close()
        self._folder_lock.release()
