"""Data-flow lineage in the SDK: what a record's ``parent_digests`` name, and why.

docs/design.md "Decision record (v1)": ``parent_digests`` link records by digest, so the graph is
tamper-evident. In a run opened with ``links="data"`` (the default) the parents are the record's
real dependencies, not the records that merely came before it. A link is *declared* or *exact*:

* Declared: ``parents=[...]`` given to ``@decision`` or ``emit``: records (``RunEntry``,
  ``DecisionRecord``), receipts, digests (32 bytes or 64 hex digits), or values returned by
  decorated calls. A digest may be that of a record in another run (a cross-run link); the
  verifier reports such parents as external and ``ledger-verify lineage`` resolves them across
  run files. ``derived_from(value, *parents)`` (``ledger_client.sdk.decorators``) declares
  where a value the SDK cannot follow came from (a number, a boolean, anything computed).
* Exact, by identity: a mutable value returned by a decorated call (a list, dict, set or an
  object of a class of its own) carries its record's digest (``ValueLinks``, for the life of
  the run), so passing that very object (or a list, tuple, set or dict holding it) to a later
  decorated call makes that record a parent. Immutable values (``None``, booleans, numbers,
  strings, bytes, tuples, enums) are never tracked by identity: Python shares them (interned
  strings, cached small numbers, constants), so identity says nothing about where they came
  from.
* Exact, by content (``content-match``, labelled as inferred in the record:
  ``ledger.records.links``): a whole output of a decorated call, or a whole string field of
  one, of at least ``MIN_MATCH_CHARS`` characters, contained in a string of a later call's
  arguments and found in exactly one output of the run (or in outputs that each rest on the
  one before: a value passed along a chain of calls links to the last of them). An f-string
  built from a tool's output, or a field extracted from it, links; boilerplate that unrelated
  outputs share, and short values, never do.
* Records emitted inside a decorated call are parents of the call's record (it rests on them).

What no tool can detect: an agent that omits its own links, or never emits a step. The
verifier shows every step that took inputs but names no parent as "inputs not linked".

Step order is unchanged (``run_closed`` still lists every step); lineage is the parent graph.
"""

from __future__ import annotations

import contextvars
import enum
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ledger.core.jcs import Json
from ledger.records.decision import DecisionRecord, record_digest
from ledger.records.links import MIN_MATCH_CHARS
from ledger_client.sdk.capture import jsonable

__all__ = [
    "MIN_MATCH_CHARS",
    "ParentsSpec",
    "ValueLinks",
    "parent_digest",
    "parent_digests",
    "pending_derived",
    "strings_in",
    "take_derived",
    "trackable",
]

ParentsSpec = Iterable[object] | Callable[[Mapping[str, Any]], Iterable[object]] | None
_UNTRACKED = (
    type(None), bool, int, float, complex, str, bytes, tuple, frozenset, range, enum.Enum, type,
    types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
)  # fmt: skip
_HEX = frozenset("0123456789abcdef")
# values given to ``derived_from`` that identity cannot follow, for the next decorated call
_DERIVED: contextvars.ContextVar[tuple[tuple[object, tuple[str, ...]], ...]] = (
    contextvars.ContextVar("ledger_derived", default=())
)


def strings_in(value: Json) -> Iterator[str]:
    """Every string in a JSON value (members' values, array items), depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def trackable(value: object) -> bool:
    """Whether identity can follow ``value`` (module docstring: mutable values only)."""
    return not isinstance(value, _UNTRACKED)


def pending_derived(value: object, digests: tuple[str, ...]) -> None:
    """Remember, for the next decorated call in this context, that ``value`` came from
    ``digests`` (``derived_from`` of a value identity cannot follow)."""
    _DERIVED.set((*_DERIVED.get(), (value, digests)))


def take_derived(arguments: Mapping[str, Any]) -> list[str]:
    """The digests ``derived_from`` named for values among ``arguments`` (equal and of the
    same type, or one level inside a container); the pending values are dropped either way."""
    pending = _DERIVED.get()
    if not pending:
        return []
    _DERIVED.set(())
    given = [c for v in arguments.values() for c in (v, *_members(v))]
    out: list[str] = []
    for value, digests in pending:
        if any(_same(value, c) for c in given):
            out += [d for d in digests if d not in out]
    return out


def _same(a: object, b: object) -> bool:
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # an __eq__ that raises says nothing either way
        return False


class ValueLinks:
    """Values returned by decorated calls: mutable ones by identity, and the long strings of
    every output for content matches (module docstring), with their records' hex digests.

    Holds a reference to each tracked value so that its ``id`` stays unique while the run is
    open; ``clear`` (called when the run closes) drops them all.
    """

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[object, tuple[str, ...]]] = {}
        self._outputs: list[tuple[str, tuple[str, ...]]] = []  # (digest, long strings)
        self._parents: dict[str, tuple[str, ...]] = {}  # of the records that returned outputs
        self._by_prefix: dict[str, set[str]] = {}  # first MIN_MATCH_CHARS chars -> long strings
        self._lock = threading.Lock()

    def track(self, value: object, digest: str, parents: tuple[str, ...] = ()) -> None:
        """Remember that ``value`` came out of the record ``digest`` (whose parents are
        ``parents``): by identity when ``trackable``, and its strings of at least
        ``MIN_MATCH_CHARS`` for content matches."""
        if trackable(value):
            self.derive(value, (digest,))
        long = tuple(
            dict.fromkeys(t for t in strings_in(jsonable(value)) if len(t) >= MIN_MATCH_CHARS)
        )
        with self._lock:
            self._parents[digest] = parents
            if long:
                self._outputs.append((digest, long))
                for text in long:
                    self._by_prefix.setdefault(text[:MIN_MATCH_CHARS], set()).add(text)

    def derive(self, value: object, digests: tuple[str, ...]) -> None:
        """Remember by identity that ``value`` came from ``digests`` (``trackable`` only)."""
        with self._lock:
            self._by_id[id(value)] = (value, digests)

    def digests_of(self, value: object) -> tuple[str, ...]:
        """The hex digests of the records this very object came from, if any."""
        with self._lock:
            found = self._by_id.get(id(value))
        return found[1] if found is not None and found[0] is value else ()

    def digest_of(self, value: object) -> str | None:
        """The hex digest of the record that returned this very object, if any."""
        found = self.digests_of(value)
        return found[0] if found else None

    def found_in(self, arguments: Mapping[str, Any]) -> list[str]:
        """Digests of tracked values among ``arguments`` and one level inside containers."""
        out: list[str] = []
        for value in arguments.values():
            for candidate in (value, *_members(value)):
                for digest in self.digests_of(candidate):
                    if digest not in out:
                        out.append(digest)
        return out

    def content_matches(self, arguments: Mapping[str, Any]) -> list[str]:
        """Digests of the outputs one of whose long strings is contained in a string of
        ``arguments`` and in no other output of the run (module docstring)."""
        with self._lock:
            if not self._outputs:
                return []
            given = [t for t in strings_in(jsonable(dict(arguments))) if len(t) >= MIN_MATCH_CHARS]
            contained = self._contained(given)  # one dict lookup per position of the inputs
            if not contained:
                return []
            outputs = list(self._outputs)
            parents = dict(self._parents)
        out: list[str] = []
        for text in sorted(contained):
            found = _one_holder(text, outputs, parents)
            if found is not None and found not in out:
                out.append(found)
        return out

    def _contained(self, given: list[str]) -> set[str]:
        """The long output strings contained in one of ``given`` (found by their prefix)."""
        found: set[str] = set()
        prefixes = self._by_prefix
        for g in given:
            for at in range(len(g) - MIN_MATCH_CHARS + 1):
                for text in prefixes.get(g[at : at + MIN_MATCH_CHARS], ()):
                    if text not in found and g.startswith(text, at):
                        found.add(text)
        return found

    def clear(self) -> None:
        with self._lock:
            self._by_id.clear()
            self._outputs.clear()
            self._parents.clear()
            self._by_prefix.clear()


def _one_holder(
    text: str, outputs: list[tuple[str, tuple[str, ...]]], parents: Mapping[str, tuple[str, ...]]
) -> str | None:
    """The one output holding ``text``: the only one, or the last of outputs that each rest
    on every earlier one holding it (a value passed along); None when unrelated outputs do."""
    holders = [d for d, strings in outputs if any(text in s for s in strings)]
    last = holders[-1]
    above: set[str] = set()
    queue = list(parents.get(last, ()))
    while queue:
        digest = queue.pop()
        if digest not in above:
            above.add(digest)
            queue.extend(parents.get(digest, ()))
    return last if all(h in above for h in holders[:-1]) else None


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
        "receipt, a 32-byte or 64-hex digest, or a mutable value returned by a decorated call)"
    )


def parent_digests(parents: Iterable[object], links: ValueLinks | None = None) -> tuple[str, ...]:
    """``parent_digest`` of each, without repeats, in the order given (a value ``derive``d
    from several records names them all)."""
    out: list[str] = []
    for parent in parents:
        several = links.digests_of(parent) if links is not None else ()
        for digest in several or (parent_digest(parent, links),):
            if digest not in out:
                out.append(digest)
    return tuple(out)
