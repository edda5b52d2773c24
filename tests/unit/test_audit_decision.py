"""What a record decided, in every view: ``run --timeline`` (text and ``--json``) and the HTML
report show candidates with scores and ranks, the selection and why, expected vs actual, the
outcome status, evidence digests and the model; a committed value shows as ``committed`` and
its content only with the auditor's disclosures file. Runs from ``tests/decision_world``."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger_client.audit.parallel import map_forked
from ledger_client.cli.main import main
from tests.decision_world import (
    DECIDE,
    PROMPT,
    QUERY_TEXT,
    SECRET_ACTION,
    Runs,
    build,
    write,
)


@pytest.fixture(scope="module")
def world() -> Runs:
    return build()


@pytest.fixture
def files(world: Runs, tmp_path: Path) -> dict[str, Path]:
    return write(tmp_path / "runs", world)


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def _timeline(world: Runs, files: dict[str, Path], *extra: str) -> list[dict[str, Any]]:
    code, out = _invoke(
        "run", str(files["decide"]), "--key", world.world.key.key_string(), "--timeline",
        "--json", *extra,
    )  # fmt: skip
    assert code == 0, out
    rows: list[dict[str, Any]] = json.loads(out)["timeline"]
    return rows


def test_json_shows_candidates_scores_ranks_and_the_selection(
    world: Runs, files: dict[str, Path]
) -> None:
    decision = _timeline(world, files)[0]["decision"]
    assert [(c["id"], c["score"], c["rank"], c["selected"]) for c in decision["candidates"]] == [
        ("refund", "0.91", 1, True), ("ask", "0.42", 2, False), ("human", "0.10", 3, False),
    ]  # fmt: skip
    assert decision["selected"] == "refund"
    assert decision["why"] == "top-ranked (rank 1, score 0.91) of 3"
    assert decision["model"] == "gpt-test-1"


def test_json_shows_expected_actual_status_and_evidence(
    world: Runs, files: dict[str, Path]
) -> None:
    rows = _timeline(world, files)
    first, call = rows[0]["decision"], rows[1]["decision"]
    assert first["expected_outcome"] == {"schema": "refund/v2"}
    assert first["actual_outcome"] == {"status": "schema_mismatch", "got": "refund/v1"}
    assert first["outcome_status"] == "schema_mismatch" and rows[0]["outcome"] == "schema_mismatch"
    assert first["evidence"] == {"prompt": PROMPT}
    assert call["outcome_status"] == "met" and len(call["outputs"]) == 1
    assert rows[3]["decision"]["outcome_status"] == "reviewed"


def test_json_and_text_show_duration_tokens_cost_and_model_parameters(
    world: Runs, files: dict[str, Path]
) -> None:
    rows = _timeline(world, files)
    first, call = rows[0]["decision"], rows[1]["decision"]
    assert (first["duration_ms"], first["tokens"], first["cost"]) == (1250, 1500, "0.0150 USD")
    assert first["capture"]["model_parameters"] == {"top_p": 0.9, "max_tokens": 512}
    assert (call["duration_ms"], call["tokens"], call["cost"]) == (None, 120, "0.0025 USD")
    assert rows[2]["decision"]["tokens"] is None and rows[2]["decision"]["cost"] is None
    code, text = _invoke(
        "run", str(files["decide"]), "--key", world.world.key.key_string(), "--timeline"
    )
    assert code == 0
    assert "duration 1250 ms, tokens 1500, cost 0.0150 USD" in text
    assert "model parameters max_tokens=512, top_p=0.9" in text


def test_committed_values_show_as_committed_unless_disclosed(
    world: Runs, files: dict[str, Path]
) -> None:
    closed = _timeline(world, files)[0]["decision"]
    human = closed["candidates"][2]["action"]
    assert set(human) == {"committed"} and human["committed"].startswith("sha256:")
    assert set(closed["parameters"]["query"]) == {"committed"}
    opened = _timeline(world, files, "--disclosures", str(files["private"]))[0]["decision"]
    assert opened["candidates"][2]["action"]["disclosed"] == SECRET_ACTION
    assert opened["parameters"]["query"]["disclosed"] == QUERY_TEXT
    code, text = _invoke(
        "run", str(files["decide"]), "--key", world.world.key.key_string(), "--timeline"
    )
    assert code == 0
    assert "candidate human rank 3 score 0.10: committed" in text
    assert "* candidate refund rank 1 score 0.91" in text and SECRET_ACTION not in text
    assert "outcome status schema_mismatch" in text and "evidence prompt aaaaaaaa" in text


def test_a_wrong_disclosure_stays_closed(world: Runs, files: dict[str, Path]) -> None:
    lines = files["private"].read_text().replace(QUERY_TEXT, "something else")
    files["private"].write_text(lines)
    decision = _timeline(world, files, "--disclosures", str(files["private"]))[0]["decision"]
    assert set(decision["parameters"]["query"]) == {"committed"}


def _report(world: Runs, out: Path, *paths: Path, extra: tuple[str, ...] = ()) -> str:
    code, text = _invoke(
        "report", *map(str, paths), "--key", world.world.key.key_string(), "--html", str(out),
        *extra,
    )  # fmt: skip
    assert code == 0, text
    return out.read_text()


def test_report_shows_the_decision_and_taint(
    world: Runs, files: dict[str, Path], tmp_path: Path
) -> None:
    html = _report(world, tmp_path / "r.html", files["decide"])
    for text in (
        "refund rank 1 score 0.91", "ask rank 2 score 0.42", "human rank 3 score 0.10: committed",
        "selected <b>refund</b>: top-ranked (rank 1, score 0.91) of 3",
        "outcome <b>schema_mismatch",
        "expected {&quot;schema&quot;: &quot;refund/v2&quot;}", "model <b>gpt-test-1</b>",
        "evidence prompt <code>aaaaaaaaaaaaaaaa</code>", "duration 1250 ms", "tokens 1500",
        "cost 0.0150 USD",
    ):  # fmt: skip
        assert text in html, text
    assert SECRET_ACTION not in html
    assert len(re.findall(r'<tr class="down"', html)) == 1  # the outcome resting on the write
    assert "tainted</text>" in html
    opened = _report(world, tmp_path / "o.html", files["decide"],
                     extra=("--disclosures", str(files["private"])))  # fmt: skip
    assert f"{SECRET_ACTION}&quot; (disclosed)" in opened


def test_runs_are_ordered_by_time_and_many_runs_are_paged(
    world: Runs, files: dict[str, Path], tmp_path: Path
) -> None:
    html = _report(world, tmp_path / "one.html", files["fan"], files["chain"], files["decide"])
    order = [html.index(f'id="run-{r}"') for r in (DECIDE,)]
    chain_at = html.index("01a30000-0000-7000-8000-000000000002")
    fan_at = html.index("01a30000-0000-7000-8000-000000000003")
    assert order[0] < chain_at < fan_at  # logged first, shown first, whatever the file order
    many = tmp_path / "many"
    many.mkdir()
    for n in range(21):
        shutil.copy(files["decide"], many / f"copy-{n:02d}.jsonl")
    overview = _report(world, tmp_path / "all.html", many)
    pages = sorted((tmp_path / "all-runs").iterdir())
    assert len(pages) == 21 and overview.count('href="all-runs/run-') == 21
    assert "schema_mismatch" in pages[0].read_text() and "schema_mismatch" not in overview
    assert 'href="../all.html"' in pages[0].read_text()


def test_run_pages_rendered_in_worker_processes_are_the_same_pages(
    world: Runs, files: dict[str, Path], tmp_path: Path
) -> None:
    many = tmp_path / "many"
    many.mkdir()
    for n in range(40):  # enough runs for the pages to be rendered by forked workers
        shutil.copy(files["fan" if n % 2 else "decide"], many / f"copy-{n:02d}.jsonl")
    one = _report(world, tmp_path / "one.html", many, extra=("--workers", "1"))
    two = _report(world, tmp_path / "two.html", many, extra=("--workers", "2"))
    assert one.replace("one-runs/", "two-runs/") == two
    pages_one = sorted((tmp_path / "one-runs").iterdir())
    pages_two = sorted((tmp_path / "two-runs").iterdir())
    assert len(pages_one) == len(pages_two) == 40
    for a, b in zip(pages_one, pages_two, strict=True):
        assert a.read_text().replace("one.html", "two.html") == b.read_text()


def test_map_forked_keeps_order_and_uses_other_processes() -> None:
    here = os.getpid()
    got = map_forked(lambda n: (n * n, os.getpid()), 100, 2)
    assert [v for v, _ in got] == [n * n for n in range(100)]
    assert {pid for _, pid in got} - {here}  # computed in forked workers


def test_shown_in_one_pass_equals_json_then_open() -> None:
    """The report's one-pass view of a record's members (nothing opened) is ``_open`` over
    ``_json``, for every member of every record of the decision world."""
    from ledger_client.audit.decision import _SHOWN, _json, _open, _shown
    from tests.decision_world import build

    world = build()
    records = [r for rs in world.runs.values() for r in rs]
    tricky = {"commitment": {"commitment": "x"}, "a": [{"commitment": 1}, {"b": 2.5}]}
    for value in [*(getattr(r, n, None) for r in records for n in _SHOWN), tricky]:
        assert _shown(value) == _open(_json(value), "p", {})
    assert any(_shown(getattr(r, "parameters", None)) != _json(r.parameters) for r in records)
