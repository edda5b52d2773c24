"""Does a store's conditional write hold under contention? Checked before the log relies on it.

A round starts ``writers`` threads (default 64) that wait on one barrier and then PUT the same
key at once, each with its own body:

* ``create``: a fresh key, each PUT with ``If-None-Match: *``;
* ``swap``: a key created first, each PUT with ``If-Match: <its ETag>``.

A round passes when exactly one PUT succeeded (the others answered 412, or the 409 a store may
answer to racing conditional writes) and the object read back holds that writer's body. Any
other outcome (two winners, none, a winner whose body is not the one stored, an error) fails
the round, and one failed round fails the store. Botocore's own retries are off for the check:
a retried PUT whose first try landed would answer 412 and hide the winner.

``check_store`` runs ``rounds`` of each kind and, when the bucket is writable, leaves its verdict
in ``.ledger/conformance.json``; the publisher refuses a bucket whose marker is missing or
failed (``BucketPublisher.require_conforming``). Keys used by the check live under
``.ledger/conformance/`` and are deleted after each round.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from ledger.core import timefmt
from ledger.core.errors import LedgerError
from ledger.objstore.bucket import Bucket, BucketAddress
from ledger.objstore.publisher import CONFORMANCE_KEY

__all__ = ["ConformanceReport", "Round", "check_store"]

Mode = Literal["create", "swap"]
MODES: tuple[Mode, ...] = ("create", "swap")
_HEADERS = {"Content-Type": "text/plain", "Cache-Control": "no-store"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Round:
    """One contended round."""

    mode: Mode
    winners: int
    losers: int
    errors: tuple[str, ...]
    stored_is_winner: bool
    seconds: float

    @property
    def passed(self) -> bool:
        """Exactly one winner, its body stored, no error."""
        return self.winners == 1 and self.stored_is_winner and not self.errors

    def line(self) -> str:
        """The round in one line."""
        verdict = "ok" if self.passed else "FAIL"
        more = f", {len(self.errors)} error(s): {self.errors[0]}" if self.errors else ""
        stored = "" if self.stored_is_winner else ", stored body is not the winner's"
        return (
            f"{self.mode}: {self.winners} winner(s), {self.losers} refused{stored}{more} "
            f"in {self.seconds:.2f} s: {verdict}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConformanceReport:
    """Every round of a check."""

    address: str
    writers: int
    rounds: list[Round] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Every round passed (and there was at least one of each kind)."""
        modes = {r.mode for r in self.rounds}
        return modes == {"create", "swap"} and all(r.passed for r in self.rounds)

    def detail(self) -> str:
        """The first failed round, or a summary."""
        failed = [r for r in self.rounds if not r.passed]
        if failed:
            return f"{len(failed)} of {len(self.rounds)} rounds failed; first: {failed[0].line()}"
        return f"{len(self.rounds)} rounds of {self.writers} writers, one winner each"

    def to_json_obj(self) -> dict[str, object]:
        """The marker written to the bucket and printed by ``--json``."""
        return {
            "passed": self.passed,
            "address": self.address,
            "writers": self.writers,
            "rounds": {m: sum(1 for r in self.rounds if r.mode == m) for m in ("create", "swap")},
            "failed": sum(1 for r in self.rounds if not r.passed),
            "detail": self.detail(),
            "checked_at": timefmt.rfc3339_seconds(datetime.now(UTC)),
            "seconds_max": max((r.seconds for r in self.rounds), default=0.0),
        }


def _race(bucket: Bucket, mode: Mode, writers: int, pool: ThreadPoolExecutor) -> Round:
    key = f".ledger/conformance/{uuid.uuid4().hex}"
    etag = ""
    if mode == "swap":
        etag = bucket.put(key, b"start", _HEADERS)
    barrier = threading.Barrier(writers)

    def write(n: int) -> bool | str:
        body = f"writer {n}".encode()
        try:
            barrier.wait(timeout=60)
            if mode == "create":
                return bucket.create(key, body, _HEADERS)
            return bucket.swap(key, body, etag, _HEADERS) is not None
        except (LedgerError, threading.BrokenBarrierError) as exc:
            return f"writer {n}: {exc}"

    started = time.monotonic()
    answers = list(pool.map(write, range(writers)))
    seconds = time.monotonic() - started
    won = [n for n, a in enumerate(answers) if a is True]
    errors = tuple(a for a in answers if isinstance(a, str))
    stored = bucket.get(key)
    stored_is_winner = (
        len(won) == 1 and stored is not None and stored.body == f"writer {won[0]}".encode()
    )
    bucket.delete(key)
    return Round(
        mode=mode,
        winners=len(won),
        losers=sum(1 for a in answers if a is False),
        errors=errors,
        stored_is_winner=stored_is_winner,
        seconds=seconds,
    )


def check_store(
    address: BucketAddress,
    *,
    rounds: int = 50,
    writers: int = 64,
    record: bool = True,
    progress: Callable[[Round], None] | None = None,
) -> ConformanceReport:
    """Run ``rounds`` contended rounds of each kind against ``address`` (module docstring)."""
    bucket = Bucket(address, connections=writers + 4, timeout_s=120.0, attempts=1)
    report = ConformanceReport(address=address.url, writers=writers)
    with ThreadPoolExecutor(writers, thread_name_prefix="ledger-conformance") as pool:
        for _ in range(rounds):
            for mode in MODES:
                done = _race(bucket, mode, writers, pool)
                report.rounds.append(done)
                if progress is not None:
                    progress(done)
    if record:
        body = json.dumps(report.to_json_obj(), sort_keys=True).encode()
        bucket.put(CONFORMANCE_KEY, body, {"Content-Type": "application/json",
                                           "Cache-Control": "no-store"})  # fmt: skip
    return report
