"""Issue 26 item 4: the chain verdicts (from the log's tiles) and the agent's signatures in the
auditor's views: ``run`` (and ``--timeline``), ``report`` (HTML and ``--json``), ``index`` and
``query``, against a real log server (RocksDB, gRPC, the HTTP tiles endpoint) with real keys.

A dishonest agent presents a re-run instead of the failing original: every view given
``--tiles``/``--chain-key`` names the withheld run; ``index --agent-key`` stores checked
signatures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from ledger.records.decision import Outcome, ToolCall
from ledger_client.cli.main import main as verify
from ledger_client.sdk.client import LedgerClient
from ledger_client.sdk.context import emit, ledger_run
from tests.harness import ORIGIN, QUICK, running_server

WITHHELD = "is not among the files"


def invoke(*args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(verify, [*args, "--json"])
    return result.exit_code, json.loads(result.output.strip().splitlines()[-1])


def one_run(sdk: LedgerClient, path: Path) -> Path:
    with ledger_run(sdk, agent="bot", receipts=path, links="sequence"):
        emit(ToolCall(tool="search"))
        emit(Outcome(), actual_outcome={"ok": True})
    return path


def chain_of(checks: list[dict[str, Any]]) -> dict[str, Any]:
    return next(c for c in checks if c["name"] == "chain")


def test_a_withheld_run_shows_in_run_report_index_and_query(tmp_path: Path) -> None:
    with running_server(tmp_path / "data") as (server, _, log_signer):
        key, url = log_signer.verifier().key_string(), server.app.tiles_url
        assert url is not None
        made = tmp_path / "bot.key"
        code, out = invoke("agent-key", "create", "views-bot", "--out", str(made))
        assert code == 0, out
        vkey, ck = out["agent_key"], out["chain_key"]
        sdk = LedgerClient(
            server.address, spool=tmp_path / "spool", options=QUICK, register_atexit=False,
            agent_key=made, chain=tmp_path / "bot.chain",
        )  # fmt: skip
        shown = tmp_path / "shown"
        shown.mkdir()
        first = one_run(sdk, shown / "run-0.jsonl")
        one_run(sdk, tmp_path / "run-1-original.jsonl")  # withheld
        rerun = one_run(sdk, shown / "run-2-rerun.jsonl")
        assert sdk.flush(30, checkpoint=True)
        sdk.close()
        trust = ["--key", key, "--origin", ORIGIN]
        scan = ["--tiles", url, "--chain-key", ck]

        # run --timeline: the chain problem, the timeline's step-0 verdict, the text column
        code, report = invoke("run", str(rerun), *trust)
        assert code == 0, report  # without the tiles nothing shows the gap
        assert report["agent"]["signature"]["status"] == "not-checked"
        code, report = invoke("run", str(rerun), *trust, *scan, "--agent-key", vkey, "--timeline")
        assert code == 1, report
        assert [p["code"] for p in report["problems"]] == ["chain"], report
        assert "run #1 of chain" in report["problems"][0]["message"]
        assert WITHHELD in report["problems"][0]["message"]
        assert [g["seq"] for g in report["chain_scan"]["gaps"]] == [0, 1]  # only run #2 given
        step0 = chain_of(report["timeline"][0]["verdict"]["checks"])
        assert step0["status"] == "failed" and WITHHELD in step0["message"], step0
        text = CliRunner().invoke(
            verify, ["run", str(rerun), *trust, *scan, "--agent-key", vkey, "--timeline"]
        )
        assert text.exit_code == 1
        table = text.output[text.output.index("timeline:") :].splitlines()
        assert "key/chain" in table[1], table
        assert "views-bot, chain " in table[2] and " #2 failed" in table[2], table
        code, report = invoke("run", str(first), *trust, *scan)
        assert code == 1 and WITHHELD in report["problems"][0]["message"], report
        # the whole chain presented: no gap
        code, report = invoke("run", str(tmp_path / "run-1-original.jsonl"), *trust, *scan)
        assert code == 1, report  # run #1 alone: runs #0 and #2 are withheld from it
        code, report = invoke("run", str(first), *trust, "--tiles", url)
        assert code == 2 and "--chain-key" in report["error"], report

        # report: the run verdicts in --json, the checks in the HTML
        page = tmp_path / "report.html"
        code, report = invoke("report", str(shown), *trust, *scan, "--html", str(page))
        assert code == 1 and len(report["failing_runs"]) == 2, report
        for verdict in report["verdicts"]:
            chain = chain_of(verdict["checks"])
            assert chain["status"] == "failed" and WITHHELD in chain["message"], chain
        assert [g["seq"] for g in report["chain_scan"]["gaps"]] == [1]
        html = page.read_text()
        assert "run #1 of chain" in html and WITHHELD in html
        code, report = invoke("report", str(shown), *trust, "--html", str(page))
        assert code == 0, report  # without the tiles: chain not checked
        assert WITHHELD not in page.read_text()

        # index: stored verdicts with the chain verdicts and checked signatures; query shows them
        db = str(tmp_path / "audit.sqlite")
        (shown / "broken.jsonl").write_text("not json\n")  # recorded as unreadable, not fatal
        code, report = invoke("index", str(shown), "--db", db, *trust)
        assert code == 1 and report["indexed"] == 2 and report["unreadable"] == 1, report
        code, rows = invoke("query", "--db", db, "--json")
        signatures = {
            c["status"] for r in rows["records"] for c in r["verdict"]["checks"]
            if c["name"] == "signature"
        }  # fmt: skip
        assert signatures == {"not-checked"}, rows
        code, report = invoke("index", str(shown), "--db", db, *trust, *scan, "--agent-key", vkey)
        assert code == 1 and report["skipped"] == 0, report  # new trust inputs: verified again
        assert report["unreadable"] == 1, report
        assert [g["seq"] for g in report["chain_scan"]["gaps"]] == [1]
        code, rows = invoke("query", "--db", db, "--json")
        assert code == 0 and rows["count"] == 6, rows
        signatures = {
            c["status"] for r in rows["records"] for c in r["verdict"]["checks"]
            if c["name"] == "signature"
        }  # fmt: skip
        assert signatures == {"ok"}, rows
        firsts = [r for r in rows["records"] if r["step"] == 0]
        assert len(firsts) == 2
        for row in firsts:
            chain = chain_of(row["verdict"]["checks"])
            assert chain["status"] == "failed" and WITHHELD in chain["message"], row
            assert not row["verified"]
        code, rows = invoke("query", "--db", db, "--status", "failed", "--json")
        assert {r["step"] for r in rows["records"]} == {0}, rows
        code, report = invoke("index", str(shown), "--db", db, *trust, *scan, "--agent-key", vkey)
        assert code == 1 and report["skipped"] == 3, report  # same trust inputs: unchanged
