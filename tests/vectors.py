"""Access to the public probe vectors in ``../shared/vectors`` (read at run time, never copied)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT.parent / "shared" / "vectors"


def load_vectors(name: str) -> dict[str, Any]:
    """Load ``../shared/vectors/<name>``; skip the test cleanly when the folder is absent."""
    path = VECTORS / name
    if not path.is_file():
        pytest.skip(f"public probe vectors not found at {path} (../shared/vectors is absent)")
    data: dict[str, Any] = json.loads(path.read_text())
    return data
