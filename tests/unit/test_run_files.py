"""``run_paths`` finds in a folder exactly the run files ``rglob`` and ``is_file`` find: nested
folders, a link to a file, not a link to a folder, no private disclosures file, no folder or dot
file named like a run, sorted as paths."""

from __future__ import annotations

from pathlib import Path

from ledger_client.audit.run_files import PRIVATE_SUFFIX, run_paths


def test_the_run_files_of_a_folder(tmp_path: Path) -> None:
    top = tmp_path / "runs"
    for name in ("b.jsonl", "a/c.jsonl", "a-b.jsonl", "a/deep/d.jsonl", f"x{PRIVATE_SUFFIX}",
                 "notes.json", ".jsonl", "a/e.JSONL"):  # fmt: skip
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_text("{}\n")
    (top / "folder.jsonl").mkdir()
    (top / "linked.jsonl").symlink_to(top / "b.jsonl")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "z.jsonl").write_text("{}\n")
    (top / "elsewhere").symlink_to(outside, target_is_directory=True)
    found = list(run_paths([str(top)]))
    expected = sorted(
        p for p in top.rglob("*.jsonl") if p.is_file() and p.suffix == ".jsonl"
        and not p.name.endswith(PRIVATE_SUFFIX)
    )  # fmt: skip
    assert found == expected
    names = ["a/c.jsonl", "a/deep/d.jsonl", "a-b.jsonl", "b.jsonl", "linked.jsonl"]
    assert [p.relative_to(top).as_posix() for p in found] == names
