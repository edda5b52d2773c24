"""``ledger-verify inclusion`` / ``consistency`` through click's runner and a real subprocess."""

from __future__ import annotations

import base64
import json
import sys

from click.testing import CliRunner

from ledger_client.cli.main import main
from tests import processes
from tests.offline import OFFLINE_PROBE
from tests.reference import mth, ref_consistency, ref_inclusion, ref_leaf_hash


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def inclusion_args(index: int, size: int, *, b64: bool = False) -> list[str]:
    enc = (lambda h: base64.b64encode(h).decode()) if b64 else (lambda h: h.hex())
    args = ["inclusion", "--leaf-hash", enc(ref_leaf_hash(index)), "--index", str(index)]
    args += ["--size", str(size), "--root", enc(mth(0, size))]
    for h in ref_inclusion(index, size):
        args += ["--proof", enc(h)]
    return args


def test_inclusion_valid_hex_and_base64() -> None:
    assert run(*inclusion_args(5, 13))[0] == 0
    assert run(*inclusion_args(5, 13, b64=True))[0] == 0


def test_inclusion_invalid_is_exit_1_with_json() -> None:
    args = inclusion_args(5, 13)
    args[args.index("--index") + 1] = "6"
    code, out = run(*args, "--json")
    assert code == 1
    payload = json.loads(out)
    assert payload["valid"] is False and payload["check"] == "inclusion"
    assert "mismatch" in payload["error"] or "proof" in payload["error"]


def test_wrong_length_is_invalid_and_garbage_is_usage() -> None:
    args = inclusion_args(0, 4)
    args[args.index("--root") + 1] = "abcd"
    assert run(*args)[0] == 1
    args[args.index("--root") + 1] = "not-hex-or-base64!"
    code, out = run(*args, "--json")
    assert code == 2
    assert "neither hex nor base64" in json.loads(out)["error"]
    assert run("inclusion", "--index", "0")[0] == 2  # missing options


def test_consistency() -> None:
    args = ["consistency", "--size1", "7", "--size2", "20"]
    args += ["--root1", mth(0, 7).hex(), "--root2", mth(0, 20).hex()]
    for h in ref_consistency(7, 20):
        args += ["--proof", h.hex()]
    assert run(*args)[0] == 0
    code, out = run(*args[:2], "20", "--size2", "7", *args[5:], "--json")
    assert code == 1, out
    code, _ = run(
        "consistency",
        "--size1",
        "3",
        "--size2",
        "3",
        "--root1",
        mth(0, 3).hex(),
        "--root2",
        mth(0, 3).hex(),
    )
    assert code == 0


def test_real_subprocess_and_no_grpc_or_rocksdict_import() -> None:
    """The offline verifier runs in a fresh interpreter without importing grpc or rocksdict."""
    probe = OFFLINE_PROBE
    proc = processes.run(
        [sys.executable, "-c", probe, *inclusion_args(3, 9)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "IMPORTED []" in proc.stdout
