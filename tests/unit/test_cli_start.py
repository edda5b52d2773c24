"""What starting a CLI costs: ``ledger --help`` and ``ledger-verify --help`` import no
subcommand's module (their list comes from the ``COMMANDS`` tables, held equal to the commands
here), and ``ledger-verify lineage --db --tainted`` with every verdict stored loads none of the
heavy libraries (ASN.1 and X.509 parsing, RFC 3161, asyncio, process pools, grpc)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from ledger.cli.main import COMMANDS as LEDGER_COMMANDS
from ledger.cli.main import main as ledger_main
from ledger_client.cli.main import COMMANDS as VERIFY_COMMANDS
from ledger_client.cli.main import main as verify_main
from ledger_client.clikit.lazy import CommandTable, LazyGroup, short_help
from tests import processes
from tests.decision_world import build, write

TREES: dict[str, tuple[click.Group, CommandTable]] = {
    "ledger": (ledger_main, LEDGER_COMMANDS),
    "ledger-verify": (verify_main, VERIFY_COMMANDS),
}
ENTRIES = {"ledger": "ledger.cli.entry", "ledger-verify": "ledger_client.cli.entry"}


def _loaded_by(entry: str, args: list[str]) -> tuple[int, str, set[str]]:
    """Run the console script ``entry`` with ``args`` in a fresh Python: (exit code, stdout
    before the module list, the modules loaded)."""
    probe = (
        "import json, sys\n"
        f"sys.argv = ['cli', *{args!r}]\n"
        f"from {entry} import main\n"
        "code = 0\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code or 0\n"
        "sys.stdout.flush()\n"
        "print('\\n' + json.dumps([code, sorted(sys.modules)]))\n"
    )
    env = {**os.environ, "COLUMNS": "80"}  # help 78 columns wide (click keeps a margin of 2)
    out = processes.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                        timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    text, _, last = out.stdout.rstrip("\n").rpartition("\n")
    code, modules = json.loads(last)
    return code, text, set(modules)


@pytest.mark.parametrize("program", sorted(TREES))
def test_the_table_says_what_each_command_is(program: str) -> None:
    group, table = TREES[program]
    assert isinstance(group, LazyGroup)
    loaded = group.commands  # every module imported
    assert sorted(loaded) == sorted(table)
    for name, command in loaded.items():
        module, attribute, _ = table[name]
        assert command.name == name and not command.hidden
        assert getattr(sys.modules[module], attribute) is command
        for width in range(10, 200):
            assert short_help(table, name, width) == command.get_short_help_str(width), name


@pytest.mark.parametrize("program", sorted(TREES))
def test_help_from_the_table_is_click_s_own(program: str) -> None:
    group, _ = TREES[program]
    group.commands  # noqa: B018 (loaded: click's list from the commands themselves)
    for width in (40, 80, 120):
        ctx = click.Context(group, info_name=program, terminal_width=width)
        ours = click.HelpFormatter(width=width)
        group.format_commands(ctx, ours)
        clicks = click.HelpFormatter(width=width)
        click.Group.format_commands(group, ctx, clicks)
        assert ours.getvalue() == clicks.getvalue() and "Commands:" in ours.getvalue()


@pytest.mark.parametrize("program", sorted(TREES))
def test_help_imports_no_subcommand(program: str) -> None:
    group, table = TREES[program]
    code, text, loaded = _loaded_by(ENTRIES[program], ["--help"])
    assert code == 0 and all(f"  {name} " in text for name in table)
    shown = CliRunner().invoke(group, ["--help"], prog_name="cli", terminal_width=78).output
    assert text.rstrip("\n") == shown.rstrip("\n")
    ours = sorted(m for m in loaded if m.split(".")[0] in ("ledger", "ledger_client"))
    assert ours == sorted(
        {"ledger", "ledger.core", "ledger.core.errors", "ledger_client", "ledger_client.clikit",
         "ledger_client.clikit.errors", "ledger_client.clikit.interrupt",
         "ledger_client.clikit.lazy", ENTRIES[program].rpartition(".")[0], ENTRIES[program],
         ENTRIES[program].replace(".entry", ".main")}
    )  # fmt: skip
    assert [m for m in loaded if m.split(".")[0] in ("cryptography", "pydantic", "asyncio")] == []


HEAVY = (
    *("asn1crypto", "cryptography.x509", "ledger.timestamp.rfc3161", "ledger.timestamp.asn1"),
    *("asyncio", "multiprocessing", "concurrent.futures", "grpc", "google.protobuf"),
    *("ledger_client.receipts", "ledger_client.audit.index", "ledger_client.audit.verify"),
    "ledger.core.checkpoint",  # witness keys: only with --witness
)


def test_lineage_from_stored_verdicts_loads_no_heavy_library(tmp_path: Path) -> None:
    runs = build()
    files = write(tmp_path / "runs", runs)
    db = tmp_path / "audit.sqlite"
    trust = ["--key", runs.world.key.key_string(), "--tsa-root", str(files["root"])]
    done = CliRunner().invoke(verify_main, ["index", str(tmp_path / "runs"), "--db", str(db),
                                            *trust, "--workers", "1"])  # fmt: skip
    assert done.exit_code == 0, done.output
    args = ["lineage", str(tmp_path / "runs"), *trust, "--db", str(db), "--json", "--tainted"]
    code, text, loaded = _loaded_by(ENTRIES["ledger-verify"], args)
    answer: dict[str, Any] = json.loads(text)
    assert code == 0 and {r["source"] for r in answer["runs"]} == {"index"}
    assert len(answer["records"]) > 1
    assert sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)) == []
    # the same walk with nothing stored verifies every run, and so loads them: the list is apt
    code, _, loaded = _loaded_by(ENTRIES["ledger-verify"], [a for a in args if a != str(db)
                                                            and a != "--db"])  # fmt: skip
    assert code == 0 and {"asn1crypto", "cryptography.x509", "ledger.timestamp.rfc3161"} <= loaded


def test_a_key_command_loads_neither_asyncio_nor_the_settings(tmp_path: Path) -> None:
    """``ledger verifier-key`` reads a key file (``ledger.fileio``, which retries with
    ``ledger.core.backoff``): no asyncio (only ``retry_async`` needs it), no pydantic."""
    key = tmp_path / "signer.key"
    made = CliRunner().invoke(ledger_main, ["keygen", "start.test/log", "--out", str(key)])
    assert made.exit_code == 0, made.output
    code, text, loaded = _loaded_by(ENTRIES["ledger"], ["verifier-key", "--key", str(key)])
    assert code == 0 and text.strip() == made.stdout.strip()
    assert "ledger.core.backoff" in loaded and "ledger.fileio.durable" in loaded
    heavy = ("asyncio", "pydantic", "pydantic_settings", "ledger.app", "concurrent.futures")
    assert sorted(m for m in loaded if m.split(".")[0] in heavy or m.startswith(heavy)) == []
