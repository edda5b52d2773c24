"""The public vectors the tests use, kept in ``tests/testdata`` (sources in its PROVENANCE)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TESTDATA = Path(__file__).resolve().parent / "testdata"
TESSERA_LOG = TESTDATA / "tessera-log"


def load_vectors(name: str) -> dict[str, Any]:
    """Load ``tests/testdata/<name>``; a missing file is an error, never a skip."""
    data: dict[str, Any] = json.loads((TESTDATA / name).read_text())
    return data
