"""Issue 21 items 2-4 as a careless or dishonest agent would behave, through every auditor's
view (``run``, ``run --timeline``, ``report --html``, ``lineage``, text and ``--json``): the log's
time beside the agent's (a one-day backdated re-run, a spool re-send within the delay, a
postdated record), steps whose inputs are not linked, and ``lineage`` that claims nothing over
a relabelled, missing or damaged source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from ledger.records.decision import record_digest
from ledger_client.cli.main import main
from tests.audit_world import build, tamper, write_runs
from tests.verdict_world import agent_records, write_run

DAY = 86400


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def invoke_json(*args: str) -> tuple[int, dict[str, Any]]:
    code, out = invoke(*args, "--json")
    return code, json.loads(out)


def views(path: Path, trust: dict[str, str], html: Path, *extra: str) -> dict[str, Any]:
    """Every view of one run file: exit codes, texts and JSON."""
    base = ["--key", trust["key"], "--tsa-root", trust["root"], *extra]
    start = json.loads(path.read_text().splitlines()[0])["record"]
    digest = record_digest_of(start)
    got: dict[str, Any] = {}
    got["run"] = invoke("run", str(path), *base)
    got["run_json"] = invoke_json("run", str(path), *base)
    got["timeline"] = invoke("run", str(path), *base, "--timeline")
    got["timeline_json"] = invoke_json("run", str(path), *base, "--timeline")
    got["report"] = invoke("report", str(path), *base, "--html", str(html))
    got["html"] = html.read_text()
    got["lineage"] = invoke("lineage", str(path), *base, "--from", digest)
    got["lineage_json"] = invoke_json("lineage", str(path), *base, "--from", digest)
    return got


def record_digest_of(obj: dict[str, Any]) -> str:
    from ledger.records.decision import DecisionRecord

    return record_digest(DecisionRecord.from_json_obj(obj)).hex()


def test_a_backdated_rerun_is_late_by_one_day_in_every_view(tmp_path: Path) -> None:
    records = agent_records(-DAY)  # a cleaned re-run, its clock set back one day
    path = tmp_path / "rerun.jsonl"
    trust = write_run(path, records)
    got = views(path, trust, tmp_path / "r.html")
    n = len(records)
    code, text = got["run"]
    assert code == 0 and text.count("late by 1 d") == n, text
    code, out = got["run_json"]
    times = [r["verdict"]["checks"][0] for r in out["records_checked"]]
    assert [(t["name"], t["status"]) for t in times] == [("time", "warning")] * n
    assert all(t["message"].startswith("late by 1 d") for t in times)
    assert all(r["time_difference_ms"] == DAY * 1000 + 1000 for r in out["records_checked"])
    code, text = got["timeline"]
    rows = [line for line in text.splitlines() if line.startswith(tuple("0123456789"))]
    assert code == 0 and len(rows) == n and all("+1 d" in r and "late by 1 d" in r for r in rows)
    code, out = got["timeline_json"]
    assert all(
        any(c["message"].startswith("late by 1 d") for c in r["verdict"]["checks"])
        for r in out["timeline"]
    )
    code, _ = got["report"]
    assert code == 0 and got["html"].count("late by 1 d") >= n
    code, out = got["lineage_json"]
    assert code == 0 and all("late by 1 d" in " ".join(r["warnings"]) for r in out["records"])
    # the auditor's policy: more than 10 minutes late fails, in every view
    strict = views(path, trust, tmp_path / "s.html", "--max-delay", "10m")
    for name in ("run", "timeline", "report", "lineage"):
        assert strict[name][0] == 1, (name, strict[name][1])
    code, out = strict["run_json"]
    assert code == 1 and {p["code"] for p in out["problems"]} == {"late"}
    assert len(out["problems"]) == n
    assert "NOT VERIFIED" in strict["html"] and "late by 1 d" in strict["html"]
    code, _ = invoke(
        "run", str(path), "--key", trust["key"], "--max-delay", "10m", "--late", "warn"
    )
    assert code == 0
    code, out = invoke_json("run", str(path), "--key", trust["key"], "--max-delay", "soon")
    assert code == 2 and "want a duration" in out["error"]


def test_the_index_stores_the_time_beside_the_claim(tmp_path: Path) -> None:
    records = agent_records(-DAY)
    path = tmp_path / "runs" / "rerun.jsonl"
    trust = write_run(path, records)
    db = str(tmp_path / "audit.sqlite")
    code, text = invoke("index", str(path.parent), "--db", db, "--key", trust["key"])
    assert code == 0, text
    code, out = invoke_json("query", "--db", db)
    assert code == 0 and len(out["records"]) == len(records)
    for row in out["records"]:
        assert row["time_difference_ms"] == DAY * 1000 + 1000
        time = next(c for c in row["verdict"]["checks"] if c["name"] == "time")
        assert time["status"] == "warning" and time["message"].startswith("late by 1 d")
    code, text = invoke("query", "--db", db)
    assert text.count("late by 1 d") == len(records) and text.count("+1 d") == len(records)


def test_a_spool_resend_within_the_delay_shows_nothing(tmp_path: Path) -> None:
    records = agent_records(-20 * 60)  # spooled while the log was down, sent 20 minutes later
    path = tmp_path / "resent.jsonl"
    got = views(path, write_run(path, records), tmp_path / "r.html")
    for name in ("run", "timeline", "report", "lineage"):
        assert got[name][0] == 0, got[name][1]
        assert "late" not in got[name][1]
    assert "late" not in got["html"]
    code, out = got["run_json"]
    assert code == 0
    assert all(r["verdict"]["checks"][0]["status"] == "ok" for r in out["records_checked"])
    assert out["records_checked"][0]["time_difference_ms"] == 20 * 60 * 1000 + 1000


def test_a_postdated_record_fails_in_every_view(tmp_path: Path) -> None:
    records = agent_records(3600)  # claims a time an hour after the log logged it
    path = tmp_path / "postdated.jsonl"
    got = views(path, write_run(path, records), tmp_path / "r.html")
    for name in ("run", "timeline", "report", "lineage"):
        assert got[name][0] == 1 and "postdated" in got[name][1], (name, got[name][1])
    code, out = got["run_json"]
    assert code == 1 and {p["code"] for p in out["problems"]} == {"postdated"}
    assert "postdated" in got["html"] and "NOT VERIFIED" in got["html"]


def test_an_unlinked_step_is_flagged_in_all_four_views(tmp_path: Path) -> None:
    records = agent_records(0)
    path = tmp_path / "honest.jsonl"
    got = views(path, write_run(path, records), tmp_path / "r.html")
    fetch = records[0]  # its URL came from nowhere the SDK could follow
    assert fetch.parent_digests == () and fetch.parameters
    linked = [r for r in records[1:] if r.kind != "run_closed"]
    assert all(r.parent_digests for r in linked)  # every other step links its inputs
    code, text = got["run"]
    assert code == 0 and text.count("inputs not linked") == 1
    assert "lineage: step 0" in text
    code, text = got["timeline"]
    row = next(line for line in text.splitlines() if line.startswith("0 "))
    assert "inputs not linked" in row
    assert got["report"][0] == 0 and "inputs not linked" in got["html"]
    code, out = got["lineage_json"]
    assert code == 0 and out["not_linked"] == [record_digest(fetch).hex()]
    assert "inputs not linked" in got["lineage"][1]
    # inferred links are shown as inferred: the memory write rests on the page by content
    code, out = got["timeline_json"]
    memory = out["timeline"][1]["parents"]
    assert memory == [
        {"digest": record_digest(fetch).hex(), "step": 0, "derived_by": "content-match"}
    ]
    assert "#0 (inferred)" in got["timeline"][1] and "(inferred)" in got["html"]
    assert "stroke-dasharray" in got["html"]


# --- lineage claims nothing over a run it could not verify --------------------------------


def _tainted(folder: Path, key: str) -> tuple[int, dict[str, Any]]:
    return invoke_json("lineage", str(folder), "--key", key, "--tainted")


def test_tainted_passes_on_the_honest_set(tmp_path: Path) -> None:
    runs = build()
    files = write_runs(tmp_path / "runs", runs)
    code, out = _tainted(files["support"].parent, runs.world.key.key_string())
    assert code == 0 and out["failed_runs"] == [] and len(out["runs"]) == 2
    assert {r["source"] for r in out["runs"]} == {"verified now"}
    assert all(r["verified"] for r in out["runs"]) and len(out["records"]) == 4
    code, text = invoke(
        "lineage", str(files["support"].parent), "--key", runs.world.key.key_string(), "--tainted"
    )
    assert "runs examined: 2 (0 not verified)" in text and "[verified now]" in text


def test_tainted_fails_on_a_relabelled_source(tmp_path: Path) -> None:
    runs = build()
    files = write_runs(tmp_path / "runs", runs)
    lines = files["support"].read_text().splitlines()
    obj = json.loads(lines[1])
    assert obj["record"]["payload"]["trust_label"] == "untrusted"
    obj["record"]["payload"]["trust_label"] = "trusted"  # the poisoned write, relabelled
    lines[1] = json.dumps(obj)
    files["support"].write_text("\n".join(lines) + "\n")
    code, out = _tainted(files["support"].parent, runs.world.key.key_string())
    assert code == 1 and out["records"] == []  # nothing is labelled untrusted any more...
    assert out["failed_runs"] == [str(files["support"])]  # ...but the run does not verify
    code, text = invoke(
        "lineage", str(files["support"].parent), "--key", runs.world.key.key_string(), "--tainted"
    )
    assert code == 1 and "1 run(s) not verified" in text and "NOT VERIFIED" in text


def test_tainted_fails_on_a_missing_source(tmp_path: Path) -> None:
    runs = build()
    files = write_runs(tmp_path / "runs", runs)
    lines = files["support"].read_text().splitlines()
    del lines[1]  # the poisoned write left out of the presented file
    files["support"].write_text("\n".join(lines) + "\n")
    code, out = _tainted(files["support"].parent, runs.world.key.key_string())
    assert code == 1 and out["failed_runs"] == [str(files["support"])]
    run = next(r for r in out["runs"] if r["run_file"] == str(files["support"]))
    assert "missing" in json.dumps(run["verdict"])
    # a --from digest in no file given: "source not found", never "0 records"
    gone = runs.digest(runs.support[1])
    code, out = invoke_json(
        "lineage", str(files["support"].parent), "--key", runs.world.key.key_string(),
        "--from", gone,
    )  # fmt: skip
    assert code == 1 and out["error"].startswith("source not found") and len(out["runs"]) == 2


def test_tainted_fails_on_a_damaged_run(tmp_path: Path) -> None:
    runs = build()
    files = write_runs(tmp_path / "runs", runs)
    tamper(files["support"], line=2)  # the trusted policy read: not on the tainted path
    code, out = _tainted(files["support"].parent, runs.world.key.key_string())
    assert code == 1 and out["failed_runs"] == [str(files["support"])]
    assert out["records"][0]["verified"]  # the tainted write itself still verifies
    refund = runs.digest(runs.support[4])
    for mode in ("--ancestors", "--descendants"):
        code, out = invoke_json(
            "lineage", str(files["support"].parent), "--key", runs.world.key.key_string(),
            "--from", refund, mode,
        )  # fmt: skip
        assert code == 1 and out["failed_runs"] == [str(files["support"])], mode
