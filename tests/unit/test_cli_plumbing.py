"""The CLIs' shared plumbing: ``ledger serve --help`` tells the defaults as they are, and the
server's CLI takes its plumbing from ``ledger_client.clikit``, never from the other CLI."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from click.testing import CliRunner

from ledger.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def _help_of(option: str) -> str:
    result = CliRunner().invoke(main, ["serve", "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = re.sub(r"\s+", " ", result.output)
    start = text.index(f"{option} ")
    following = text.find(" --", start + len(option))
    return text[start:following]


def test_serve_help_shows_tiles_and_metrics_as_on_by_default() -> None:
    tiles, metrics = _help_of("--tiles-listen"), _help_of("--metrics-listen")
    assert "disabled" not in tiles and "disabled" not in metrics
    assert "[default: (on, 127.0.0.1 at the gRPC port + 1)]" in tiles, tiles
    assert "[default: (on, on the tiles endpoint)]" in metrics, metrics
    assert "(None)" not in _help_of("--tiles-dir")


def _imported(package: Path) -> dict[str, set[str]]:
    """Module file -> every module it imports (at any depth: lazy imports in functions too)."""
    found: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
        found[str(path.relative_to(ROOT))] = names
    return found


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_neither_cli_imports_the_other_cli_s_modules() -> None:
    server_cli = _imported(ROOT / "ledger" / "cli")
    verify_cli = _imported(ROOT / "client" / "ledger_client" / "cli")
    assert server_cli and verify_cli
    wrong = {f: sorted(n for n in names if _within(n, "ledger_client.cli"))
             for f, names in server_cli.items()}  # fmt: skip
    wrong |= {f: sorted(n for n in names if _within(n, "ledger.cli"))
              for f, names in verify_cli.items()}  # fmt: skip
    assert not {f: n for f, n in wrong.items() if n}
    # and both take the shared plumbing from one place
    assert any(_within(n, "ledger_client.clikit") for n in server_cli["ledger/cli/main.py"])
    assert any(
        _within(n, "ledger_client.clikit") for n in verify_cli["client/ledger_client/cli/main.py"]
    )


def test_the_shared_plumbing_imports_no_cli_and_no_heavy_library() -> None:
    banned = ("ledger.cli", "ledger_client.cli", "grpc", "rocksdict", "aiohttp", "pydantic")
    kit = _imported(ROOT / "client" / "ledger_client" / "clikit")
    assert kit
    wrong = {f: sorted(n for n in names if any(_within(n, b) for b in banned))
             for f, names in kit.items()}  # fmt: skip
    assert not {f: n for f, n in wrong.items() if n}
