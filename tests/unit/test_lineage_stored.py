"""``ledger-verify lineage --db`` at scale: a subcommand imports only its own modules, and the
answer from stored verdicts, written as a stream, is the answer ``json.dumps`` gives."""

from __future__ import annotations

import json
import sys

import click

from ledger_client.audit.verdicts import DEFAULT_MAX_DELAY, format_delta
from ledger_client.cli.main import COMMANDS, main
from ledger_client.cli.options import DEFAULT_MAX_DELAY_TEXT
from tests import processes


def test_every_subcommand_is_listed_and_loads_by_its_name() -> None:
    loaded = main.commands
    assert sorted(loaded) == sorted(COMMANDS)
    assert all(isinstance(c, click.Command) and c.name == n for n, c in loaded.items())
    assert format_delta(DEFAULT_MAX_DELAY) == DEFAULT_MAX_DELAY_TEXT


def _loaded_by(*args: str) -> set[str]:
    probe = (
        "import json, sys\nfrom ledger_client.cli.main import main\n"
        f"try:\n    main({list(args)!r})\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = processes.run([sys.executable, "-c", probe], capture_output=True, text=True,
                        timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_lineage_loads_neither_the_report_nor_the_monitor() -> None:
    loaded = _loaded_by("lineage", "--help")
    heavy = ("ledger_client.audit.report_html", "ledger_client.audit.export",
             "ledger_client.cli.monitor", "ledger_client.remote", "ledger_client.audit.index",
             "ledger_client.receipts", "cryptography.x509", "asyncio")  # fmt: skip
    assert sorted(m for m in loaded if m.startswith(heavy)) == []
    assert "ledger_client.cli.audit" in loaded
