"""``ledger_client.remote.monitor`` and ``ledger-verify monitor`` against in-memory fake logs.

A ``FakeLog`` is an honest RFC 6962 tree over given leaves that signs C2SP checkpoints; forks
are two fake logs with the same key and origin, rollbacks a log showing an older checkpoint.
"""

from __future__ import annotations

import base64
import functools
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.core import merkle
from ledger.core.checkpoint import (
    Checkpoint,
    CosignatureSigner,
    Ed25519Signer,
    add_signatures,
    sign_checkpoint,
)
from ledger.core.errors import (
    InconsistencyError,
    OriginMismatchError,
    RootMismatchError,
    ServiceError,
    SignatureError,
    UnavailableError,
    VerificationError,
    WitnessError,
)
from ledger.core.types import ConsistencyProof, Entry, PublishedCheckpoint
from ledger_client.cli import monitor as cli_monitor
from ledger_client.cli.main import main
from ledger_client.remote.monitor import (
    Advance,
    FetchedEntry,
    Monitor,
    MonitorState,
    PollResult,
    StateFile,
    StateFileError,
    follow,
)
from tests import processes
from tests.offline import OFFLINE_PROBE

ORIGIN = "ledger.test/monitor"
SIGNER = Ed25519Signer.generate(ORIGIN)
OTHER = Ed25519Signer.generate(ORIGIN)


def leaves(n: int, salt: str = "", start: int = 0) -> list[bytes]:
    return [f"leaf-{salt}-{i}".encode() for i in range(start, start + n)]


class FakeLog:
    """An honest log over ``leaves``; ``shown`` is the size of the checkpoint it serves."""

    def __init__(self, data: Sequence[bytes] = (), *, signer: Ed25519Signer = SIGNER) -> None:
        self.signer = signer
        self.origin = ORIGIN
        self.leaves: list[bytes] = []
        self.nodes: dict[merkle.NodeID, bytes] = {}
        self.compact = merkle.CompactRange()
        self.notes: dict[int, str] = {}
        self.shown = 0
        self.entry_calls: list[tuple[int, int]] = []
        self.proof_calls: list[tuple[int, int]] = []
        self.append(data)

    def append(self, data: Sequence[bytes]) -> None:
        for leaf in data:
            self.leaves.append(leaf)
            self.nodes.update(self.compact.append(merkle.leaf_hash(leaf)))
        size = self.compact.size
        body = Checkpoint(origin=self.origin, size=size, root_hash=self.compact.root())
        self.notes[size] = sign_checkpoint(body, self.signer)
        self.shown = size

    def root(self, size: int) -> bytes:
        return Checkpoint.from_text(self.notes[size].split("\n\n")[0] + "\n").root_hash

    # LogSource
    def latest_checkpoint(self) -> str:
        return self.notes[self.shown]

    def consistency_proof(self, size1: int, size2: int) -> Sequence[bytes]:
        self.proof_calls.append((size1, size2))
        plan = merkle.consistency_proof_nodes(size1, size2)
        return merkle.fold_proof_nodes(plan, lambda ids: [self.nodes[i] for i in ids])

    def entries(self, start: int, count: int) -> Sequence[FetchedEntry]:
        self.entry_calls.append((start, count))
        end = min(start + count, self.shown)
        return [FetchedEntry(index=i, leaf=self.leaves[i]) for i in range(start, end)]


class MemoryStore:
    """A StateStore in memory that counts saves."""

    def __init__(self, state: MonitorState | None = None) -> None:
        self.saved = state
        self.saves = 0

    def load(self) -> MonitorState | None:
        return self.saved

    def save(self, state: MonitorState) -> None:
        self.saved = state
        self.saves += 1


def monitor(source: Any, store: MemoryStore, **kwargs: Any) -> Monitor:
    return Monitor(source=source, verifier=SIGNER.verifier(), store=store, **kwargs)


def trusted_at(log: FakeLog, store: MemoryStore | None = None) -> MemoryStore:
    store = store or MemoryStore()
    monitor(log, store).poll()
    return store


# --- state -------------------------------------------------------------------------------------


def sample_state(audited: int = 5) -> MonitorState:
    log = FakeLog(leaves(9))
    compact = merkle.CompactRange()
    compact.extend(merkle.leaf_hash(leaf) for leaf in log.leaves[:audited])
    return MonitorState(
        origin=ORIGIN,
        verifier_key=SIGNER.verifier().key_string(),
        note=log.notes[9],
        size=9,
        root_hash=log.root(9),
        audited_size=audited,
        audit_hashes=compact.hashes,
    )


@pytest.mark.parametrize("audited", [0, 1, 5, 8, 9])
def test_state_json_round_trip(audited: int) -> None:
    state = sample_state(audited)
    text = state.to_json()
    assert MonitorState.from_json(text) == state
    assert MonitorState.from_json(text).to_json() == text
    document = json.loads(text)
    assert document["format"] == "ledger-monitor-state/v1"
    assert document["checkpoint"] == state.note and document["size"] == 9
    assert len(document["audit_range"]) == audited.bit_count()


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda d: d.update(format="other"), "not a ledger-monitor-state/v1"),
        (lambda d: d.pop("origin"), "origin is missing"),
        (lambda d: d.update(size=True), "size is missing or not a int"),
        (lambda d: d.update(size="9"), "size is missing"),
        (lambda d: d.update(root_hash="***"), "root_hash is not base64"),
        (lambda d: d.update(audit_range="x"), "audit_range is not a list"),
        (lambda d: d.update(audit_range=[]), "audit_range: compact range of size 5"),
        (lambda d: d.update(audited_size=10), "audited_size 10 is outside 0..9"),
        (lambda d: d.update(audit_range=[1, 2]), "audit_range[0] is not a string"),
    ],
)
def test_state_json_rejects(edit: Callable[[dict[str, Any]], object], words: str) -> None:
    document = json.loads(sample_state().to_json())
    edit(document)
    with pytest.raises(StateFileError) as info:
        MonitorState.from_json(json.dumps(document))
    assert words in str(info.value)


def test_state_json_rejects_non_json() -> None:
    for text in ["", "{", "[]", "null"]:
        with pytest.raises(StateFileError):
            MonitorState.from_json(text)


def test_state_file_save_load_atomic(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    store = StateFile(path)
    assert store.load() is None
    state = sample_state()
    store.save(state)
    assert store.load() == state
    assert path.read_text() == state.to_json()
    store.save(replace(state, audited_size=0, audit_hashes=()))
    assert store.load() == replace(state, audited_size=0, audit_hashes=())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]  # no temp files left


def test_state_file_failed_save_keeps_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.json"
    state = sample_state()
    StateFile(path).save(state)

    def broken(src: object, dst: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr("ledger.fileio.durable.os.replace", broken)
    with pytest.raises(OSError, match="disk on fire"):
        StateFile(path).save(replace(state, audited_size=0, audit_hashes=()))
    assert StateFile(path).load() == state
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_state_file_rejects_garbage(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(StateFileError, match="not UTF-8"):
        StateFile(path).load()
    path.write_bytes(b" " * (2 << 20))
    with pytest.raises(StateFileError, match="larger than"):
        StateFile(path).load()


# --- trust on first use and following --------------------------------------------------------


def test_first_use_trusts_the_signed_checkpoint() -> None:
    log, store = FakeLog(leaves(7)), MemoryStore()
    result = monitor(log, store).poll()
    assert result == PollResult(
        status="first-use",
        previous_size=None,
        size=7,
        root_hash=log.root(7),
        audited_size=0,
        audited=0,
    )
    assert store.saved is not None and store.saved.note == log.notes[7]
    assert store.saved.origin == ORIGIN
    assert store.saved.verifier_key == SIGNER.verifier().key_string()
    assert log.proof_calls == []


def test_first_use_checks_signature_and_origin() -> None:
    store = MemoryStore()
    with pytest.raises(SignatureError):
        monitor(FakeLog(leaves(3), signer=OTHER), store).poll()
    with pytest.raises(OriginMismatchError):
        monitor(FakeLog(leaves(3)), store, origin="ledger.test/other").poll()
    assert store.saves == 0


def test_first_use_refuses_empty_tree_with_a_root() -> None:
    log = FakeLog()
    body = Checkpoint(origin=ORIGIN, size=0, root_hash=b"\x01" * 32)
    log.notes[0] = sign_checkpoint(body, SIGNER)
    with pytest.raises(RootMismatchError):
        monitor(log, MemoryStore()).poll()


def test_honest_log_extends_and_stays() -> None:
    log = FakeLog(leaves(5))
    store = trusted_at(log)
    mon = monitor(log, store)
    assert mon.poll().status == "unchanged"
    log.append(leaves(8, start=5))
    result = mon.poll()
    assert (result.status, result.previous_size, result.size) == ("extended", 5, 13)
    assert log.proof_calls == [(5, 13)]
    assert store.saved is not None and store.saved.note == log.notes[13]
    # a fresh monitor over the same state continues from 13
    log.append(leaves(1, start=13))
    assert monitor(log, store).poll().previous_size == 13


def test_extension_of_the_empty_tree_needs_no_proof() -> None:
    log = FakeLog()
    store = trusted_at(log)
    assert store.saved is not None and store.saved.size == 0
    log.append(leaves(4))
    result = monitor(log, store).poll()
    assert (result.status, result.size) == ("extended", 4)
    assert log.proof_calls == []


def fork_pair(common: int = 6) -> tuple[FakeLog, FakeLog]:
    """Two logs under one key and origin sharing ``common`` leaves, then one own leaf each."""
    a = FakeLog(leaves(common) + leaves(1, "a"))
    b = FakeLog(leaves(common) + leaves(1, "b"))
    return a, b


def test_fork_to_a_larger_tree_is_reported_with_the_proof() -> None:
    a, b = fork_pair()
    store = trusted_at(a)
    before = store.saved
    b.append(leaves(5, "b", start=1))
    with pytest.raises(InconsistencyError) as info:
        monitor(b, store).poll()
    assert "fork: size 12 does not extend trusted size 7" in str(info.value)
    evidence = info.value.evidence
    assert evidence["kind"] == "fork" and evidence["origin"] == ORIGIN
    assert evidence["trusted"] == {
        "size": 7,
        "root_hash": base64.b64encode(a.root(7)).decode(),
        "root_hash_hex": a.root(7).hex(),
        "note": a.notes[7],
    }
    assert evidence["observed"]["note"] == b.notes[12]  # type: ignore[index]
    proof = b.consistency_proof(7, 12)
    assert evidence["proof"] == {"size1": 7, "size2": 12, "hashes": [h.hex() for h in proof]}
    assert store.saved is before and store.saves == 1  # the state did not move
    json.dumps(evidence)  # JSON-ready


def test_fork_at_the_same_size_is_two_roots() -> None:
    a, b = fork_pair()
    store = trusted_at(a)
    with pytest.raises(InconsistencyError, match="two signed roots for size 7") as info:
        monitor(b, store).poll()
    evidence = info.value.evidence
    assert evidence["kind"] == "fork" and "proof" not in evidence
    assert evidence["trusted"]["note"] == a.notes[7]  # type: ignore[index]
    assert evidence["observed"]["note"] == b.notes[7]  # type: ignore[index]
    assert b.proof_calls == []


def test_rollback_is_reported_with_both_checkpoints() -> None:
    log = FakeLog(leaves(4))
    log.append(leaves(6, start=4))
    store = trusted_at(log)
    log.shown = 4  # the log now serves its older checkpoint as the latest
    with pytest.raises(InconsistencyError, match="rollback: the log serves size 4") as info:
        monitor(log, store).poll()
    evidence = info.value.evidence
    assert evidence["kind"] == "rollback"
    assert evidence["trusted"]["size"] == 10  # type: ignore[index]
    assert evidence["observed"]["size"] == 4  # type: ignore[index]
    assert evidence["observed"]["note"] == log.notes[4]  # type: ignore[index]
    assert store.saved is not None and store.saved.size == 10


class LyingProofs(FakeLog):
    """Serves a mutated consistency proof."""

    def __init__(self, data: Sequence[bytes], mutate: Callable[[list[bytes]], list[bytes]]):
        super().__init__(data)
        self.mutate = mutate

    def consistency_proof(self, size1: int, size2: int) -> Sequence[bytes]:
        return self.mutate(list(super().consistency_proof(size1, size2)))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda p: [bytes([p[0][0] ^ 1]) + p[0][1:], *p[1:]],  # a flipped bit
        lambda p: p[:-1],  # truncated
        lambda p: [*p, p[0]],  # extended
        lambda p: list(reversed(p)),  # reordered
        lambda p: [p[0][:31], *p[1:]],  # a short hash
        lambda p: [],  # empty
    ],
)
def test_a_proof_that_does_not_verify_is_a_fork(
    mutate: Callable[[list[bytes]], list[bytes]],
) -> None:
    log = LyingProofs(leaves(6), mutate)
    store = trusted_at(log)
    log.append(leaves(7, start=6))
    with pytest.raises(InconsistencyError) as info:
        monitor(log, store).poll()
    assert info.value.evidence["kind"] == "fork"
    assert store.saved is not None and store.saved.size == 6


def test_a_checkpoint_by_another_key_is_refused() -> None:
    log = FakeLog(leaves(3))
    store = trusted_at(log)
    impostor = FakeLog(leaves(3) + leaves(2, "x"), signer=OTHER)
    with pytest.raises(SignatureError):
        monitor(impostor, store).poll()
    assert store.saves == 1


def test_state_must_match_key_origin_and_note() -> None:
    log = FakeLog(leaves(3))
    store = trusted_at(log)
    assert store.saved is not None
    other = Monitor(source=log, verifier=OTHER.verifier(), store=store)
    with pytest.raises(StateFileError, match="the state is for key"):
        other.poll()
    with pytest.raises(StateFileError, match="the state is for origin"):
        monitor(log, store, origin="ledger.test/else").poll()
    bad = MemoryStore(replace(store.saved, size=2))
    with pytest.raises(StateFileError, match="differs from its checkpoint note"):
        monitor(log, bad).poll()
    forged = MemoryStore(replace(store.saved, note=FakeLog(leaves(3), signer=OTHER).notes[3]))
    with pytest.raises(StateFileError, match="state checkpoint"):
        monitor(log, forged).poll()
    garbled = MemoryStore(replace(store.saved, verifier_key="nonsense"))
    with pytest.raises(StateFileError, match="state verifier_key"):
        monitor(log, garbled).poll()


# --- full audit ----------------------------------------------------------------------------------


@contextmanager
def recording(calls: list[tuple[str, int]], total: int) -> Iterator[Advance]:
    calls.append(("total", total))
    yield lambda n: calls.append(("advance", n))


def test_full_audit_pages_and_resumes() -> None:
    log = FakeLog(leaves(10))
    store = MemoryStore()
    progress: list[tuple[str, int]] = []
    mon = monitor(log, store, page_size=3, progress=functools.partial(recording, progress))
    result = mon.poll(full_audit=True)
    assert (result.audited_size, result.audited) == (10, 10)
    assert log.entry_calls == [(0, 3), (3, 3), (6, 3), (9, 1)]
    assert progress == [
        ("total", 10),
        ("advance", 3),
        ("advance", 3),
        ("advance", 3),
        ("advance", 1),
    ]
    assert store.saved is not None and store.saved.audit_range().root() == log.root(10)
    # nothing new: no fetch, no progress bar
    log.entry_calls.clear()
    progress.clear()
    assert mon.poll(full_audit=True).audited == 0
    assert log.entry_calls == [] and progress == []
    # more entries: only the new ones are fetched, even by a new monitor over the saved state
    log.append(leaves(5, start=10))
    again = monitor(log, store, page_size=3).poll(full_audit=True)
    assert (again.status, again.audited_size, again.audited) == ("extended", 15, 5)
    assert log.entry_calls == [(10, 3), (13, 2)]


def test_audit_can_be_skipped_then_catch_up() -> None:
    log = FakeLog(leaves(4))
    store = trusted_at(log)
    log.append(leaves(4, start=4))
    assert monitor(log, store).poll().audited_size == 0
    result = monitor(log, store).poll(full_audit=True)
    assert (result.status, result.audited_size, result.audited) == ("unchanged", 8, 8)


class TamperedEntries(FakeLog):
    """Serves entries edited by ``tamper``."""

    def __init__(self, data: Sequence[bytes], tamper: Callable[[FetchedEntry], FetchedEntry]):
        super().__init__(data)
        self.tamper = tamper

    def entries(self, start: int, count: int) -> Sequence[FetchedEntry]:
        return [self.tamper(e) for e in super().entries(start, count)]


def test_audit_mismatch_is_evidence() -> None:
    def swap_leaf(e: FetchedEntry) -> FetchedEntry:
        return replace(e, leaf=b"other") if e.index == 3 else e

    log = TamperedEntries(leaves(6), swap_leaf)
    store = MemoryStore()
    with pytest.raises(InconsistencyError, match=r"audit: entries 0\.\.5 hash to") as info:
        monitor(log, store).poll(full_audit=True)
    evidence = info.value.evidence
    assert evidence["kind"] == "audit" and evidence["audited_from"] == 0
    assert evidence["trusted"]["note"] == log.notes[6]  # type: ignore[index]
    assert evidence["computed_root_hash_hex"] != log.root(6).hex()
    assert store.saved is not None and store.saved.audited_size == 0  # trusted, not audited


@pytest.mark.parametrize(
    ("tamper", "error", "words"),
    [
        (lambda e: replace(e, index=e.index + 1), VerificationError, "served entry 1 where 0"),
        (lambda e: replace(e, leaf_hash=b"\x00" * 32), RootMismatchError, "served leaf hash"),
    ],
)
def test_audit_checks_each_entry(
    tamper: Callable[[FetchedEntry], FetchedEntry], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        monitor(TamperedEntries(leaves(3), tamper), MemoryStore()).poll(full_audit=True)


def test_audit_accepts_correct_served_leaf_hashes() -> None:
    def with_hash(e: FetchedEntry) -> FetchedEntry:
        return replace(e, leaf_hash=merkle.leaf_hash(e.leaf))

    result = monitor(TamperedEntries(leaves(3), with_hash), MemoryStore()).poll(full_audit=True)
    assert result.audited_size == 3


class BadPages(FakeLog):
    def __init__(self, data: Sequence[bytes], page: Callable[[int, int], list[FetchedEntry]]):
        super().__init__(data)
        self.page = page

    def entries(self, start: int, count: int) -> Sequence[FetchedEntry]:
        return self.page(start, count)


def test_audit_page_shapes() -> None:
    empty = BadPages(leaves(3), lambda start, count: [])
    with pytest.raises(ServiceError, match="no entry at 0"):
        monitor(empty, MemoryStore()).poll(full_audit=True)
    many = BadPages(
        leaves(3), lambda s, c: [FetchedEntry(index=s + i, leaf=b"") for i in range(c + 1)]
    )
    with pytest.raises(VerificationError, match="4 entries for a page of 3"):
        monitor(many, MemoryStore()).poll(full_audit=True)


# --- polling -------------------------------------------------------------------------------------


class Flaky(FakeLog):
    def __init__(self, data: Sequence[bytes], failures: set[int]) -> None:
        super().__init__(data)
        self.failures = failures
        self.calls = 0

    def latest_checkpoint(self) -> str:
        self.calls += 1
        if self.calls in self.failures:
            raise ServiceError("server down")
        return super().latest_checkpoint()


def test_follow_polls_sleeps_and_retries_service_errors() -> None:
    log = Flaky(leaves(2), failures={2})
    results: list[PollResult] = []
    errors: list[ServiceError | WitnessError] = []
    sleeps: list[float] = []

    polls = follow(
        monitor(log, MemoryStore()),
        interval=2.5,
        on_poll=results.append,
        on_error=errors.append,
        sleep=sleeps.append,
        max_polls=3,
    )
    assert polls == 3 and sleeps == [2.5, 2.5]
    assert [r.status for r in results] == ["first-use", "unchanged"]
    assert [str(e) for e in errors] == ["server down"]


def test_follow_stops_on_verification_failure() -> None:
    log = FakeLog(leaves(4))
    log.append(leaves(2, start=4))
    store = trusted_at(log)
    log.shown = 4
    with pytest.raises(InconsistencyError):
        follow(monitor(log, store), interval=1, sleep=lambda s: None, max_polls=5)


# --- the CLI, over a fake RemoteLog ---------------------------------------------------------------


class FakeRemote:
    """Stands in for ``RemoteLog``: serves a FakeLog through the RemoteLog methods."""

    log: FakeLog = FakeLog()
    fail: Exception | None = None

    def __init__(self, address: str, *, timeout: float = 30.0) -> None:
        self.address = address

    def __enter__(self) -> FakeRemote:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def _check(self) -> None:
        if FakeRemote.fail is not None:
            raise FakeRemote.fail

    def checkpoint(self, size: int = 0) -> PublishedCheckpoint:
        self._check()
        log = FakeRemote.log
        note = log.notes[size or log.shown]
        return PublishedCheckpoint(origin=ORIGIN, size=log.shown, root_hash=b"", note=note)

    def consistency_proof(self, size1: int, size2: int = 0) -> ConsistencyProof:
        hashes = tuple(FakeRemote.log.consistency_proof(size1, size2))
        return ConsistencyProof(size1=size1, size2=size2, hashes=hashes)

    def entries(self, start: int, count: int) -> list[Entry]:
        page = FakeRemote.log.entries(start, count)
        return [
            Entry(
                index=e.index,
                leaf=e.leaf,
                leaf_hash=merkle.leaf_hash(e.leaf),
                record_digest=b"",
                timestamp_ms=0,
                metadata=b"",
            )
            for e in page
        ]


@pytest.fixture
def remote(monkeypatch: pytest.MonkeyPatch) -> type[FakeRemote]:
    monkeypatch.setattr("ledger_client.remote.log.RemoteLog", FakeRemote)
    FakeRemote.log, FakeRemote.fail = FakeLog(leaves(5)), None
    return FakeRemote


def run_cli(state: Path, *extra: str) -> Any:
    args = [
        "monitor",
        "--server",
        "fake:1",
        "--key",
        SIGNER.verifier().key_string(),
        "--state",
        str(state),
        *extra,
    ]
    return CliRunner().invoke(main, args)


def test_cli_once_follows_and_audits(tmp_path: Path, remote: type[FakeRemote]) -> None:
    state = tmp_path / "state.json"
    first = run_cli(state, "--once")
    assert first.exit_code == 0, first.output
    assert "OK: monitor verified" in first.stdout and "trusted on first use" in first.stdout
    remote.log.append(leaves(1200, start=5))
    second = run_cli(state, "--once", "--full-audit", "--json")
    assert second.exit_code == 0, second.output
    payload = json.loads(second.stdout)
    assert payload["valid"] is True and payload["status"] == "extended"
    assert (payload["previous_size"], payload["size"], payload["audited_size"]) == (5, 1205, 1205)
    assert "auditing entries" in second.stderr
    assert remote.log.entry_calls[:2] == [(0, 1000), (1000, 205)]
    saved = StateFile(state).load()
    assert saved is not None and (saved.size, saved.audited_size) == (1205, 1205)


def test_cli_fork_prints_evidence(tmp_path: Path, remote: type[FakeRemote]) -> None:
    state = tmp_path / "state.json"
    a, b = fork_pair()
    remote.log = a
    assert run_cli(state, "--once").exit_code == 0
    b.append(leaves(3, "b", start=1))
    remote.log = b
    human = run_cli(state, "--once")
    assert human.exit_code == 1
    assert "INVALID: fork: size 10 does not extend trusted size 7" in human.stderr
    assert "re-check: ledger-verify consistency --size1 7 --size2 10" in human.stderr
    assert a.notes[7].splitlines()[0] in human.stderr and human.stdout == ""
    as_json = run_cli(state, "--once", "--json")
    assert as_json.exit_code == 1
    payload = json.loads(as_json.stdout)
    assert payload["valid"] is False and payload["check"] == "monitor"
    evidence = payload["evidence"]
    assert evidence["trusted"]["note"] == a.notes[7]
    assert evidence["observed"]["note"] == b.notes[10]
    assert len(evidence["proof"]["hashes"]) == len(b.consistency_proof(7, 10))


def test_cli_evidence_recheck_command_verifies(tmp_path: Path, remote: type[FakeRemote]) -> None:
    """The printed re-check command is a real ``ledger-verify consistency`` call (it fails)."""
    state = tmp_path / "state.json"
    a, b = fork_pair()
    remote.log = a
    run_cli(state, "--once")
    b.append(leaves(3, "b", start=1))
    remote.log = b
    out = run_cli(state, "--once").stderr
    command = next(line for line in out.splitlines() if line.startswith("re-check: "))
    args = command.removeprefix("re-check: ledger-verify ").split()
    assert CliRunner().invoke(main, args).exit_code == 1


def test_cli_rollback_and_usage_errors(tmp_path: Path, remote: type[FakeRemote]) -> None:
    state = tmp_path / "state.json"
    remote.log.append(leaves(3, start=5))
    assert run_cli(state, "--once").exit_code == 0
    remote.log.shown = 5
    rolled = run_cli(state, "--once", "--json")
    assert rolled.exit_code == 1
    assert json.loads(rolled.stdout)["evidence"]["kind"] == "rollback"
    other_key = ["--key", OTHER.verifier().key_string()]
    wrong_key = CliRunner().invoke(
        main, ["monitor", "--server", "x:1", *other_key, "--state", str(state), "--once"]
    )
    assert wrong_key.exit_code == 2 and "the state is for key" in wrong_key.stderr
    bad_key = CliRunner().invoke(
        main, ["monitor", "--server", "x:1", "--key", "junk", "--state", str(state), "--once"]
    )
    assert bad_key.exit_code == 2
    state.write_text("{not json")
    assert run_cli(state, "--once").exit_code == 2


def test_cli_server_errors_exit_2_once(tmp_path: Path, remote: type[FakeRemote]) -> None:
    remote.fail = UnavailableError("fake:1: UNAVAILABLE: connection refused")
    result = run_cli(tmp_path / "state.json", "--once", "--json")
    assert result.exit_code == 2
    assert "fake:1: UNAVAILABLE: connection refused" in json.loads(result.stdout)["error"]
    assert not (tmp_path / "state.json").exists()


def test_cli_loop_until_interrupted(
    tmp_path: Path, remote: type[FakeRemote], monkeypatch: pytest.MonkeyPatch
) -> None:
    naps: list[float] = []

    def nap(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 1:
            remote.fail = UnavailableError("fake:1: UNAVAILABLE: blip")
        elif len(naps) == 2:
            remote.fail = None
            remote.log.append(leaves(2, start=5))
        else:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli_monitor, "follow", functools.partial(follow, sleep=nap))
    result = run_cli(tmp_path / "state.json", "--interval", "0.5", "--json")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    polls = [json.loads(line) for line in lines[:-1]]
    assert [p["status"] for p in polls] == ["first-use", "extended"]
    assert json.loads(lines[-1]) == {
        "valid": True,
        "check": "monitor",
        "stopped": "interrupted",
        "size": 7,
    }
    assert "warning: fake:1: UNAVAILABLE: blip (retrying in 0.5s)" in result.stderr
    assert naps == [0.5, 0.5, 0.5]


# --- imports -------------------------------------------------------------------------------------


def test_cli_and_monitor_help_do_not_import_grpc() -> None:
    """``ledger_client.cli`` and ``monitor --help`` load no grpc: the command imports it."""
    probe = OFFLINE_PROBE
    for args in (["--help"], ["monitor", "--help"]):
        proc = processes.run(
            [sys.executable, "-c", probe, *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert "IMPORTED []" in proc.stdout, proc.stdout
    assert "monitor" in proc.stdout and "--full-audit" in proc.stdout


def test_witness_quorum_trusts_only_cosigned_checkpoints() -> None:
    """With --min-witnesses, a checkpoint short of the quorum is reported, not trusted."""
    witness = CosignatureSigner.generate("witness.test/monitor")
    log = FakeLog(leaves(3))
    store = MemoryStore()
    mon = monitor(log, store, witnesses=[witness.verifier()], min_witnesses=1)
    errors: list[ServiceError | WitnessError] = []
    follow(mon, interval=0, on_error=errors.append, sleep=lambda _: None, max_polls=1)
    assert store.saved is None and "1 required" in str(errors[0])
    body = Checkpoint.from_text(log.notes[3].split("\n\n")[0] + "\n")
    log.notes[3] = add_signatures(log.notes[3], [witness.cosign(body, 1_790_000_000)])
    assert mon.poll().status == "first-use" and store.saved is not None
