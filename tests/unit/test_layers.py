"""The import graph keeps the layers README's "What is where" draws (every import, also inside
functions): pure core <- service <- adapters <- operator CLIs; the client on the pure core only,
with ``ledger_client.remote`` its one door to grpc and the wire."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PURE_PACKAGES = ("core", "timestamp", "records")
PURE = {"witness.core"}
ADAPTERS = {
    "api.wire", "api.server", "app.compose", "http.tiles", "http.metrics", "witness.server",
    "api.interceptor",
}  # fmt: skip
EXTERNAL = ("grpc", "google", "rocksdict")


def layer(module: str) -> str:
    """The layer of a module of ``ledger`` or ``ledger_client``."""
    parts = module.split(".")
    if parts[0] == "ledger_client":
        return "client"
    name = ".".join(parts[1:])
    if name in ("", "v1") or parts[1:2] == ["v1"]:
        return "generated" if name else "pure"
    if parts[1] in PURE_PACKAGES or name in PURE:
        return "pure"
    if parts[1] == "fileio":  # stdlib-only file I/O that server and client share
        return "io"
    if name in ADAPTERS:
        return "adapter"
    if parts[1] in ("cli", "__main__"):
        return "cli"
    return "service"


def modules() -> dict[str, Path]:
    found = {}
    roots = ((ROOT / "ledger", "ledger"), (ROOT / "client" / "ledger_client", "ledger_client"))
    for base, package in roots:
        for path in base.rglob("*.py"):
            relative = path.relative_to(base).with_suffix("")
            if relative.parts[0] == "v1":
                continue
            parts = [p for p in relative.parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, top level or not (``from ledger import x`` -> ledger.x)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            if node.module.split(".")[0] in ("ledger", "ledger_client"):
                out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


ALLOWED = {
    "pure": {"pure"},
    "io": {"pure", "io"},
    "service": {"pure", "io", "service"},
    "adapter": {"pure", "io", "service", "adapter", "generated"},
    "cli": {"pure", "io", "service", "adapter", "cli", "client", "generated"},
    "client": {"pure", "io", "client"},
}


def violations() -> list[str]:
    found = []
    known = modules()
    for module, path in sorted(known.items()):
        here = layer(module)
        for target in sorted(imports(path)):
            top = target.split(".")[0]
            if top in EXTERNAL:
                ok = (here == "adapter" and top != "rocksdict") or module in (
                    "ledger.store.rocks",
                    "ledger.store.migrate",
                    "ledger_client.remote.log",
                )
                if not ok:
                    found.append(f"{module} ({here}) imports {target}")
                continue
            if top not in ("ledger", "ledger_client") or target in ("ledger", "ledger_client"):
                continue
            there = layer(target)
            wire = ("ledger.api", "ledger.api.wire", "ledger.v1")
            if module == "ledger_client.remote.log" and target in wire:
                continue
            if there not in ALLOWED[here] and not target.startswith("ledger.v1"):
                found.append(f"{module} ({here}) imports {target} ({there})")
            generated = target.startswith("ledger.v1") and module != "ledger_client.remote.log"
            if generated and here not in ("adapter", "cli"):
                found.append(f"{module} ({here}) imports generated code {target}")
    return found


def test_layers_hold() -> None:
    assert violations() == []


def test_the_checker_sees_violations(tmp_path: Path) -> None:
    """The rules bite: a pure module importing the service, a client module importing grpc."""
    assert layer("ledger.core.merkle") == "pure" and layer("ledger.log.facade") == "service"
    assert layer("ledger.api.server") == "adapter" and layer("ledger.cli.append") == "cli"
    assert layer("ledger_client.sdk.client") == "client"
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    import grpc\n    from ledger import log\n")
    assert imports(bad) == {"grpc", "ledger", "ledger.log"}
    assert "service" not in ALLOWED["pure"] and "service" not in ALLOWED["client"]
