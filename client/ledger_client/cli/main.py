"""``ledger-verify``: the offline verifier CLI (RFC 9162 proofs, C2SP checkpoints, tlog-proof).

Offline subcommands import neither grpc nor rocksdict; a subcommand that talks to a server
imports grpc lazily inside its body. Exit codes: 0 valid, 1 invalid, 2 usage or malformed input
(set in one place, ``ledger_client.clikit.outcome.finish``).

Start-up: a subcommand's module is imported when that subcommand runs (``COMMANDS``: name ->
module, attribute and the first paragraph of its help, ``ledger_client.clikit.lazy``), so
``ledger-verify lineage`` does not load the report, the monitor or the tiles client, and
``ledger-verify --help`` loads none of them. ``main.commands`` (the docs' checks) loads every
subcommand.
"""

from __future__ import annotations

import click

from ledger_client.clikit.lazy import LazyGroup

__all__ = ["COMMANDS", "main"]

_P = "ledger_client.cli."
# subcommand -> (its module, its click command, its help's first paragraph); a test holds each
# entry equal to the command (tests/unit/test_cli_start.py)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "inclusion": (_P + "proofs", "inclusion", "Check an RFC 9162 inclusion proof."),
    "consistency": (
        _P + "proofs",
        "consistency",
        "Check an RFC 9162 consistency proof (policy for size1 == 0 / size1 == size2: "
        'docs/formats.md "Merkle edge-case policy").',
    ),
    "checkpoint": (
        _P + "notes",
        "checkpoint",
        "Check a C2SP signed checkpoint note read from FILE (default: stdin).",
    ),
    "tlog-proof": (
        _P + "notes",
        "tlog_proof",
        "Check a c2sp.org/tlog-proof@v1 file: its checkpoint and the leaf's inclusion.",
    ),
    "anchor": (
        _P + "anchor",
        "anchor",
        "Check an RFC 3161 token stamping SHA-256 of a checkpoint body.",
    ),
    "monitor": (
        _P + "monitor",
        "monitor",
        "Follow a log: each new checkpoint must extend the last one trusted (state in --state).",
    ),
    "receipt": (
        _P + "receipts",
        "receipt",
        "Check a decision-record receipt: record, leaf, proofs, checkpoint, anchors, witnesses.",
    ),
    "run": (
        _P + "receipts",
        "run",
        "Check a run (folder of *.json or JSON-lines of {record, receipt}): complete, in order.",
    ),
    "receipt-fetch": (
        _P + "tiles",
        "receipt_fetch",
        "Fetch the receipt of a logged record digest from tiles (with its anchors when the URL "
        "is a bucket the log publishes to; the log's endpoint and mirror folders carry none).",
    ),
    "receipt-upgrade": (
        _P + "tiles",
        "receipt_upgrade",
        "Move a receipt, or every receipt of a run file (JSON lines), to the latest checkpoint "
        "served as tiles (consistency proof kept); written atomically to --out (which may be "
        "FILE).",
    ),
    "lineage": (
        _P + "audit",
        "lineage",
        "Check every run given, then walk the parent graph from a record (or every tainted "
        "memory write).",
    ),
    "report": (
        _P + "audit",
        "report",
        "Write self-contained HTML: timeline, decisions, parent graph, checks, problems (more "
        "than 20 runs: an overview page and one page per run in OUT-runs/).",
    ),
    "export": (
        _P + "audit",
        "export",
        "Export a verified run, each record with its verdict, as OTLP/JSON or PROV-JSON.",
    ),
    "disclose": (
        _P + "audit",
        "disclose",
        "Write a receipt that discloses exactly the given field paths of its record.",
    ),
    "index": (
        _P + "index",
        "index",
        "Verify and index the run files under DIR into an SQLite database (incrementally).",
    ),
    "query": (
        _P + "index",
        "query",
        "Query an audit index: records by agent, run, kind, tool, time, trust, outcome, status.",
    ),
    "agent-key": (
        _P + "agent",
        "agent_key",
        'Create or show an agent\'s signing key (docs/formats.md "Agent signatures").',
    ),
    "chain": (
        _P + "agent",
        "chain",
        "Find every run the agent opened in the log: gaps, forks, restarts, chain heads.",
    ),
}


@click.group(
    cls=LazyGroup,
    table=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
)
@click.version_option(package_name="decision-ledger")
def main() -> None:
    """Verify Decision Ledger proofs, checkpoints and receipts offline."""
