"""The auditor walk-through of docs/auditing.md, run for real: the agent from that page against
``ledger serve`` (a subprocess), then every command of its command block, in a shell."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger.core.checkpoint import Ed25519Signer
from ledger.fileio.keys import write_signer
from tests import processes
from tests.harness import ORIGIN, ServerProcess

pytestmark = pytest.mark.integration
AUDITING = Path(__file__).resolve().parents[2] / "docs" / "auditing.md"


def block(marker: str) -> str:
    """The fenced code block right after ``<!-- audit-walkthrough:MARKER -->``."""
    text = AUDITING.read_text()
    found = re.search(rf"<!-- audit-walkthrough:{marker} -->\n```\w+\n(.*?)```", text, re.S)
    assert found, f"docs/auditing.md has no audit-walkthrough:{marker} block"
    return found.group(1)


def timeline_rows(out: str) -> list[list[str]]:
    """The cells of the first ``--timeline`` table in ``out`` (cells are 2+ spaces apart; the
    indented lines under a row say what the record decided)."""
    lines = out[out.index("timeline:") :].splitlines()[2:]
    rows = []
    for line in lines:
        if line.startswith("      "):
            continue
        if not line[:1].isdigit():
            break
        rows.append(re.split(r"  +", line.strip()))
    return rows


def run_block(tmp_path: Path, agent: str, commands: str) -> Any:
    """``agent`` as a file, then ``commands`` in bash against a fresh ``ledger serve``."""
    (tmp_path / f"{agent.replace('-', '_')}.py").write_text(block(agent))
    signer = Ed25519Signer.generate(ORIGIN)
    write_signer(tmp_path / "signer.key", signer)
    server = ServerProcess(tmp_path / "data", tmp_path / "signer.key")
    try:
        bin_dir = str(Path(sys.executable).parent)
        env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "LEDGER": server.address,
            "VKEY": server.ready["verifier_key"],
        }
        return processes.run(
            ["bash", "-euo", "pipefail", "-c", block(commands)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    finally:
        server.terminate()


def test_audit_walkthrough_what_the_log_cannot_see(tmp_path: Path) -> None:
    """docs/auditing.md "What the log cannot see: late, postdated, relabelled, unlinked": each
    check catching its case."""
    done = run_block(tmp_path, "checks-agent", "checks")
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, err + out
    honest = timeline_rows(out)
    assert "inputs not linked" in honest[0][-1] and honest[1][6] == "#0 (inferred)", honest
    assert all(r[-1].startswith("yes") for r in honest)
    assert all("late" not in r[-1] for r in honest)
    assert out.count("late by 1 d") == 6  # the backdated re-run: every record, a warning
    assert "rerun: exit 1" in out and "postdated: exit 1" in out
    assert "relabelled: exit 1" in out and "not found: exit 1" in out
    assert err.count("late by 1 d") >= 5 and "postdated: claimed" in err
    assert "source not found" in err and "1 run(s) not verified" in err
    assert "OK: lineage verified" in out and "runs examined: 1 (0 not verified)" in out


def test_readme_audit_walkthrough(tmp_path: Path) -> None:
    (tmp_path / "audit_agent.py").write_text(block("agent"))
    signer = Ed25519Signer.generate(ORIGIN)
    write_signer(tmp_path / "signer.key", signer)
    # the embedded TSA anchors on a short schedule, so the anchors block ends with
    # `ledger-verify run --tsa-root` passing on the SDK's run file after `receipt upgrade --wait`
    server = ServerProcess(
        tmp_path / "data", tmp_path / "signer.key", "--embedded-tsa", "--anchor-interval-s", "3"
    )
    try:
        bin_dir = str(Path(sys.executable).parent)
        env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "LEDGER": server.address,
            "VKEY": server.ready["verifier_key"],
            "TSA_ROOT": server.ready["embedded_tsa_root"],
        }
        done = processes.run(
            ["bash", "-euo", "pipefail", "-c", block("commands")],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr + done.stdout
        anchored = processes.run(
            ["bash", "-euo", "pipefail", "-c", block("anchors")],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    finally:
        server.terminate()
    assert anchored.returncode == 0, anchored.stderr + anchored.stdout
    last = anchored.stdout[anchored.stdout.rindex("OK: run verified") :]
    assert "anchors:       not checked" not in last  # checked, with the TSA's root
    upgraded = [json.loads(line) for line in (tmp_path / "runs" / "support.jsonl").open()]
    assert upgraded and all(item["receipt"]["anchors"] for item in upgraded)
    out = done.stdout
    # the timeline: the refund rests on its plan, which rests on the untrusted memory write
    rows = timeline_rows(out)
    assert rows[1][4:7] == ["memory_write", "remember <- web", "#0 (inferred)"], rows
    assert rows[1][-1] == "yes", rows
    assert rows[4][4:7] == ["parameter_construction", "refund", "#1 (inferred)"], rows
    assert rows[3][4:7] == ["constraint_check", "policy-loaded passed", "#2 (inferred)"], rows
    assert rows[5][6] == "#4" and "inputs not linked" in rows[0][-1]  # the fetch's URL
    # the lineage of the tainted write reaches the reviewer's run
    lineage = out[out.index("OK: lineage verified") : out.index("OK: report verified")]
    assert "tool_call refund" in lineage and "agent reviewer" in lineage
    assert "policy" not in lineage and "fetch_page" not in lineage
    html = (tmp_path / "report.html").read_text()
    assert "all 2 run(s) verified" in html and "support-bot" in html
    assert "memory_write" in out and "untrusted" in out  # the query
    assert 'parameters.url = "https://forum.example/refunds"' in out
    private = tmp_path / "runs" / "support.disclosures.jsonl"
    assert private.stat().st_mode & 0o077 == 0
    assert "forum.example" not in (tmp_path / "runs" / "support.jsonl").read_text()
