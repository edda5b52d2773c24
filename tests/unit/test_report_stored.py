"""``ledger-verify report --db``: a run the index verified (same file, same trust inputs) is
shown from its stored verdict, exactly as a fresh verification shows it; a file changed since
(its hash no longer the index's) is verified again and shown failing. Each receipt is checked
once: the audit equals ``verify_run``'s problems beside a part-by-part check of every receipt."""

from __future__ import annotations

import json
import re
import shutil
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.serialization import Encoding

from ledger.api.tls import make_dev_certs
from ledger_client.audit.index import CacheSpec
from ledger_client.audit.parallel import audit_runs
from ledger_client.audit.report_html import render_pages
from ledger_client.audit.run_files import run_paths
from ledger_client.audit.verdicts import TimePolicy, Verdict
from ledger_client.audit.verify import audit_as_run, audit_run
from ledger_client.cli.audit import make_checker
from ledger_client.cli.main import main
from ledger_client.cli.options import load_certificates
from ledger_client.receipts.run_load import load_run
from ledger_client.receipts.run_verify import verify_run
from ledger_client.receipts.verify import ReceiptChecker
from tests import processes
from tests.decision_world import build, write


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    runs = build()
    folder = tmp_path_factory.mktemp("report")
    files = write(folder / "runs", runs)
    copies = folder / "copies"  # more than a page of runs: the overview and one page per run
    copies.mkdir()
    for n in range(11):  # 33 runs: enough for the forked processes
        for name in ("decide", "chain", "fan"):
            shutil.copy(files[name], copies / f"{name}-{n}.jsonl")
    db = folder / "audit.sqlite"
    key = runs.world.key.key_string()
    root = str(files["root"])
    args = ["index", str(copies), "--db", str(db), "--key", key, "--tsa-root", root]
    result = CliRunner().invoke(main, [*args, "--workers", "1"])
    assert result.exit_code == 0, result.output
    return {"runs": runs, "files": files, "copies": copies, "db": db, "key": key}


def _report(world: dict[str, Any], out: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    extra = extra if "--workers" in extra else (*extra, "--workers", "1")
    root = str(world["files"]["root"])
    args = ["report", str(world["copies"]), "--key", world["key"], "--tsa-root", root,
            "--html", str(out), "--json", *extra]  # fmt: skip
    result = CliRunner().invoke(main, args)
    return result.exit_code, json.loads(result.output)


def _pages(out: Path) -> dict[str, str]:
    folder = out.with_name(out.stem + "-runs")
    return {"overview": out.read_text(), **{p.name: p.read_text() for p in folder.iterdir()}}


def test_stored_verdicts_show_what_a_fresh_verification_shows(
    world: dict[str, Any], tmp_path: Path
) -> None:
    code, fresh = _report(world, tmp_path / "fresh" / "report.html")
    assert code == 0
    code, stored = _report(world, tmp_path / "stored" / "report.html", "--db", str(world["db"]))
    assert code == 0
    sources = {c["source"] for v in stored["verdicts"] for c in v["checks"]}
    assert sources == {"index"}  # every run taken from the index, and saying so
    for v in stored["verdicts"]:
        v["checks"] = [{**c, "source": "verified now"} for c in v["checks"]]
    assert stored["verdicts"] == fresh["verdicts"] and len(fresh["verdicts"]) == 33
    pages = _pages(tmp_path / "fresh" / "report.html")
    from_index = _pages(tmp_path / "stored" / "report.html")
    assert len(pages) == 34 and all(
        "[index]" in p for n, p in from_index.items() if n != "overview"
    )
    assert {n: p.replace("[index]", "[verified now]") for n, p in from_index.items()} == pages


def test_a_file_changed_since_it_was_indexed_is_verified_again(
    world: dict[str, Any], tmp_path: Path
) -> None:
    copies = tmp_path / "copies"
    shutil.copytree(world["copies"], copies)
    target = copies / "chain-3.jsonl"
    lines = target.read_text().splitlines()
    item = json.loads(lines[2])
    proof = item["receipt"]["inclusion_proof"]
    proof[0] = proof[1]  # a wrong inclusion proof: the receipt no longer verifies
    lines[2] = json.dumps(item)
    target.write_text("\n".join(lines) + "\n")
    code, answer = _report({**world, "copies": copies}, tmp_path / "r" / "report.html", "--db",
                           str(world["db"]))  # fmt: skip
    assert code == 1 and len(answer["failing_runs"]) == 1
    (bad,) = [v for v in answer["verdicts"] if v["status"] == "failed"]
    assert {c["source"] for c in bad["checks"]} == {"verified now"}
    assert {c["source"] for v in answer["verdicts"] if v is not bad for c in v["checks"]} == {
        "index"
    }
    page = next(p for p in _pages(tmp_path / "r" / "report.html").values()
                if "run NOT verified" in p)  # fmt: skip
    assert re.search(r"inclusion", page) and "[index]" not in page


def test_each_receipt_checked_once_gives_the_audit_of_checking_twice(
    world: dict[str, Any], tmp_path: Path
) -> None:
    runs = world["runs"]
    files = dict(world["files"])
    bad = tmp_path / "bad.jsonl"  # a wrong inclusion proof and a record left out
    lines = files["chain"].read_text().splitlines()
    item = json.loads(lines[1])
    item["receipt"]["inclusion_proof"][0] = item["receipt"]["inclusion_proof"][-1]
    bad.write_text("\n".join([lines[0], json.dumps(item), *lines[3:]]) + "\n")
    roots = load_certificates([str(files["root"])], "--tsa-root")
    checker = ReceiptChecker([runs.world.key], tsa_roots=roots)
    for path in (files["decide"], files["chain"], files["fan"], bad):
        items = load_run(path)
        as_run = ReceiptChecker(
            checker.log_keys, tsa_roots=roots, cache=checker.cache, now=checker.now
        )
        problems = verify_run(items, (), checker=as_run).problems
        twice = audit_run(items, checker, run_problems=problems)
        assert audit_as_run(items, checker) == twice
        stored = audit_as_run(items, checker, stored=True)
        assert replace(stored, stored=False) == twice
        assert stored.stored == twice.ok  # a run that fails is never taken as stored


def test_pages_made_in_the_checking_processes_equal_pages_made_here(
    world: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "forked" / "report.html"
    code, forked = _report(world, out, "--workers", "2")
    assert code == 0
    key, root = world["key"], str(world["files"]["root"])
    checker = make_checker([key], [root], None, [])
    spec = CacheSpec(keys=(key,), roots_der=tuple(c.public_bytes(Encoding.DER)
                     for c in checker.tsa_roots), origin=None, witnesses=())  # fmt: skip
    audits = audit_runs(list(run_paths([str(world["copies"])])), spec, 1, checker)
    found: dict[int, Verdict] = {}
    overview, pages = render_pages(audits, anchors_checked=True, witnesses_checked=False,
                                   folder=out.stem + "-runs", overview=out.name,
                                   policy=TimePolicy(), verdicts=found)  # fmt: skip
    assert _pages(out) == {"overview": overview, **pages}
    assert [found[id(a)].to_json_obj() for _, a in audits] == [
        {k: v for k, v in r.items() if k != "run_id"} for r in forked["verdicts"]
    ]


def test_a_tsa_root_file_replaced_in_place_is_other_trust(
    world: dict[str, Any], tmp_path: Path
) -> None:
    """The index remembers the TSA roots by their content: an auditor who swaps the root file
    at the same path gets nothing from the index (report and lineage verify again, and the
    anchors then fail against the other root), never the verdicts made under the old root."""
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(world["files"]["decide"], runs / "decide.jsonl")
    root = tmp_path / "root.pem"
    shutil.copy(world["files"]["root"], root)
    db = tmp_path / "audit.sqlite"
    trust = ["--key", world["key"], "--tsa-root", str(root)]
    done = CliRunner().invoke(main, ["index", str(runs), "--db", str(db), *trust, "--workers", "1"])
    assert done.exit_code == 0, done.output
    report = ["report", str(runs), *trust, "--db", str(db), "--json", "--workers", "1",
              "--html", str(tmp_path / "report.html")]  # fmt: skip
    lineage = ["lineage", str(runs), *trust, "--db", str(db), "--json", "--tainted"]
    same = json.loads(CliRunner().invoke(main, report).output)
    assert {c["source"] for v in same["verdicts"] for c in v["checks"]} == {"index"}
    walked = json.loads(CliRunner().invoke(main, lineage).output)
    assert {r["source"] for r in walked["runs"]} == {"index"}
    probe = (  # every verdict from the index: the roots' certificates are never parsed
        "import json, sys\nfrom ledger_client.cli.main import main\n"
        f"try:\n    main({lineage!r})\nexcept SystemExit:\n    pass\n"
        "print(json.dumps('cryptography.x509' in sys.modules))\n"
    )
    out = processes.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.splitlines()[-1] == "false", out.stderr
    root.write_bytes(b"not a certificate")  # read (fingerprint) and refused once it is parsed
    result = CliRunner().invoke(main, [a for a in lineage if a != "--json"])
    assert result.exit_code == 2 and "--tsa-root" in result.output and "not a PEM" in result.output
    other = make_dev_certs(
        tmp_path / "other", hosts=["other.test"], clients=[], now=datetime.now(UTC)
    )
    root.write_bytes(other.ca.read_bytes())  # same path, another root
    result = CliRunner().invoke(main, report)
    answer = json.loads(result.output)
    assert result.exit_code == 1 and answer["failing_runs"]
    assert {c["source"] for v in answer["verdicts"] for c in v["checks"]} == {"verified now"}
    result = CliRunner().invoke(main, lineage)
    walked = json.loads(result.output)
    assert result.exit_code == 1 and {r["source"] for r in walked["runs"]} == {"verified now"}
