"""``ledger``: the operator's CLI (keygen, serve, config, anchor, receipts, tiles, witnesses, tsa,
tokens, fsck, backup, restore, migrate-storage, serve-reader).

It only parses and prints; the work lives in ``ledger.app``, ``ledger.fileio.keys`` and
``ledger.app.settings``. Exit codes: 0 ok, 1 the operation failed, 2 usage or bad input.

Start-up: a subcommand's module is imported when that subcommand runs (``COMMANDS``: name ->
module, attribute and the first paragraph of its help, ``ledger_client.clikit.lazy``), so
``ledger --help`` loads none of them, and ``ledger append`` neither pydantic nor the server.
``main.commands`` (the docs' checks) loads every subcommand.
"""

from __future__ import annotations

import click

from ledger_client.clikit.lazy import LazyGroup

__all__ = ["COMMANDS", "main"]

_P = "ledger.cli."
# subcommand -> (its module, its click command, its help's first paragraph, or its first
# sentence: all ``--help`` shows); a test holds each entry equal to the command
# (tests/unit/test_cli_start.py)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "keygen": (
        _P + "keys",
        "keygen",
        "Create an Ed25519 signer key NAME (file mode 0600); print its verifier key.",
    ),
    "verifier-key": (
        _P + "keys",
        "verifier_key",
        "Print the verifier key of a signer key file (what third parties verify with).",
    ),
    "serve": (
        _P + "serve",
        "serve",
        "Run the log (embedded defaults: ./ledger-data, a dev key, localhost, embedded TSA).",
    ),
    "anchor": (
        _P + "anchor",
        "anchor",
        "Anchor the latest checkpoint now with every configured TSA (for cron).",
    ),
    "tsa": (_P + "tsa", "tsa", "Run the embedded development RFC 3161 TSA over HTTP."),
    "config": (
        _P + "config",
        "config_group",
        "Inspect the configuration, or write a commented sample.",
    ),
    "append": (
        _P + "append",
        "append",
        "Append one record digest, wait for its checkpoint, print (and save) its proof.",
    ),
    "receipt": (
        _P + "receipt",
        "receipt_group",
        "Fetch, upgrade and complete receipts from a running log (check them: ledger-verify).",
    ),
    "tiles": (_P + "tiles", "tiles_group", "C2SP tlog-tiles: the static mirror."),
    "objstore": (
        _P + "objstore",
        "objstore_group",
        "S3-compatible object storage: check a store before the log relies on it.",
    ),
    "witness": (
        _P + "witness",
        "witness",
        "Run a tlog-witness that cosigns checkpoints only when they extend what it cosigned.",
    ),
    "witnesses": (
        _P + "witness",
        "witnesses",
        "The log's view of its witnesses: last cosigned size, last error, quorum latency.",
    ),
    "migrate-storage": (
        _P + "migrate",
        "migrate_storage",
        "Convert a stopped log's data dir to the current storage layout (safe to rerun).",
    ),
    "serve-reader": (
        _P + "reader",
        "serve_reader",
        "Serve reads of a running log from its data dir (a RocksDB secondary), read-only.",
    ),
    "restore": (
        _P + "restore",
        "restore",
        "Inspect and repair a data dir that fell behind its published high-water mark.",
    ),
    "tls": (_P + "ops", "tls_group", "TLS material for development."),
    "token": (
        _P + "ops",
        "token_group",
        "Bearer tokens of writers and admins (stored as SHA-256 hashes only).",
    ),
    "access": (
        _P + "ops",
        "access_group",
        "Whether the log requires credentials (recorded in the data dir's binding).",
    ),
    "rotate-key": (_P + "ops", "rotate_key", "Deliberately replace a stopped log's signing key."),
    "fsck": (
        _P + "ops",
        "fsck_command",
        "Check a stopped log's data: entries, every node, dedup index, tree state, checkpoint "
        "signatures and roots, anchor tokens, origin/key binding, the high-water mark's "
        "checkpoint.",
    ),
    "backup": (
        _P + "ops",
        "backup_command",
        "Take a consistent backup: from a running server (the Backup admin RPC; OUT is a path "
        "on the server's host) or, with --offline, from a stopped log's data dir.",
    ),
}


@click.group(
    cls=LazyGroup,
    table=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
)
@click.version_option(package_name="decision-ledger")
def main() -> None:
    """Run and operate a Decision Ledger transparency log."""
