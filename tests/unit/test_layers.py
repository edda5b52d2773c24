"""The layer rules, at package level: which of our packages and which libraries each package of
``ledger`` and ``ledger_client`` may import (every import of every module: top level, inside
functions, under ``TYPE_CHECKING``, relative, ``importlib.import_module("...")``), what importing
the agent SDK or the offline verifier loads (in a fresh interpreter), and the package layout.

``RULES`` is the one statement of the rules; each package's docstring says the same in its
"May import:" paragraph, and a test keeps the two equal (the rules are never read from there).
Standard-library modules are free, except those that reach the network, other processes or a
database (``GATED``): a package names those like libraries.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import processes

ROOT = Path(__file__).resolve().parents[2]
OURS = ("ledger", "ledger_client")
SOURCES = (("ledger", Path("ledger")), ("ledger_client", Path("client", "ledger_client")))
GATED = (
    "urllib.request", "http.server", "http.client", "socket", "socketserver", "ssl",
    "subprocess", "sqlite3", "multiprocessing",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Rule:
    """What a package may import besides itself: packages (or single modules) of ours, and
    third-party libraries or ``GATED`` standard-library modules (a name covers its submodules)."""

    imports: frozenset[str]
    libraries: frozenset[str]

    def allows(self, target: str, *, ours: bool) -> bool:
        names = self.imports if ours else self.libraries
        return any(target == name or target.startswith(name + ".") for name in names)


def rule(imports: str = "", libraries: str = "") -> Rule:
    return Rule(frozenset(imports.split()), frozenset(libraries.split()))


PURE = "ledger.core ledger.timestamp ledger.records"
SERVER = (
    "ledger.store ledger.log ledger.witness ledger.tsa ledger.api ledger.http ledger.ops"
    " ledger.objstore"
)
RULES: Mapping[str, Rule] = {
    "ledger": rule("ledger.cli"),
    # The pure core: no I/O, shared by the server and the offline verifier.
    "ledger.core": rule("", "cryptography rfc8785"),
    "ledger.timestamp": rule("ledger.core", "asn1crypto cryptography"),
    "ledger.records": rule("ledger.core"),
    # The one small I/O helper both sides may use (durable writes, private-key files).
    "ledger.fileio": rule("ledger.core"),
    # The server, bottom up.
    "ledger.store": rule("ledger.core ledger.fileio", "rocksdict"),
    "ledger.witness": rule("ledger.core ledger.fileio ledger.net", "aiohttp"),
    "ledger.net": rule("ledger.core", "aiohttp http.client socket ssl"),
    "ledger.log": rule(
        "ledger.core ledger.timestamp ledger.store ledger.witness ledger.net ledger.fileio",
        "aiohttp prometheus_client",
    ),
    "ledger.tsa": rule(
        "ledger.core ledger.timestamp ledger.net ledger.fileio",
        "aiohttp asn1crypto cryptography",
    ),
    "ledger.api": rule(
        "ledger.core ledger.timestamp ledger.log ledger.v1 ledger.fileio ledger.net.listener",
        "cryptography google.protobuf grpc grpc_health grpc_reflection ssl",
    ),
    "ledger.http": rule(
        "ledger.core ledger.records ledger.store ledger.log ledger.fileio ledger.net "
        "ledger.api.auth ledger.api.budget ledger.api.access",
        "aiohttp jsonschema ssl subprocess",
    ),
    "ledger.objstore": rule(
        "ledger.core ledger.store ledger.http ledger.net.keepalive",
        "boto3 botocore prometheus_client subprocess urllib3",
    ),
    "ledger.ops": rule(
        "ledger.core ledger.timestamp ledger.store ledger.log ledger.fileio", "cryptography"
    ),
    "ledger.app": rule(
        f"ledger.core ledger.timestamp ledger.fileio ledger.net {SERVER}",
        "aiohttp cryptography grpc pydantic pydantic_settings socket",
    ),
    "ledger.cli": rule(
        f"{PURE} ledger.fileio {SERVER} ledger.app"
        " ledger_client.receipts ledger_client.remote ledger_client.sdk ledger_client.clikit",
        "click",
    ),
    "ledger.v1": rule("", "google.protobuf grpc"),
    # The client: the public API, the offline verifier, the network, the SDK, audits, the CLI.
    "ledger_client": rule("ledger_client.receipts ledger_client.sdk"),
    "ledger_client.receipts": rule(f"{PURE} ledger.fileio", "cryptography"),
    "ledger_client.remote": rule(
        f"{PURE} ledger.fileio ledger.api.wire ledger.v1 ledger_client.receipts",
        "grpc urllib.request",
    ),
    "ledger_client.sdk": rule(
        "ledger.core ledger.records ledger.fileio ledger_client.receipts ledger_client.remote",
        "multiprocessing",  # propagate: a child process joins its parent's run
    ),
    "ledger_client.audit": rule(
        f"{PURE} ledger.fileio ledger_client.receipts",
        "cryptography grandalf sqlite3 multiprocessing",  # parallel: forked report renderers
    ),
    "ledger_client.clikit": rule("ledger.core ledger_client.remote.connection", "click"),
    "ledger_client.cli": rule(
        f"{PURE} ledger.fileio ledger_client.receipts ledger_client.remote ledger_client.audit"
        " ledger_client.clikit",
        "asn1crypto click cryptography",
    ),
    "ledger_client.bridges": rule(
        "ledger.core ledger.records ledger_client.sdk", "langchain_core opentelemetry"
    ),
}  # fmt: skip


# --- the import graph --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Module:
    name: str
    path: Path
    is_package: bool


@dataclass(frozen=True, slots=True)
class Edge:
    module: str
    target: str
    line: int


@functools.cache
def modules(root: Path = ROOT) -> Mapping[str, Module]:
    """Every module of ours under ``root``, by dotted name (a package by its ``__init__``)."""
    found = {}
    for package, folder in SOURCES:
        for path in sorted((root / folder).rglob("*.py")):
            parts = path.relative_to(root / folder).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            name = ".".join([package, *(parts[:-1] if is_package else parts)])
            found[name] = Module(name, path, is_package)
    return found


def package_of(name: str, packages: Iterable[str] = RULES) -> str | None:
    """The longest package of ``packages`` that holds module ``name``."""
    holders = [p for p in packages if name == p or name.startswith(p + ".")]
    return max(holders, key=len) if holders else None


def is_gated(name: str) -> bool:
    return any(name == g or name.startswith(g + ".") for g in GATED)


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    parts = module.name.split(".")
    base = parts if module.is_package else parts[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def edges(module: Module, known: Mapping[str, Module]) -> Iterator[Edge]:
    """What ``module`` imports: ``from ledger.api import wire`` is ``ledger.api.wire``, ``from
    urllib import request`` is ``urllib.request``, ``from grpc import aio`` is ``grpc``."""
    for node in ast.walk(ast.parse(module.path.read_text(), str(module.path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Edge(module.name, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, node)
            for alias in node.names:
                full = f"{source}.{alias.name}"
                target = full if full in known or full in GATED else source
                yield Edge(module.name, target, node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", None))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield Edge(module.name, node.args[0].value, node.lineno)


def problem(edge: Edge, known: Mapping[str, Module], rules: Mapping[str, Rule]) -> str | None:
    """Why ``edge`` breaks the rules, or None."""
    here = package_of(edge.module, rules)
    if here is None:
        return "its package has no rule"
    top = edge.target.split(".")[0]
    if top == "__future__" or (top in sys.stdlib_module_names and not is_gated(edge.target)):
        return None
    if top not in OURS:
        return None if rules[here].allows(edge.target, ours=False) else f"{here} may not use it"
    if edge.target not in known:
        return "no such module of ours"
    there = package_of(edge.target, rules)
    if there == here or rules[here].allows(edge.target, ours=True):
        return None
    return f"{here} may not import {there}"


@functools.cache
def graph(root: Path = ROOT) -> tuple[tuple[Module, Edge], ...]:
    """Every edge of every module under ``root``, parsed once."""
    known = modules(root)
    return tuple((m, edge) for m in known.values() for edge in edges(m, known))


def violations(root: Path = ROOT, rules: Mapping[str, Rule] = RULES) -> list[str]:
    known = modules(root)
    found = []
    for module, edge in graph(root):
        why = problem(edge, known, rules)
        if why is not None:
            where = str(module.path.relative_to(root))
            found.append((where, edge.line, f"{edge.module} imports {edge.target}: {why}"))
    return [f"{where}:{line}: {text}" for where, line, text in sorted(found)]


def stray_modules(root: Path = ROOT) -> list[str]:
    """Modules sitting directly in ``ledger/`` or ``client/ledger_client/`` (besides
    ``__init__``/``__main__``), and folders of modules that are not packages."""
    found = []
    for package, folder in SOURCES:
        base = root / folder
        allowed = {"__init__.py", "__main__.py"} if package == "ledger" else {"__init__.py"}
        found += [str(p.relative_to(root)) for p in base.glob("*.py") if p.name not in allowed]
        for path in base.rglob("*.py"):
            if not (path.parent / "__init__.py").exists():
                found.append(f"{path.relative_to(root)} (no __init__.py beside it)")
    return sorted(found)


def test_every_import_keeps_the_package_rules() -> None:
    assert violations() == []


def test_no_module_sits_outside_a_package() -> None:
    assert stray_modules() == []


def test_every_package_has_a_rule_and_is_in_the_wheel() -> None:
    """The rules, the tree and pyproject's package list (what the wheel holds) name the same
    packages."""
    tree = {name for name, m in modules().items() if m.is_package}
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert set(RULES) == tree
    assert set(config["tool"]["setuptools"]["packages"]) == tree


def allowed_in_docstring(path: Path) -> set[str]:
    """The ````names```` of the "May import:" paragraph of a package's docstring."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    paragraph = next((p for p in doc.split("\n\n") if p.startswith("May import:")), None)
    assert paragraph is not None, f'{path}: no "May import:" paragraph in the docstring'
    assert "Owns:" in doc, f'{path}: no "Owns:" in the docstring'
    return set(re.findall(r"``([\w.]+)``", paragraph))


@pytest.mark.parametrize("package", sorted(RULES))
def test_each_package_docstring_states_its_rule(package: str) -> None:
    path = modules()[package].path
    assert allowed_in_docstring(path) == RULES[package].imports | RULES[package].libraries


# --- what importing loads ------------------------------------------------------------------------


def loaded_by(code: str) -> set[str]:
    """The modules loaded after running ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    out = processes.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.splitlines()[-1]))


def forbidden(loaded: set[str], banned: Iterable[str]) -> list[str]:
    return sorted(m for m in loaded if any(m == b or m.startswith(b + ".") for b in banned))


def outside(loaded: set[str], packages: Iterable[str], extra: Iterable[str] = ()) -> list[str]:
    """Our loaded modules in none of ``packages`` and not in ``extra``."""
    allowed = set(packages)
    return sorted(
        m
        for m in loaded
        if m.split(".")[0] in OURS and package_of(m) not in allowed and m not in extra
    )


SERVER_LIBRARIES = ("rocksdict", "aiohttp", "pydantic", "pydantic_settings", "prometheus_client")
SDK_IMPORTS = "from ledger_client import decision, ledger_run, LedgerClient\n" + (
    "from ledger_client.sdk import *\n"
)


def test_the_agent_sdk_loads_no_log_store_anchoring_or_witnessing() -> None:
    loaded = loaded_by(SDK_IMPORTS)
    assert forbidden(loaded, ("ledger.log", "ledger.store", *SERVER_LIBRARIES)) == []
    assert [m for m in loaded if "anchoring" in m or "witness" in m] == []
    packages = (*PURE.split(), "ledger", "ledger.fileio", "ledger.v1", "ledger_client")
    client = ("ledger_client.sdk", "ledger_client.receipts", "ledger_client.remote")
    assert outside(loaded, (*packages, *client), ("ledger.api", "ledger.api.wire")) == []


def test_the_offline_verifier_loads_no_grpc_rocksdict_or_aiohttp() -> None:
    receipts = sorted(n for n in modules() if package_of(n) == "ledger_client.receipts")
    code = "".join(f"import {name}\n" for name in receipts) + (
        "import ledger_client.cli.main\n"
        "ledger_client.cli.main.main.commands\n"  # every subcommand's module (lazy otherwise)
        "from ledger_client import Receipt, verify_receipt, verify_run\n"
    )
    loaded = loaded_by(code)
    assert forbidden(loaded, ("grpc", "google.protobuf", "ledger.v1", *SERVER_LIBRARIES)) == []
    assert forbidden(loaded, (*SERVER.split(), "ledger.net", "ledger.app", "ledger.cli")) == []
    assert forbidden(loaded, ("ledger_client.sdk", "ledger_client.remote.log")) == []


MODE_LIBRARIES = ("boto3", "botocore.client", "botocore.session", "s3transfer", "jsonschema")


def test_a_server_without_a_bucket_loads_no_boto3_and_jsonschema_waits_for_an_append(
    tmp_path: Path,
) -> None:
    """What every ``ledger serve`` start pays: boto3 and botocore's client (~0.3 s of CPU) load
    only when a bucket is opened; ``jsonschema`` (~0.13 s) at the first ``POST /append``."""
    serve = (
        "import asyncio, pathlib\n"
        "from ledger.app.compose import start_app\n"
        "from ledger.app.settings import Settings\n"
        "from ledger.core.checkpoint import Ed25519Signer\n"
        f"data = pathlib.Path({str(tmp_path / 'data')!r})\n"
        "settings = Settings(origin='ledger.test/imports', data_dir=data, listen='127.0.0.1:0',"
        " anchor_interval_s=0, metrics_listen='')\n"
        "async def main():\n"
        "    app = await start_app(settings, Ed25519Signer.generate(settings.origin))\n"
        "    assert app.tiles is not None  # the HTTP append is mounted\n"
        "    await app.stop()\n"
        "asyncio.run(main())\n"
    )
    assert forbidden(loaded_by(serve), MODE_LIBRARIES) == []
    # ... and they do load where they are needed
    used = (
        "import os\n"
        "os.environ.update(AWS_ACCESS_KEY_ID='k', AWS_SECRET_ACCESS_KEY='s')\n"
        "from ledger.objstore.bucket import Bucket, BucketAddress\n"
        "Bucket(BucketAddress.parse('s3://imports', endpoint='http://127.0.0.1:9'))\n"
        "from ledger.http.append import schema_problem\n"
        "assert schema_problem({}) is not None\n"
    )
    assert {"boto3", "botocore.client", "jsonschema"} <= loaded_by(used)


# --- the checkers bite -------------------------------------------------------------------------

BAD = {
    "ledger/__init__.py": "",
    "ledger/stray.py": "",
    "ledger/core/__init__.py": '"""core."""\n',
    "ledger/core/bad.py": (
        "from __future__ import annotations\n"
        "import json\n"
        "import cryptography.x509\n"
        "from urllib import request\n"
        "from . import fine\n"
        "def later():\n"
        "    import grpc\n"
        "    from ledger.log import facade\n"
        "    importlib.import_module('rocksdict')\n"
        "import ledger.nowhere\n"
    ),
    "ledger/core/fine.py": "",
    "ledger/log/__init__.py": "",
    "ledger/log/facade.py": "",
    "ledger/loose/thing.py": "",
    "client/ledger_client/__init__.py": "",
    "client/ledger_client/receipts/__init__.py": "",
    "client/ledger_client/receipts/bad.py": (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..remote import log\n"
    ),
    "client/ledger_client/remote/__init__.py": "",
    "client/ledger_client/remote/log.py": "from ledger.log import facade\n",
}


def test_the_checker_sees_violations(tmp_path: Path) -> None:
    for name, text in BAD.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    rules = {name: RULES[name] for name in ("ledger", "ledger.core", "ledger.log")} | {
        "ledger_client": RULES["ledger_client"],
        "ledger_client.receipts": RULES["ledger_client.receipts"],
        "ledger_client.remote": RULES["ledger_client.remote"],
    }
    found = violations(tmp_path, rules)
    assert [line.split(": ", 1)[1] for line in found] == [
        "ledger.core.bad imports urllib.request: ledger.core may not use it",
        "ledger.core.bad imports grpc: ledger.core may not use it",
        "ledger.core.bad imports ledger.log.facade: ledger.core may not import ledger.log",
        "ledger.core.bad imports rocksdict: ledger.core may not use it",
        "ledger.core.bad imports ledger.nowhere: no such module of ours",
        "ledger_client.receipts.bad imports ledger_client.remote.log:"
        " ledger_client.receipts may not import ledger_client.remote",
        "ledger_client.remote.log imports ledger.log.facade:"
        " ledger_client.remote may not import ledger.log",
    ] or found
    assert stray_modules(tmp_path) == [
        "ledger/loose/thing.py (no __init__.py beside it)",
        "ledger/stray.py",
    ]


def test_the_load_probes_bite() -> None:
    loaded = loaded_by("import ledger.log.anchoring")
    assert forbidden(loaded, ("ledger.log",)) == ["ledger.log", "ledger.log.anchoring"]
    assert "ledger.log.anchoring" in outside(loaded, ("ledger.core",))


def test_importing_ledger_client_loads_none_of_its_modules() -> None:
    """The public API is lazy: ``import ledger_client`` loads no other module of ours."""
    loaded = loaded_by("import ledger_client")
    assert sorted(m for m in loaded if m.split(".")[0] in OURS) == ["ledger_client"]
