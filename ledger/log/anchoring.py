"""Anchoring checkpoints with RFC 3161 timestamps (RFC 3161 §2.4; docs/formats.md
"RFC 3161 anchors").

Each run takes the latest published checkpoint, and asks every configured TSA that has not yet
stamped it for a token over SHA-256 of the checkpoint *body* (origin, size, root lines), so
cosignatures added later do not change what was stamped. A token is verified (by the TSA
client) before it is stored, by checkpoint size and TSA name. Failures are retried with
exponential backoff and reported; they never touch the append path, which runs on another
thread. Whatever one TSA does (an error, garbage, a token that breaks a parser) is recorded as
that TSA's failure and the next TSA is still asked. ``AnchorSchedule`` runs the anchorer every
``interval`` seconds inside the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from ledger.core.backoff import Backoff, retry
from ledger.core.checkpoint import Checkpoint, SignedNote
from ledger.core.errors import LedgerError
from ledger.core.redact import redact_text
from ledger.core.types import Anchor, AnchorOutcome, PublishedCheckpoint

if TYPE_CHECKING:  # RFC 3161 (asn1crypto) loads only where a TSA is used
    from ledger.timestamp.rfc3161 import VerifiedTimestamp

__all__ = [
    "AnchorSchedule",
    "Anchorer",
    "TimestampSource",
    "TsaTarget",
    "checkpoint_body",
]

_log = logging.getLogger("ledger.anchor")


class TimestampSource(Protocol):
    """Anything that returns a verified RFC 3161 token for a SHA-256 digest (``TsaClient``)."""

    def timestamp(
        self, digest: bytes, *, at_time: datetime | None = None
    ) -> tuple[bytes, VerifiedTimestamp]: ...


class AnchorLog(Protocol):
    """What the anchorer needs from the log."""

    def latest_checkpoint(self) -> PublishedCheckpoint | None: ...
    def anchors(self, size: int) -> list[Anchor]: ...
    def put_anchor(self, anchor: Anchor) -> None: ...


@dataclass(frozen=True, slots=True)
class TsaTarget:
    """A named TSA and the client that talks to it."""

    name: str
    source: TimestampSource


def checkpoint_body(note: str) -> bytes:
    """The checkpoint body (the note text before the signatures) as stamped."""
    text = SignedNote.from_text(note).text
    return Checkpoint.from_text(text).body_bytes()


class Anchorer:
    """Stamps the latest checkpoint with every configured TSA, once per TSA."""

    def __init__(
        self,
        *,
        log: AnchorLog,
        tsas: Sequence[TsaTarget],
        attempts: int = 3,
        backoff: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._log = log
        self._tsas = list(tsas)
        self._attempts = attempts
        self._backoff = backoff
        self._sleep = sleep

    @property
    def tsa_names(self) -> list[str]:
        """Configured TSA names."""
        return [t.name for t in self._tsas]

    def anchor_latest(self) -> AnchorOutcome:
        """Anchor the latest published checkpoint (size 0 is never anchored)."""
        checkpoint = self._log.latest_checkpoint()
        if checkpoint is None or checkpoint.size == 0:
            return AnchorOutcome(size=0, failures=["no non-empty checkpoint to anchor yet"])
        from ledger.timestamp.rfc3161 import imprint_for_checkpoint_body  # loaded when it runs

        digest = imprint_for_checkpoint_body(checkpoint_body(checkpoint.note))
        done = {a.tsa for a in self._log.anchors(checkpoint.size)}
        outcome = AnchorOutcome(size=checkpoint.size)
        for tsa in self._tsas:
            if tsa.name in done:
                outcome.skipped.append(tsa.name)
                continue
            self._stamp(tsa, checkpoint.size, digest, outcome)
        return outcome

    def _stamp(self, tsa: TsaTarget, size: int, digest: bytes, outcome: AnchorOutcome) -> None:
        def warn(attempt: int, exc: Exception, delay: float = 0.0) -> None:
            _log.warning(
                "TSA %s attempt %d/%d: %s", tsa.name, attempt + 1, self._attempts, _reason(exc)
            )

        try:  # whatever a TSA does is only its failure: every exception is retried
            token, verified = retry(
                lambda: tsa.source.timestamp(digest),
                backoff=Backoff.doubling(self._backoff),
                retry_on=lambda exc: True,
                attempts=self._attempts,
                on_retry=warn,
                sleep=self._sleep,
            )
        except Exception as exc:
            warn(self._attempts - 1, exc)
            outcome.failures.append(f"{tsa.name}: {_reason(exc)}")
            return
        gen_ms = int(verified.gen_time.timestamp() * 1000)
        anchor = Anchor(size=size, tsa=tsa.name, token=token, gen_time_ms=gen_ms)
        self._log.put_anchor(anchor)
        outcome.anchors.append(anchor)
        _log.info("anchored size %d with %s at %s", size, tsa.name, verified.gen_time)


def _reason(exc: Exception) -> str:
    """Why a TSA failed; an error we did not name (a TSA's garbage) is still only its failure."""
    text = str(exc) if isinstance(exc, LedgerError) else f"unexpected {type(exc).__name__}: {exc}"
    return redact_text(text)  # it reaches the log and AnchorNow's reply


class AnchorSchedule:
    """Runs an ``Anchorer`` on its own thread: every ``interval`` seconds and on demand."""

    def __init__(self, anchorer: Anchorer, *, interval: float) -> None:
        self.anchorer = anchorer
        self._interval = interval
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-anchor")
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the periodic task (an interval of 0 disables it; ``anchor_now`` still works)."""
        if self._interval > 0:
            self._task = asyncio.create_task(self._loop(), name="ledger-anchor")

    async def anchor_now(self) -> AnchorOutcome:
        """One run, on the anchoring thread (never the writer thread)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self.anchorer.anchor_latest)

    async def stop(self) -> None:
        """Cancel the periodic task; a run in progress finishes on its thread."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._thread.shutdown(wait=False, cancel_futures=True)

    async def _loop(self) -> None:
        while True:  # a periodic run, not a retry: a failed run waits for the next interval
            await asyncio.sleep(self._interval)
            await self._run_logged()

    async def _run_logged(self) -> None:
        try:
            outcome = await self.anchor_now()
        except Exception as exc:  # a broken TSA or a full disk must not kill the server
            _log.error("anchoring run failed: %s", redact_text(str(exc)))
            return
        for failure in outcome.failures:
            _log.warning("anchoring size %d: %s", outcome.size, failure)
