"""The CLIs' shared plumbing: ``ledger serve --help`` tells the defaults as they are, and the
server's CLI takes its plumbing from ``ledger_client.clikit``, never from the other CLI."""

from __future__ import annotations

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
