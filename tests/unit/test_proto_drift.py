"""The committed generated code equals what ``tools/gen_proto.py`` makes from ``proto/``."""

from __future__ import annotations

from pathlib import Path

from tools import gen_proto


def test_generated_code_matches_proto(tmp_path: Path) -> None:
    for fresh in gen_proto.generate(tmp_path):
        committed = gen_proto.ROOT / "ledger" / "v1" / fresh.name
        assert committed.read_bytes() == fresh.read_bytes(), (
            f"{committed} drifted from proto/: run `make proto` and commit the result"
        )
