"""One of each: the file-replacing and disk-flushing calls live in ``ledger/fileio/durable.py``,
time formatting and parsing in ``ledger/core/timefmt.py``, and sleep-based retry loops in
``ledger/core/backoff.py``. An AST walk over ``ledger/`` and ``client/`` fails on a second one.

A sleep-based retry loop is a ``while``/``for`` loop whose body (not counting functions defined
inside it) sleeps (``time.sleep``, ``asyncio.sleep``, or any call named ``*sleep*``/``*pause*``)
and either handles an exception (``try``/``except``) or grows a wait by multiplying it
(``delay *= 2``, ``delay = min(delay * 2, cap)``). Periodic loops keep their error handling in
a function of their own; retries go through ``ledger.core.backoff.retry``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DURABLE_CALLS = {"replace", "rename", "fsync", "fdatasync"}  # of ``os``
TIME_METHODS = {"strftime", "isoformat", "fromisoformat", "strptime"}
ALLOWED = {  # rule -> the one module allowed to do it
    "durable": "ledger/fileio/durable.py",
    "time": "ledger/core/timefmt.py",
    "retry": "ledger/core/backoff.py",
}


def _callee(node: ast.Call) -> str:
    """``os.fsync`` / ``sleep`` / ``self._sleep``: the dotted name called (best effort)."""
    parts: list[str] = []
    func: ast.expr = node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def _own_nodes(nodes: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node under ``nodes``, not entering functions, lambdas or classes defined there."""
    nested = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef
    todo: list[ast.AST] = [n for n in nodes if not isinstance(n, nested)]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, nested))


def _is_sleep(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = _callee(node).split(".")[-1].lower()
    return "sleep" in name or "pause" in name


def _grows_a_wait(node: ast.AST) -> bool:
    """``x *= k`` or ``x = ... x * k ...``: a hand-made exponential backoff."""
    if isinstance(node, ast.AugAssign):
        return isinstance(node.op, ast.Mult)
    if not isinstance(node, ast.Assign):
        return False
    targets = {t.id for t in node.targets if isinstance(t, ast.Name)}
    return any(
        isinstance(n, ast.BinOp)
        and isinstance(n.op, ast.Mult | ast.Pow)
        and any(isinstance(m, ast.Name) and m.id in targets for m in ast.walk(n))
        for n in ast.walk(node.value)
    )


def findings(source: str, where: str) -> list[str]:
    """What ``source`` (the module at ``where``, relative to the repository) does twice."""
    found: list[str] = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        line = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call) and where != ALLOWED["durable"]:
            name = _callee(node)
            if name.startswith("os.") and name[3:] in DURABLE_CALLS:
                found.append(f"{line}: {name} (use ledger.fileio.durable)")
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            names = {alias.name for alias in node.names} & DURABLE_CALLS
            if names and where != ALLOWED["durable"]:
                found.append(f"{line}: from os import {sorted(names)} (use ledger.fileio)")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in TIME_METHODS
            and where != ALLOWED["time"]
        ):
            found.append(f"{line}: .{node.func.attr}() (use ledger.core.timefmt)")
        if isinstance(node, ast.While | ast.For | ast.AsyncFor) and where != ALLOWED["retry"]:
            body = list(_own_nodes([*node.body, *node.orelse]))
            retries = any(isinstance(n, ast.Try | ast.TryStar) or _grows_a_wait(n) for n in body)
            if retries and any(_is_sleep(n) for n in body):
                found.append(f"{line}: a sleep-based retry loop (use ledger.core.backoff)")
    return found


def project_findings() -> list[str]:
    found: list[str] = []
    for top in ("ledger", "client"):
        for path in sorted((ROOT / top).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            if "/v1/" in where or "/.venv/" in where:
                continue
            found.extend(findings(path.read_text(encoding="utf-8"), where))
    return found


def test_one_of_each() -> None:
    assert project_findings() == []


def test_the_allowed_modules_exist_and_do_it() -> None:
    """The allow-list names real modules (a renamed helper would silently allow nothing)."""
    for rule, module in ALLOWED.items():
        source = (ROOT / module).read_text(encoding="utf-8")
        assert findings(source, f"elsewhere/{rule}.py"), module


BAD = """
import asyncio, os, time
from os import fsync

def write(path, tmp, fd):
    os.fsync(fd)
    os.replace(tmp, path)
    os.rename(tmp, path)

def stamp(moment):
    return moment.strftime("%Y") + moment.isoformat()

def retry_forever(call):
    while True:
        try:
            return call()
        except OSError:
            time.sleep(1)

async def retry_async(call, self):
    for _ in range(3):
        try:
            return await call()
        except OSError:
            pass
        await asyncio.sleep(1)
        self._sleep(2)

def wait_for(ready, sleep):
    delay = 0.2
    while not ready():
        sleep(delay)
        delay = min(delay * 2, 5.0)

def poll(call, pause):
    while True:
        pause(1)
        try:
            call()
        except OSError:
            pass
"""

FINE = """
import asyncio, time

async def periodic(self):
    while True:
        await asyncio.sleep(1)
        await self.run_logged()

def poll(call):
    while True:
        def once():
            try:
                return call()
            except OSError:
                return None
        time.sleep(1)
        once()

def text(value):
    return value.replace("a", "b")
"""


def test_the_checker_bites() -> None:
    found = findings(BAD, "ledger/bad.py")
    assert len([f for f in found if "ledger.fileio" in f]) == 4
    assert len([f for f in found if "timefmt" in f]) == 2
    assert len([f for f in found if "backoff" in f]) == 4
    assert findings(FINE, "ledger/fine.py") == []
    assert findings(BAD.split("def stamp")[0], ALLOWED["durable"]) == []
