"""The one selector between the compiled core (``ledger.core._hot``, C) and its pure twin
(``ledger.core.hot``): everything on the append hot path calls the functions named here.

The compiled module is used when it was built (a regular install, or ``make native`` in a
checkout) unless ``LEDGER_PURE=1`` forces the twin; ``CORE`` says which one runs ("native" or
"pure"): the server's start line and the ``ledger_core_info`` metric show it.
"""

from __future__ import annotations

import os
from types import ModuleType

from ledger.core import hot

__all__ = [
    "CORE",
    "bundle_leaf_hashes",
    "compact_extend",
    "compact_root",
    "index_values",
    "native_error",
    "present",
    "sequence_plain",
    "split_hashes",
]


def _select() -> tuple[ModuleType, str | None]:
    if os.environ.get("LEDGER_PURE", "") not in ("", "0"):
        return hot, "LEDGER_PURE is set"
    try:
        from ledger.core import _hot
    except ImportError as exc:
        return hot, f"the compiled core is not built ({exc})"
    return _hot, None


_core, native_error = _select()
"""Why the pure twin runs (None when the compiled core does)."""

CORE: str = _core.CORE
# typed as the twin's functions (the compiled ones have the same signatures, ``_hot.pyi``)
sequence_plain = hot.sequence_plain
compact_extend = hot.compact_extend
compact_root = hot.compact_root
split_hashes = hot.split_hashes
index_values = hot.index_values
present = hot.present
bundle_leaf_hashes = hot.bundle_leaf_hashes
if _core is not hot:
    sequence_plain = _core.sequence_plain
    compact_extend = _core.compact_extend
    compact_root = _core.compact_root
    split_hashes = _core.split_hashes
    index_values = _core.index_values
    present = _core.present
    bundle_leaf_hashes = _core.bundle_leaf_hashes
