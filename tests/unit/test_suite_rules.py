"""Rules for the test suite itself: it needs nothing outside the repository (the public vectors
live in tests/testdata, each file's source named in its PROVENANCE), no test module imports
another (shared helpers live in support modules), and the processes tests start are in groups
of their own with default signal dispositions (tests/processes.py)."""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from tests import processes, schedule
from tests.vectors import TESTDATA, load_vectors
from tests.waits import wait_until

TESTS = Path(__file__).resolve().parents[1]
PROVENANCE = TESTDATA / "PROVENANCE"
KEYS = ("repository", "commit", "path", "licence")


def provenance_blocks() -> list[dict[str, object]]:
    """The PROVENANCE file's blocks: its keys, and the files it names under ``files``."""
    blocks: list[dict[str, object]] = []
    for text in re.split(r"\n\s*\n", PROVENANCE.read_text()):
        lines = [line for line in text.splitlines() if not line.startswith("#")]
        if not lines:
            continue
        block: dict[str, object] = {}
        files: list[str] = []
        in_files = False
        for line in lines:
            if line.startswith(" "):
                if in_files:
                    files.append(line.strip())
                continue
            key, _, value = line.partition(":")
            in_files = key == "files"
            block[key] = value.strip()
        block["files"] = files
        blocks.append(block)
    return blocks


def test_every_testdata_file_is_named_in_provenance_with_its_source() -> None:
    blocks = provenance_blocks()
    assert blocks
    named: list[str] = []
    for block in blocks:
        assert all(block.get(key) for key in KEYS), block
        assert str(block["repository"]).startswith("https://github.com/"), block
        assert re.fullmatch(r"[0-9a-f]{40}", str(block["commit"])), block
        files = block["files"]
        assert isinstance(files, list) and files, block
        named += files
    present = sorted(
        str(p.relative_to(TESTDATA)) for p in TESTDATA.rglob("*") if p.is_file() and p != PROVENANCE
    )
    assert len(named) == len(set(named)), "a file is named twice in PROVENANCE"
    assert sorted(named) == present  # no file without a source, no source without its file


def test_vectors_are_read_from_the_repository_and_never_skipped() -> None:
    assert load_vectors("inclusion.json")["cases"]
    with pytest.raises(FileNotFoundError):
        load_vectors("absent.json")  # an error, not a skip
    users = [p for p in _python_files() if "tests.vectors" in _imports(p)]
    assert len(users) >= 3  # the merkle vectors, the Tessera log, this file
    for path in [TESTS / "vectors.py", *users]:
        skips = re.findall(r"pytest\.(skip|importorskip)\(|mark\.skip", path.read_text())
        assert path == Path(__file__).resolve() or not skips, path


def _python_files() -> Iterator[Path]:
    yield from (p for p in TESTS.rglob("*.py") if "testdata" not in p.parts)


def test_nothing_under_tests_reads_outside_the_repository() -> None:
    outside = re.compile(r"\.\./shared|[\"']shared[\"']")
    offenders = [
        f"{p.relative_to(TESTS)}:{n}"
        for p in _python_files()
        if p != Path(__file__).resolve()
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if outside.search(line)
    ]
    assert offenders == []


@cache
def _imports(path: Path) -> frozenset[str]:
    return frozenset(_imported_modules(path))


def _imported_modules(path: Path, source: str | None = None) -> Iterator[str]:
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    package = ".".join(path.relative_to(TESTS.parent).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def test_no_test_module_imports_another_test_module() -> None:
    offenders = [
        f"{path.relative_to(TESTS)} imports {name}"
        for path in _python_files()
        for name in _imports(path)
        if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")
    ]
    assert offenders == [], "move what they share into a support module under tests/"


def test_the_import_rule_sees_every_form() -> None:
    probe = TESTS / "unit" / "probe.py"  # never written: parsed from text
    forms = {
        "from tests.unit.test_log import items": "tests.unit.test_log",
        "from .test_log import items": "tests.unit.test_log",
        "from . import test_log": "tests.unit.test_log",
        "import tests.property.test_merkle_property": "tests.property.test_merkle_property",
    }
    for source, module in forms.items():
        assert module in set(_imported_modules(probe, source)), source


def test_no_test_starts_a_process_except_through_the_helper() -> None:
    direct = re.compile(r"subprocess\.(run|Popen|call|check_call|check_output)\(|os\.(fork|spawn)")
    offenders = [
        f"{p.relative_to(TESTS)}:{n}"
        for p in _python_files()
        if p.name != "processes.py" and p != Path(__file__).resolve()
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if direct.search(line)
    ]
    assert offenders == [], "start processes with tests.processes.spawn/run"


SHOW_SIGINT = """
import signal
handler = signal.getsignal(signal.SIGINT)
print("ignored" if handler == signal.SIG_IGN else getattr(handler, "__name__", handler))
"""


def test_children_start_with_default_sigint_even_when_the_suite_ignores_it() -> None:
    """As under ``nohup make test &``: ignored here, yet a child sees Ctrl-C as Python does."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        plain = subprocess.run(  # what the helper replaces: the child inherits SIG_IGN
            [sys.executable, "-c", SHOW_SIGINT], capture_output=True, text=True, timeout=60
        )
        helped = processes.run(
            [sys.executable, "-c", SHOW_SIGINT], capture_output=True, text=True, timeout=60
        )
    finally:
        signal.signal(signal.SIGINT, before)
    assert plain.stdout.strip() == "ignored"
    assert helped.stdout.strip() == "default_int_handler", helped.stderr


GRANDCHILD = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
child.wait()
"""


def test_a_child_leads_its_own_group_and_reap_kills_what_it_started() -> None:
    proc = processes.spawn([sys.executable, "-c", GRANDCHILD], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    grandchild = int(proc.stdout.readline())
    assert os.getpgid(proc.pid) == proc.pid != os.getpgrp()
    assert os.getpgid(grandchild) == proc.pid
    assert len(processes.reap()) == 1
    assert proc.returncode == -signal.SIGKILL
    wait_until(lambda: not _running(grandchild), what="the grandchild to die")


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (its new parent may reap it later)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_timeout_kills_the_group() -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        processes.run([sys.executable, "-c", "import time; time.sleep(600)"], timeout=0.5)
    assert processes.reap() == []  # already killed and reaped


# the fuzz, the crash cycles, the bench smoke (four files), the browser report: slow as a whole
SLOW_MODULES = ("test_verify_fuzz", "test_crash", "test_crash_harness", "test_bench_smoke",
                "test_bench_smoke_log", "test_bench_smoke_bucket", "test_bench_smoke_primary",
                "test_report_browser")  # fmt: skip


def test_make_test_fast_leaves_the_slow_tests_out() -> None:
    makefile = (TESTS.parent / "Makefile").read_text()
    recipe = makefile.split("\ntest-fast:", 1)[1].split("\n\n", 1)[0]
    assert '-m "not slow" tests/unit tests/property' in recipe
    modules = [p for p in TESTS.rglob("test_*.py") if p.stem in SLOW_MODULES]
    assert len(modules) == len(SLOW_MODULES)
    for path in modules:
        tree = ast.parse(path.read_text())
        marks = [
            ast.unparse(node.value)
            for node in tree.body
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        ]
        assert any("mark.slow" in m for m in marks), f"{path.name}: pytestmark lacks slow"


# the tests that measure memory or latency under attack: never beside another worker's tests
SERIAL_MODULES = ("test_memory_bound", "test_reader_attack")


def _recipe(makefile: str, target: str) -> list[str]:
    return makefile.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0].splitlines()[1:]


def test_make_test_runs_the_serial_tests_alone_after_the_parallel_run() -> None:
    makefile = (TESTS.parent / "Makefile").read_text()
    (parallel,) = _recipe(makefile, "pytest-parallel")
    (alone,) = _recipe(makefile, "pytest-serial")
    assert "$(WORKERS)" in parallel and '-m "not serial"' in parallel
    assert "$(WORKERS)" not in alone and " -n " not in alone
    assert alone.endswith("-m serial $(SERIAL)")
    # `make pytest` and `make test`: the serial run is the last step, after the parallel run
    # (and in `make test` after what runs beside it: its recipe waits for both first)
    assert [line.split()[-1] for line in _recipe(makefile, "pytest")] == [
        "pytest-parallel",
        "pytest-serial",
    ]
    steps = _recipe(makefile, "test")
    assert steps[-1].split()[-1] == "pytest-serial"
    together = "\n".join(steps[:-1])
    assert "pytest-parallel" in together and "pytest-serial" not in together
    assert together.index("pytest-parallel;") < together.index("wait $$beside")
    listed = makefile.split("\nSERIAL := ", 1)[1].split("\n", 1)[0].split()
    marked = [
        str(p.relative_to(TESTS.parent))
        for p in TESTS.rglob("test_*.py")
        if p != Path(__file__) and "mark.serial" in p.read_text()
    ]
    assert sorted(listed) == sorted(marked)  # the serial run collects exactly these files
    modules = [p for p in TESTS.rglob("test_*.py") if p.stem in SERIAL_MODULES]
    assert len(modules) == len(SERIAL_MODULES)
    for path in modules:
        assert "mark.serial" in path.read_text().split("pytestmark = ", 1)[1].split("\n", 1)[0]


def test_the_workers_take_the_longest_files_first(request: pytest.FixtureRequest) -> None:
    """``make pytest`` hands out whole files in collection order (not xdist's order by number
    of tests), and the collection starts with the longest files (``tests/schedule.py``)."""
    makefile = (TESTS.parent / "Makefile").read_text()
    workers = makefile.split("\nWORKERS := ", 1)[1].split("\n", 1)[0].split()
    assert workers == ["-n", "3", "--dist", "loadfile", "--no-loadscope-reorder"]
    named = schedule.named_files()
    assert [p for p in named if not p.is_file()] == []  # no stale name
    files = list(dict.fromkeys(item.path for item in request.session.items))
    seconds = dict(zip(named, schedule.LONGEST.values(), strict=True))
    ranked = sorted((p for p in named if p in files), key=lambda p: -seconds[p])
    assert files[: len(ranked)] == ranked  # this session's share of them, first, longest first
    runs = [item.path for item in request.session.items]
    assert len(files) == sum(1 for a, b in zip([None, *runs], runs, strict=False) if a != b)


def test_the_test_targets_compile_our_bytecode_first() -> None:
    """``make pytest``, ``pytest-pure`` and ``test-fast`` compile our modules first (``make
    bytecode``): with PYTHONDONTWRITEBYTECODE set, every process would compile them again."""
    makefile = (TESTS.parent / "Makefile").read_text()
    recipe = makefile.split("\nbytecode: ", 1)[1].split("\n\n", 1)[0].splitlines()
    assert recipe[1].split()[1:] == ["-m", "compileall", "-q", "ledger", "client", "tests", "tools"]
    for target in ("pytest", "pytest-parallel", "pytest-serial", "pytest-pure", "test-fast"):
        needs = makefile.split(f"\n{target}: ", 1)[1].split("\n", 1)[0].split()
        assert "bytecode" in needs, target


def test_pytest_keeps_its_rewritten_test_modules() -> None:
    """Every pytest run of the Makefile empties PYTHONDONTWRITEBYTECODE: set, it keeps pytest
    from caching its assertion-rewritten test modules, and every worker rewrote them all."""
    makefile = (TESTS.parent / "Makefile").read_text()
    assert makefile.split("\nPYTEST := ", 1)[1].split("\n", 1)[0].split() == [
        "PYTHONDONTWRITEBYTECODE=",
        "$(BIN)/pytest",
    ]
    assert makefile.count("$(BIN)/pytest") == 1  # only there
    for target in ("pytest-parallel", "pytest-serial", "pytest-pure", "test-fast"):
        assert "$(PYTEST) " in makefile.split(f"\n{target}: ", 1)[1].split("\n\n", 1)[0], target


def test_the_pure_pass_leaves_out_only_comparisons_that_name_both_modules() -> None:
    """``make pytest-pure`` deselects tests that would run the same code as the compiled run:
    each calls the pure twin (``hot``, or ``decision``'s fast reading) and the compiled module
    by name and never the selected core."""
    makefile = (TESTS.parent / "Makefile").read_text()
    words = makefile.split("\nPURE_SAME := ", 1)[1].split("\nCORE_TESTS", 1)[0].split()
    words = [w for w in words if w != "\\"]
    ids = words[1::2]
    assert ids and words[::2] == ["--deselect"] * len(ids)
    assert "$(CORE_TESTS) $(PURE_SAME)" in makefile.split("\npytest-pure: ", 1)[1]
    for node in ids:
        path, name = node.split("::")
        tree = ast.parse((TESTS.parent / path).read_text())
        (function,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
        names = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)}
        assert "accel" not in names and "native" in names and names & {"hot", "decision"}, node
        assert "native = compiled()" in ast.unparse(function), node


def test_plugins_no_test_uses_stay_off(request: pytest.FixtureRequest) -> None:
    """Packages installed beside the tests (langsmith, anyio, platformdirs) bring pytest plugins
    no test uses; loaded, pytest would rewrite every module of their distributions per worker."""
    for name in ("langsmith_plugin", "anyio", "platformdirs"):
        assert request.config.pluginmanager.is_blocked(name), name
    assert not [m for m in sys.modules if m.split(".")[0] == "langsmith" and "pytest" in m]
