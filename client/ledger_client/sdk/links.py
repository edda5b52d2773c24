"""Data-flow lineage in the SDK: what a record's ``parent_digests`` name, and why.

docs/design.md "Decision record (v1)": ``parent_digests`` link records by digest, so the graph is
tamper-evident. In a run opened with ``links="data"`` (the default) the parents are the record's
real dependencies, not the records that merely came before it:

* ``parents=[...]`` given to ``@decision`` or ``emit``: records (``RunEntry``,
  ``DecisionRecord``), receipts, digests (32 bytes or 64 hex digits), or values returned by
  decorated calls. A digest may be that of a record in another run (a cross-run link); the
  verifier reports such parents as external and ``ledger-verify lineage`` resolves them across
  run files.
* A value returned by a decorated call carries its record's digest (``ValueLinks``: by object
  identity, for the life of the run), so passing it (or a list, tuple, set or dict holding it)
  to a later decorated call makes that record a parent. ``None``, booleans and numbers are not
  tracked: they are shared objects, so identity says nothing about where they came from.
* Records emitted inside a decorated call are parents of the call's record (it rests on them).

Step order is unchanged (``run_closed`` still lists every step); lineage is the parent graph.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ledger.records.decision import DecisionRecord, record_digest

__all__ = ["ParentsSpec", "ValueLinks", "parent_digest", "parent_digests"]

ParentsSpec = Iterable[object] | Callable[[Mapping[str, Any]], Iterable[object]] | None
_UNTRACKED = (type(None), bool, int, float, complex)
_HEX = frozenset("0123456789abcdef")


class ValueLinks:
    """Values returned by decorated calls, by identity, with their records' hex digests.

    Holds a reference to each value so that its ``id`` stays unique while the run is open;
    ``clear`` (called when the run closes) drops them all.
    """

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[object, str]] = {}
        self._lock = threading.Lock()

    def track(self, value: object, digest: str) -> None:
        """Remember that ``value`` came out of the record ``digest`` (untracked types: no-op)."""
        if isinstance(value, _UNTRACKED):
            return
        with self._lock:
            self._by_id[id(value)] = (value, digest)

    def digest_of(self, value: object) -> str | None:
        """The hex digest of the record that returned this very object, if any."""
        with self._lock:
            found = self._by_id.get(id(value))
        return found[1] if found is not None and found[0] is value else None

    def found_in(self, arguments: Mapping[str, Any]) -> list[str]:
        """Digests of tracked values among ``arguments`` and one level inside containers."""
        out: list[str] = []
        for value in arguments.values():
            for candidate in (value, *_members(value)):
                digest = self.digest_of(candidate)
                if digest is not None and digest not in out:
                    out.append(digest)
        return out

    def clear(self) -> None:
        with self._lock:
            self._by_id.clear()


def _members(value: object) -> Iterable[object]:
    if isinstance(value, list | tuple | set | frozenset):
        return value
    if isinstance(value, Mapping):
        return value.values()
    return ()


def parent_digest(parent: object, links: ValueLinks | None = None) -> str:
    """The hex record digest that ``parent`` names (module docstring lists what is accepted)."""
    digest = getattr(parent, "digest", None)  # RunEntry
    if isinstance(digest, bytes) and isinstance(getattr(parent, "record", None), DecisionRecord):
        return digest.hex()
    if isinstance(parent, DecisionRecord):
        return record_digest(parent).hex()
    given = getattr(parent, "record_digest", None)  # Receipt
    if isinstance(given, bytes) and len(given) == 32:
        return given.hex()
    if isinstance(parent, bytes) and len(parent) == 32:
        return parent.hex()
    if isinstance(parent, str) and len(parent) == 64 and set(parent) <= _HEX:
        return parent
    tracked = links.digest_of(parent) if links is not None else None
    if tracked is not None:
        return tracked
    raise TypeError(
        f"parents: {type(parent).__name__} {parent!r:.60} names no record (want a record, a "
        "receipt, a 32-byte or 64-hex digest, or a value returned by a decorated call)"
    )


def parent_digests(parents: Iterable[object], links: ValueLinks | None = None) -> tuple[str, ...]:
    """``parent_digest`` of each, without repeats, in the order given."""
    out: list[str] = []
    for parent in parents:
        digest = parent_digest(parent, links)
        if digest not in out:
            out.append(digest)
    return tuple(out)
