"""Packaging holds without the editable install: a wheel built from the tree, installed in a
fresh venv (no network, no pip inside it), imports every module, runs both CLIs, spawns the tile
mirror process by module path, and keeps the README's import paths.

The fresh venv gets the third-party packages of the test's own environment through a ``.pth``
line (a plain path entry: the ``.pth`` files there, such as the editable install's finder, are
not run), so the project itself can come only from the wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests import processes

pytestmark = [pytest.mark.slow, pytest.mark.integration]  # opens RocksDB, spawns processes

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (("ledger", ROOT / "ledger"), ("ledger_client", ROOT / "client" / "ledger_client"))
TIMEOUT_S = 300.0


def run(cmd: Sequence[str | Path], cwd: Path, timeout: float = TIMEOUT_S, **extra: str) -> str:
    """Run ``cmd`` in a process group of its own (killed whole on timeout), with ``extra``
    environment variables; its stdout, or a failure with its output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LEDGER_"))}
    env |= extra
    proc: subprocess.Popen[str] = processes.spawn(
        [str(c) for c in cmd], cwd=cwd, env=env, text=True, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{cmd} timed out after {timeout} s")
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}\n{out}\n{err}"
    return out


def source_modules() -> set[str]:
    """Every module of the tree (``__main__`` modules are run, not imported)."""
    found = set()
    for package, base in SOURCES:
        for path in base.rglob("*.py"):
            parts = path.relative_to(base).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            if parts[-1:] != ("__main__",):
                found.add(".".join((package, *parts)))
    return found


def build_wheel(base: Path, **extra: str) -> Path:
    """A wheel built from a copy of the tree (the build leaves nothing in the repository)."""
    tree = base / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "*.so")
    for name in ("ledger", "client"):
        shutil.copytree(ROOT / name, tree / name, ignore=ignore)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, tree / name)
    pip = (sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input")
    run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--wheel-dir", base / "dist", tree], cwd=base, timeout=TIMEOUT_S, **extra)  # fmt: skip
    (built,) = (base / "dist").glob("decision_ledger-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel as built here (with the compiled core when a C compiler is there)."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def venv(wheel: Path) -> Iterator[Path]:
    yield install(wheel)


def install(wheel: Path) -> Path:
    """A fresh venv without pip, the wheel installed into it, third-party packages borrowed."""
    home = wheel.parent.parent / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", home], cwd=home.parent)
    python = home / "bin" / "python"
    pip = (sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input")
    run([*pip, "--python", python, "install", "--no-deps", "--no-index", wheel], cwd=home.parent)
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    cwd=home.parent).strip())  # fmt: skip
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "borrowed-dev-packages.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    return home


def test_the_wheel_holds_the_package_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in (
        "ledger/py.typed",
        "ledger_client/py.typed",
        "ledger/records/schemas/decision-record-v1.schema.json",
        "ledger/records/schemas/decision-record-v2.schema.json",
        "ledger/records/schemas/decision-record-v3.schema.json",
        "ledger/records/schemas/receipt-v1.schema.json",
        "ledger/v1/ledger_pb2.pyi",
    ):
        assert data in names, data
    assert not [n for n in names if n.startswith(("client/", "tests/", "tools/"))]


PROBE = """
import importlib, json, pkgutil, sys
from importlib import resources
import ledger, ledger_client
assert not [f for f in sys.meta_path if "editable" in type(f).__module__], sys.meta_path
names = []
for package in (ledger, ledger_client):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
            names.append(info.name)
schema = resources.files("ledger.records") / "schemas" / "decision-record-v1.schema.json"
json.loads(schema.read_text())
from ledger_client import decision, ledger_run, LedgerClient
from ledger_client.sdk import LedgerClient, decision, emit, ledger_run
from ledger.records import Outcome
from ledger_client.bridges.langchain import LedgerCallbackHandler
from ledger_client.bridges.otel import LedgerSpanProcessor
print(json.dumps({"files": [ledger.__file__, ledger_client.__file__],
                  "modules": ["ledger", "ledger_client", *names]}))
"""


def test_the_installed_wheel_imports_every_module(venv: Path) -> None:
    answer = json.loads(run([venv / "bin" / "python", "-c", PROBE], cwd=venv.parent))
    assert all(Path(f).is_relative_to(venv) for f in answer["files"]), answer["files"]
    compiled = {"ledger.core._hot", "ledger.core._strictjson", "ledger.core._recordread"}
    assert set(answer["modules"]) - compiled == source_modules()


CORE = """
import hashlib, json, sys, tempfile
from ledger.core import accel
from ledger.core.checkpoint import Ed25519Signer
from ledger.log.facade import Log
from ledger.store.rocks import RocksStore
store = RocksStore(tempfile.mkdtemp(dir=sys.argv[1]))
signer = Ed25519Signer.generate("example.com/w")
log = Log(store=store, signer=signer, origin="example.com/w", clock_ms=lambda: 1_000)
out = log.append_digests(b"".join(hashlib.sha256(b"%d" % i).digest() for i in (1, 2, 1)))
root = log.publish().root_hash.hex()
store.close()
print(json.dumps({"core": accel.CORE, "json": accel.JSON_CORE, "record": accel.RECORD_CORE,
                  "file": accel.__file__, "root": root,
                  "dups": list(out.dup_positions)}))
"""


def core_of(venv: Path) -> dict[str, object]:
    answer: dict[str, object] = json.loads(
        run([venv / "bin" / "python", "-c", CORE, venv.parent], cwd=venv.parent)
    )
    assert Path(str(answer["file"])).is_relative_to(venv)
    assert answer["dups"] == [2]
    return answer


def test_the_wheel_runs_the_compiled_core_and_without_a_compiler_the_pure_one(
    wheel: Path, venv: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``CC=/bin/false``: the optional extension fails to build and the wheel is pure (the
    install works); the wheel built with a compiler runs the compiled core. Same root."""
    names = zipfile.ZipFile(wheel).namelist()
    if shutil.which("gcc") or shutil.which("cc"):
        for module in ("_hot", "_strictjson", "_recordread"):
            assert [
                n for n in names if n.startswith(f"ledger/core/{module}.") and n.endswith(".so")
            ]
        built = core_of(venv)
        assert built["core"] == built["json"] == built["record"] == "native"
    pure = build_wheel(tmp_path_factory.mktemp("pure-wheel"), CC="/bin/false")
    assert not [
        n
        for n in zipfile.ZipFile(pure).namelist()
        if n.startswith(
            ("ledger/core/_hot.", "ledger/core/_strictjson.", "ledger/core/_recordread.")
        )
        and n.endswith(".so")
    ]
    pure_core = core_of(install(pure))
    assert pure_core["core"] == pure_core["json"] == pure_core["record"] == "pure"
    assert pure_core["root"] == core_of(venv)["root"]


def test_the_installed_clis_answer_help(venv: Path) -> None:
    for script in ("ledger", "ledger-verify"):
        assert "Usage:" in run([venv / "bin" / script, "--help"], cwd=venv.parent)
    assert "Usage:" in run([venv / "bin" / "python", "-m", "ledger", "--help"], cwd=venv.parent)


MIRROR = """
import sys
from pathlib import Path
import ledger.http.mirror_process as spawned
from ledger.store.rocks import RocksStore
base = Path(sys.argv[1])
store = RocksStore(base / "db")
mirror = spawned.MirrorProcess(db_dir=base / "db", secondary_dir=base / "secondary",
                               directory=base / "tiles", origin="example.com/wheel")
mirror.stop(timeout=60)
store.close()
print(spawned.__file__)
"""


def test_the_installed_wheel_spawns_the_tile_mirror(venv: Path) -> None:
    """``MirrorProcess`` starts ``python -m ledger.http.mirror_process`` and waits for its
    ``{"ready": true}``: the child found its module and the store in the installed wheel."""
    work = venv.parent / "mirror"
    work.mkdir()
    where = run([venv / "bin" / "python", "-c", MIRROR, work], cwd=work).strip()
    assert Path(where).is_relative_to(venv)
