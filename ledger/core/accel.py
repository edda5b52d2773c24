"""The one selector between the compiled core (``ledger.core._hot``, C) and its pure twin
(``ledger.core.hot``): everything on the append hot path calls the functions named here.

It also selects the compiled strict JSON reader and canonical writer
(``ledger.core._strictjson``, C) behind ``ledger.core.jcs`` and the run reader: ``json_read``,
``json_dump``, ``hashes_b64`` and ``same_json`` are None when it is not built or
``LEDGER_PURE=1`` is set, and their pure twins (jcs's plain Python path, the receipt and run
readers' own) then do everything (``JSON_CORE`` says which runs).

And it selects the compiled fast reading of a decision record (``ledger.core._recordread``,
C): ``record_configure``, ``record_parse`` and ``record_read`` are None when it is not built or
``LEDGER_PURE=1`` is set, and ``ledger.records.decision``'s own fast reading (its twin) then
reads every record (``RECORD_CORE`` says which runs). The records package configures it with
its classes and readers (the core imports nothing of ``ledger.records``).

The compiled module is used when it was built (a regular install, or ``make native`` in a
checkout) unless ``LEDGER_PURE=1`` forces the twin; ``CORE`` says which one runs ("native" or
"pure"): the server's start line and the ``ledger_core_info`` metric show it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ledger.core import hot

__all__ = [
    "CORE",
    "JSON_CORE",
    "RECORD_CORE",
    "bundle_digests",
    "bundle_leaf_hashes",
    "compact_extend",
    "compact_root",
    "dedup_count",
    "dedup_find",
    "dedup_find_fps",
    "dedup_fingerprints",
    "dedup_insert",
    "dedup_insert_fps",
    "dedup_rehash",
    "hashes_b64",
    "index_values",
    "json_dump",
    "json_read",
    "native_error",
    "present",
    "record_configure",
    "record_error",
    "record_parse",
    "record_read",
    "same_json",
    "sequence_plain",
    "split_hashes",
]


def _compiled(name: str, what: str) -> tuple[ModuleType | None, str | None]:
    """The compiled module ``ledger.core.<name>``, or None and why its pure twin runs."""
    if os.environ.get("LEDGER_PURE", "") not in ("", "0"):
        return None, "LEDGER_PURE is set"
    try:
        return importlib.import_module(f"ledger.core.{name}"), None
    except ImportError as exc:
        return None, f"{what} is not built ({exc})"


_native, native_error = _compiled("_hot", "the compiled core")
"""Why the pure twin runs (None when the compiled core does)."""
_core: ModuleType = hot if _native is None else _native

CORE: str = _core.CORE
# typed as the twin's functions (the compiled ones have the same signatures, ``_hot.pyi``)
sequence_plain = hot.sequence_plain
compact_extend = hot.compact_extend
compact_root = hot.compact_root
split_hashes = hot.split_hashes
index_values = hot.index_values
present = hot.present
bundle_leaf_hashes = hot.bundle_leaf_hashes
bundle_digests = hot.bundle_digests
dedup_insert = hot.dedup_insert
dedup_find = hot.dedup_find
dedup_rehash = hot.dedup_rehash
dedup_fingerprints = hot.dedup_fingerprints
dedup_insert_fps = hot.dedup_insert_fps
dedup_find_fps = hot.dedup_find_fps
dedup_count = hot.dedup_count
if _core is not hot:
    sequence_plain = _core.sequence_plain
    compact_extend = _core.compact_extend
    compact_root = _core.compact_root
    split_hashes = _core.split_hashes
    index_values = _core.index_values
    present = _core.present
    bundle_leaf_hashes = _core.bundle_leaf_hashes
    bundle_digests = _core.bundle_digests
    dedup_insert = _core.dedup_insert
    dedup_find = _core.dedup_find
    dedup_rehash = _core.dedup_rehash
    dedup_fingerprints = _core.dedup_fingerprints
    dedup_insert_fps = _core.dedup_insert_fps
    dedup_find_fps = _core.dedup_find_fps
    dedup_count = _core.dedup_count


_json, json_error = _compiled("_strictjson", "the compiled JSON reader")
"""Why jcs reads and writes JSON on its plain Python path (None when the compiled one runs)."""

JSON_CORE: str = "pure" if _json is None else "native"
json_read: Callable[[Any, bool], tuple[Any, bool] | None] | None = (
    None if _json is None else _json.read
)
"""``_strictjson.read(data, safe_numbers)``: ``jcs.loads_exact``'s answer, or None when the
plain path must decide (any problem, so that path names it)."""
json_dump: Callable[[Any], bytes | None] | None = None if _json is None else _json.dump_exact
"""``_strictjson.dump_exact(value)``: ``jcs.canonical_exact``'s sorted compact JSON of an exact
value, or None when ``json.dumps`` must write it."""
hashes_b64: Callable[[Any], tuple[bytes, ...] | None] | None = (
    None if _json is None else _json.hashes_b64
)
"""``_strictjson.hashes_b64(value)``: a non-empty list of canonical base64 32-byte hashes
decoded, or None when the receipt reader's own path must read (and name) it."""
same_json: Callable[[Any, Any], bool | None] | None = None if _json is None else _json.same_json
"""``_strictjson.same_json(a, b)``: whether two parsed values are the same JSON value (types
included, member order not), or None when the run reader's own comparison must decide."""


_records, record_error = _compiled("_recordread", "the compiled record reader")
"""Why ``ledger.records.decision`` reads records on its own fast reading (None when the
compiled one runs)."""

RECORD_CORE: str = "pure" if _records is None else "native"
record_configure: Callable[[dict[str, Any]], None] | None = (
    None if _records is None else _records.configure
)
"""``_recordread.configure(config)``: the record classes, caches and the twin's readers (given
by ``ledger.records.decision`` when it is imported)."""
record_parse: Callable[[Any], dict[str, Any] | None] | None = (
    None if _records is None else _records.parse
)
"""``_recordread.parse(value)``: ``decision._parse_record_fast``'s answer (the arguments, None,
or its exception)."""
record_read: Callable[[Any], Any] | None = None if _records is None else _records.record
"""``_recordread.record(value)``: ``decision._record_fast``'s answer (the record, None, or its
exception)."""


def cores() -> dict[str, str]:
    """The core each compiled part runs on ("native" or its pure twin): the append path, the
    strict JSON reader and the typed record reader (``ledger serve``'s start line, the
    ``ledger_core_part`` gauge)."""
    return {"append": CORE, "json": JSON_CORE, "record": RECORD_CORE}


def pure_reasons() -> dict[str, str]:
    """Why each part that runs its pure twin does (empty when all are compiled)."""
    reasons = {"append": native_error, "json": json_error, "record": record_error}
    return {part: why for part, why in reasons.items() if why is not None}
