"""The agent's identity in the SDK: it signs every record and keeps the agent's chain of runs.

docs/formats.md "Agent signatures" and "Agent chains" (``ledger.records.agent`` has the
formats). ``LedgerClient(..., agent_key=KEYFILE, chain=STATEFILE)``:

* every record the client spools is signed with the agent key (``seal``) before its digest is
  taken, so the signature is inside the logged record;
* a run's first record (step 0) opens the run in the chain: under an exclusive ``flock`` on
  ``<chain>.lock`` (so concurrent runs, in threads or processes, take sequence numbers in a
  line), the state file is read, the next sequence number is written back durably
  (``ledger.fileio.durable``) and only then is the record given its ``chain`` link, signed,
  and its beacons spooled before it (``open_beacon``; ``genesis_beacon`` for run 0). A crash
  after that leaves the run opened and not closed; a number is never handed out twice.
* a missing state file starts a new chain (random id) whose run 0 names the reason in
  ``chain.genesis`` (``no chain state at PATH``, or the ``genesis`` argument): auditors see
  "chain restarted", not a fork, when the key had a chain before.

State file (JSON, mode 0600): ``{"chain": <32 hex id>, "key_id": <8 hex>, "next": <n>}``.
Beacons are spooled as items with an empty record (``spool_format``).
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ledger.core.errors import FormatError
from ledger.fileio.keys import load_signer
from ledger.fileio.private import read_private, write_private
from ledger.records.agent import (
    RecordSigner,
    agent_chain_key,
    chain_key,
    genesis_beacon,
    open_beacon,
    open_tag,
    sign_record,
)
from ledger.records.decision import ChainLink, DecisionRecord

__all__ = ["AgentIdentity", "ChainState"]


class ChainState:
    """One chain's state file and its lock (module docstring)."""

    def __init__(self, path: str | Path, key_id: str, *, genesis: str | None = None) -> None:
        self.path = Path(path)
        self.key_id = key_id
        self.genesis = genesis
        self._thread_lock = threading.Lock()

    def advance(self) -> tuple[str, int, str | None]:
        """Take the next sequence number durably: (chain id, seq, genesis reason or None).
        The caller holds ``locked()``."""
        if self.path.exists():
            try:
                state = json.loads(read_private(self.path, "chain state"))
                chain, seq = str(state["chain"]), int(state["next"])
                if state.get("key_id") != self.key_id:
                    raise FormatError(f"chain state {self.path} belongs to another agent key")
            except (ValueError, KeyError, TypeError) as exc:
                raise FormatError(f"chain state {self.path} does not parse: {exc}") from None
            reason = None
        else:
            chain, seq = secrets.token_hex(16), 0
            reason = self.genesis or f"no chain state at {self.path.name}"
        body = {"chain": chain, "key_id": self.key_id, "next": seq + 1}
        write_private(self.path, json.dumps(body, sort_keys=True) + "\n")
        return chain, seq, reason

    def locked(self) -> _ChainLock:
        return _ChainLock(self)


class _ChainLock:
    def __init__(self, state: ChainState) -> None:
        self.state = state
        self.fd = -1

    def __enter__(self) -> None:
        self.state._thread_lock.acquire()
        lock = self.state.path.with_name(self.state.path.name + ".lock")
        lock.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # releases the flock
        self.state._thread_lock.release()


class AgentIdentity:
    """An agent key (a private key file, ``ledger.fileio.keys``) and, optionally, its chain."""

    def __init__(
        self, key_file: str | Path, chain: str | Path | None = None, *, genesis: str | None = None
    ) -> None:
        signer = load_signer(Path(key_file))
        self.signer = RecordSigner(signer)
        self.chain_key = agent_chain_key(signer)
        key_id = signer.key_id.hex()
        self.chain = None if chain is None else ChainState(chain, key_id, genesis=genesis)

    def seal(self, record: DecisionRecord, spool_beacon: Callable[[bytes], None]) -> DecisionRecord:
        """Sign ``record``; a run's first record also opens the run in the chain (module
        docstring), its beacons handed to ``spool_beacon`` before it is returned."""
        if self.chain is None or record.step != 0:
            return sign_record(record, self.signer)
        with self.chain.locked():
            chain_id, seq, reason = self.chain.advance()
            tag = open_tag(chain_key(self.chain_key, chain_id), seq)
            link = ChainLink(id=chain_id, seq=seq, tag=tag.hex(), genesis=reason)
            signed = sign_record(replace(record, chain=link), self.signer)
            if reason is not None:
                spool_beacon(genesis_beacon(self.chain_key, chain_id))
            spool_beacon(open_beacon(tag, signed))
        return signed
