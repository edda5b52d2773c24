"""Start checks against the published high-water mark, and leaving read-only mode after a
forced restore (``ledger restore``; docs/operating.md "Faults, rollbacks and restore").

On open the durable tree must reach the mark's size and have the mark's root there. If not, the
data dir was rolled back (a damaged WAL salvaged, a backup restored) or is another log's, and
the log refuses to serve, saying what happened and what the operator may do. An operator who
accepts the rollback (``ledger restore accept``) records it in the mark: the log then serves
reads, refuses appends and signs nothing, until the missing entries are put back verbatim
(``ledger restore catch-up``) and rebuild the mark's root.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ledger.core import merkle
from ledger.core.errors import DataLossError, InvalidArgumentError
from ledger.core.types import PublishedCheckpoint
from ledger.log.highwater import HighWaterMark, MarkState
from ledger.log.integrator import Integrator
from ledger.log.publisher import Publisher

if TYPE_CHECKING:
    from ledger.log.facade import Log

__all__ = ["check_against_mark", "leave_read_only"]

_log = logging.getLogger("ledger.recovery")

CATCH_UP_BATCH = 10_000


def _restore_hint(mark: HighWaterMark) -> str:
    return (
        "What you can do: restore a newer copy of the data dir; or accept this tree as it is "
        "with `ledger restore accept` (the log then serves reads but takes no appends and signs "
        "nothing) and bring back the missing entries with `ledger restore catch-up "
        f"--from-data-dir COPY`. Never delete the mark {mark.path} to make the log start: it is "
        "the only record of what was published"
    )


def check_against_mark(log: Log, mark: HighWaterMark, publisher: Publisher) -> str | None:
    """Refuse a tree behind or off the mark; return why the log is read-only, or None."""
    state = mark.read()
    if state is None:  # a new log, or a data dir from before marks: start one from the store
        latest = publisher.latest
        if latest is not None:
            _log.warning(
                "no high-water mark at %s: recording checkpoint %d", mark.path, latest.size
            )
            mark.write(MarkState(checkpoint=latest))
        return None
    cp = state.checkpoint
    if cp.origin != publisher.origin:
        raise DataLossError(
            f"the high-water mark {mark.path} is for log {cp.origin!r}, not {publisher.origin!r}: "
            "point [log] mark_file at this log's mark"
        )
    if log.size < cp.size:
        why = (
            f"the tree in the data dir has {log.size} entries, but a checkpoint of size "
            f"{cp.size} (root {cp.root_hash.hex()}) was published (high-water mark {mark.path}); "
            "the data dir was rolled back (a damaged WAL, or a restored backup)"
        )
        if state.restore is None:
            raise DataLossError(
                f"{why}. The log refuses to serve, so that no size is ever signed "
                f"twice with different roots. {_restore_hint(mark)}"
            )
        _log.warning(
            "read-only: %s; restore accepted at tree size %d", why, state.restore.tree_size
        )
        return f"the log is read-only: {why}; run `ledger restore catch-up` to bring it back"
    if log.root_at(cp.size) != cp.root_hash:
        raise DataLossError(
            f"the tree in the data dir is not the one that was published: at size {cp.size} its "
            f"root is {log.root_at(cp.size).hex()}, the published checkpoint's (high-water mark "
            f"{mark.path}) is {cp.root_hash.hex()}. This data dir is another log's, or damaged; "
            "restore the right copy (catching up cannot repair a different history)"
        )
    _adopt_mark(mark, state, publisher)
    return None


def _adopt_mark(mark: HighWaterMark, state: MarkState, publisher: Publisher) -> None:
    """The tree is consistent with the mark: store the mark's checkpoint if the store lacks it
    (a crash between the mark and the store, or a restored copy), and clear a restore record."""
    latest = publisher.latest
    if latest is None or latest.size < state.checkpoint.size:
        publisher.adopt(state.checkpoint)
    if state.restore is not None:
        _log.warning("the tree is consistent with the high-water mark again: read-write")
        mark.write(MarkState(checkpoint=state.checkpoint))


def leave_read_only(
    log: Log, mark: HighWaterMark, leaves: Sequence[bytes], integrator: Integrator
) -> PublishedCheckpoint:
    """Commit ``leaves`` verbatim after the tree once they rebuild the mark's root; clear the
    restore record. The leaves are checked before any is stored."""
    state = mark.read()
    if state is None:
        raise InvalidArgumentError(f"catch-up: no high-water mark at {mark.path}")
    cp = state.checkpoint
    need = cp.size - integrator.size
    if len(leaves) < need:
        raise InvalidArgumentError(
            f"catch-up: {len(leaves)} leaves given, {need} needed to reach size {cp.size}"
        )
    trial = integrator.compact.copy()
    trial.extend([merkle.leaf_hash(leaf) for leaf in leaves[:need]], with_leaves=False)
    if trial.root() != cp.root_hash:
        raise DataLossError(
            f"catch-up: the given leaves rebuild root {trial.root().hex()} at size {cp.size}, "
            f"not the published {cp.root_hash.hex()}: the source is not this log; nothing stored"
        )
    for at in range(0, len(leaves), CATCH_UP_BATCH):
        log.commit_leaves(integrator.size, leaves[at : at + CATCH_UP_BATCH])
    mark.write(MarkState(checkpoint=cp))
    _log.warning("caught up to the high-water mark (size %d): read-write again", cp.size)
    return cp
