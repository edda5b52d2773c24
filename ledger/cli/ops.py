"""Operator commands for a deployed log: ``tls dev-cert``, ``token create|list|revoke``,
``access open|close|status``, ``rotate-key``, ``fsck``, ``backup`` and ``restore from-backup``
(added to ``ledger.cli.restore``'s group).

They only parse and print; the work is in ``ledger.api.tls``, ``ledger.api.auth``,
``ledger.ops.binding``, ``ledger.ops.fsck``, ``ledger.ops.backup`` and ``ledger.ops.restore``.
Failures reach the one handler of ``ledger_client.clikit.errors`` (one line, exit 1 or 2).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ledger.core.errors import FailedPreconditionError, FormatError
from ledger.core.timefmt import from_epoch_seconds, parse_rfc3339, rfc3339_seconds
from ledger_client.clikit.connection import connection_from, connection_options

if TYPE_CHECKING:
    from ledger.app.settings import Settings

__all__ = [
    "access_group",
    "backup_command",
    "fsck_command",
    "restore_command",
    "rotate_key",
    "tls_group",
    "token_group",
]

_DIR = click.Path(file_okay=False, path_type=Path)
_FILE = click.Path(dir_okay=False, path_type=Path)
_config = click.option("--config", type=_FILE, help="TOML configuration file")
_data_dir = click.option("--data-dir", type=_DIR, help="data dir (default: from the config)")


def _settings(config: Path | None, **flags: Any) -> Settings:
    from ledger.app.settings import load_settings  # pydantic: only for a command that reads it

    return load_settings(config).with_overrides(**flags)


# --- tls -----------------------------------------------------------------------------------


@click.group("tls")
def tls_group() -> None:
    """TLS material for development."""


@tls_group.command("dev-cert")
@click.option(
    "--out",
    type=_DIR,
    default=Path("ledger-tls"),
    show_default=True,
    help="directory for ca.pem, server.pem/.key and <client>.pem/.key",
)
@click.option(
    "--host",
    "hosts",
    multiple=True,
    default=("localhost", "127.0.0.1"),
    show_default=True,
    help="server name or IP address (repeatable)",
)
@click.option(
    "--client",
    "clients",
    multiple=True,
    default=(),
    show_default=True,
    help="also issue a client certificate with this common name (mTLS; repeatable)",
)
def dev_cert(out: Path, hosts: tuple[str, ...], clients: tuple[str, ...]) -> None:
    """Make a local CA and a server certificate (and client certificates) for development."""
    from ledger.api.tls import make_dev_certs

    made = make_dev_certs(
        out, hosts=list(hosts), clients=list(clients), now=dt.datetime.now(dt.UTC)
    )
    click.echo(
        json.dumps(
            {
                "ca": str(made.ca),
                "server_cert": str(made.server_cert),
                "server_key": str(made.server_key),
                "clients": [{"cert": str(c), "key": str(k)} for c, k in made.clients],
            }
        )
    )
    click.echo(
        f"serve with [tls] cert = {made.server_cert}, key = {made.server_key}; "
        f"clients trust {made.ca} (--tls-ca / LEDGER_TLS_CA)",
        err=True,
    )


# --- tokens --------------------------------------------------------------------------------


def _token_store(config: Path | None, data_dir: Path | None) -> Any:
    from ledger.api.auth import TokenStore

    return TokenStore(_settings(config, data_dir=data_dir).token_file)


@click.group("token")
def token_group() -> None:
    """Bearer tokens of writers and admins (stored as SHA-256 hashes only)."""


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def expiry_of(text: str, now: int) -> int:
    """``--expires``: a duration from now (``90m``, ``12h``, ``30d``) or an RFC 3339 time."""
    text = text.strip()
    number, unit = text[:-1], text[-1:].lower()
    if unit in _UNITS and number.isdigit():
        if int(number) == 0:
            raise FormatError(f"--expires {text}: a token must live longer than that")
        return now + int(number) * _UNITS[unit]
    try:
        at = int(parse_rfc3339(text).timestamp())
    except ValueError:
        raise FormatError(
            f"--expires {text!r}: want a duration (90m, 12h, 30d) or an RFC 3339 time"
        ) from None
    if at <= now:
        raise FormatError(f"--expires {text}: that time has passed")
    return at


def _close_access(config: Path | None, data_dir: Path | None, why: str) -> None:
    """Record the log as closed (a credential now exists), when its data dir exists."""
    from ledger.ops.binding import read_binding, set_access

    where = _settings(config, data_dir=data_dir).data_dir
    if read_binding(where) is None:
        return  # no log yet: its first start sees the token and closes it
    _, changed = set_access(where, "closed", by="ledger token create", reason=why)
    if changed:
        click.echo(f"access closed and recorded in {where}/log.json: {why}", err=True)


@token_group.command("create")
@_config
@_data_dir
@click.option("--name", required=True, help="who holds it (shown in the access log)")
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    required=True,
    type=click.Choice(["append", "admin", "read"]),
    help="append, admin or read (repeatable)",
)
@click.option(
    "--expires",
    help="refuse the token after this: a duration (90m, 12h, 30d) or an RFC 3339 time",
)
def token_create(
    config: Path | None,
    data_dir: Path | None,
    name: str,
    scopes: tuple[str, ...],
    expires: str | None,
) -> None:
    """Create a token and print it once (only its hash is kept). The first token closes the
    log for good: only `ledger access open` reopens it to anonymous callers."""
    now = int(time.time())
    until = expiry_of(expires, now) if expires is not None else None
    store = _token_store(config, data_dir)
    token, record = store.create(name, scopes, now=now, expires=until)
    _close_access(config, data_dir, f"token {record.name} created")
    click.echo(token)
    click.echo(
        f"token {record.name} ({record.id}, scopes {','.join(record.scopes)}): shown once; "
        "give it as LEDGER_TOKEN. A running server picks it up within a second.",
        err=True,
    )


@token_group.command("list")
@_config
@_data_dir
def token_list(config: Path | None, data_dir: Path | None) -> None:
    """List tokens: name, id, scopes, creation time, expiry (never the token)."""
    now = time.time()
    for r in _token_store(config, data_dir).records():
        created = rfc3339_seconds(from_epoch_seconds(r.created))
        if r.expires is None:
            expiry = "expires never"
        else:
            at = rfc3339_seconds(from_epoch_seconds(r.expires))
            expiry = f"expired {at}" if r.expired(now) else f"expires {at}"
        click.echo(f"{r.name}\t{r.id}\t{','.join(r.scopes)}\t{created}\t{expiry}")


@token_group.command("revoke")
@_config
@_data_dir
@click.argument("name")
def token_revoke(config: Path | None, data_dir: Path | None, name: str) -> None:
    """Revoke the token NAME (its name or id); a running server refuses it within a second."""
    record = _token_store(config, data_dir).revoke(name)
    click.echo(f"revoked {record.name} ({record.id})")


# --- access ------------------------------------------------------------------------------


@click.group("access")
def access_group() -> None:
    """Whether the log requires credentials (recorded in the data dir's binding)."""


def _set_access(config: Path | None, data_dir: Path | None, state: str, reason: str) -> None:
    from ledger.api.auth import TokenStore
    from ledger.ops.binding import set_access

    settings = _settings(config, data_dir=data_dir)
    where = settings.data_dir
    if state == "open":
        held = TokenStore(settings.token_file).records()
        if held or settings.auth_mtls:
            what = f"{len(held)} token(s) in {settings.token_file}" if held else "mTLS identities"
            raise FailedPreconditionError(
                f"the log has {what}: a log with credentials stays closed; revoke them first "
                "(`ledger token revoke`, [auth.mtls])"
            )
    binding, changed = set_access(
        where, "open" if state == "open" else "closed", by=f"ledger access {state}", reason=reason
    )
    if not changed:
        click.echo(f"access of {where} is already {binding.access}; nothing recorded", err=True)
        return
    line = f"access {binding.access} for {binding.origin} in {where}: {reason}"
    logging.getLogger("ledger.access").warning("%s", line)
    click.echo(line, err=True)
    if binding.access == "open":
        click.echo(
            "on a loopback listener with no usable token, anyone may now append and back up; "
            "a running server follows within a second",
            err=True,
        )


@access_group.command("open")
@_config
@_data_dir
@click.option("--reason", required=True, help="why (recorded in the binding)")
def access_open(config: Path | None, data_dir: Path | None, reason: str) -> None:
    """Reopen a closed log to anonymous callers (loopback, no tokens): logged and recorded."""
    _set_access(config, data_dir, "open", reason)


@access_group.command("close")
@_config
@_data_dir
@click.option("--reason", required=True, help="why (recorded in the binding)")
def access_close(config: Path | None, data_dir: Path | None, reason: str) -> None:
    """Close the log: calls that write need a credential, whatever the tokens file says."""
    _set_access(config, data_dir, "closed", reason)


@access_group.command("status")
@_config
@_data_dir
def access_status(config: Path | None, data_dir: Path | None) -> None:
    """Print the access state and its recorded changes (one JSON object)."""
    from ledger.ops.binding import read_binding

    where = _settings(config, data_dir=data_dir).data_dir
    binding = read_binding(where)
    if binding is None:
        raise FormatError(f"{where} holds no log (no binding)")
    events = [e.to_json() for e in binding.access_events]
    click.echo(json.dumps({"access": binding.access, "events": events}))


# --- key rotation --------------------------------------------------------------------------


@click.command("rotate-key")
@_config
@_data_dir
@click.option("--key", "key_file", type=_FILE, help="the log's key file (default: from config)")
@click.option("--new-key", type=_FILE, help="the new signer key (default: generate one)")
def rotate_key(
    config: Path | None, data_dir: Path | None, key_file: Path | None, new_key: Path | None
) -> None:
    """Deliberately replace a stopped log's signing key.

    The old key file is kept as <key>.retired-<time>; the data dir's binding records the new
    verifier key and the earlier ones. Tell everyone who verifies the log (monitors,
    witnesses, ledger-verify users) the new verifier key: checkpoints signed from now on verify
    only with it.
    """
    from ledger.ops.binding import rotate_key as rotate

    settings = _settings(config, data_dir=data_dir, key_file=key_file)
    binding = rotate(settings.data_dir, settings.signer_key_file, new_key)
    click.echo(binding.verifier_key)
    click.echo(
        f"new key in {settings.signer_key_file}; previous: {', '.join(binding.previous_keys)}",
        err=True,
    )


# --- fsck ----------------------------------------------------------------------------------


def tsa_roots(settings: Settings, data_dir: Path | None = None) -> dict[str, list[Any]]:
    """Trust roots per TSA name: configured TSAs, the embedded TSA's state if present, and the
    roots a restore put back (``ledger.app.trust``)."""
    from ledger.app.trust import tsa_roots as roots_of

    return roots_of(settings, data_dir)


UNCHECKED_EXIT = 3  # fsck: no problem found, but anchors of a TSA with no configured roots


@click.command("fsck")
@_config
@_data_dir
@click.option("--key", "key_file", type=_FILE, help="the log's key file (default: from config)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--tiles", "tiles_url", help="check the log published at this tiles URL instead")
@click.option("--vkey", help="with --tiles: the log's verifier key (default: from the key file)")
def fsck_command(
    config: Path | None,
    data_dir: Path | None,
    key_file: Path | None,
    as_json: bool,
    tiles_url: str | None,
    vkey: str | None,
) -> None:
    """Check a stopped log's data: entries, every node, dedup index, tree state, checkpoint
    signatures and roots, anchor tokens, origin/key binding, the high-water mark's checkpoint.
    With --tiles URL: the log as published there (a bucket, a CDN, a mirror; several URLs
    separated by commas), every entry, tile, root and the bucket's anchors.
    Exit 1 names each problem; exit 3: no problem, but anchors not checked (no TSA roots)."""
    from ledger.ops.fsck import fsck

    settings = _settings(config, data_dir=data_dir, key_file=key_file)
    if tiles_url is not None:
        from ledger.cli.fsck_tiles import fsck_tiles

        fsck_tiles(tiles_url, vkey, settings.signer_key_file, tsa_roots(settings), as_json)
    if not settings.data_dir.is_dir():
        raise FormatError(f"data dir {settings.data_dir} is not a directory")
    report = fsck(
        settings.data_dir,
        key_file=settings.signer_key_file,
        tsa_roots=tsa_roots(settings),
        mark_file=settings.high_water_file,
    )
    if as_json:
        click.echo(
            json.dumps(
                {
                    "ok": report.ok,
                    "counts": report.counts,
                    "seconds": round(report.seconds, 3),
                    "problems": [
                        {"what": p.what, "where": p.where, "detail": p.detail}
                        for p in report.problems
                    ],
                    "notes": report.notes,
                    "anchors_not_checked": report.unchecked,
                }
            )
        )
    else:
        for problem in report.problems:
            click.echo(f"PROBLEM: {problem}", err=True)
        for note in report.notes:
            click.echo(f"note: {note}", err=True)
        counts = ", ".join(f"{v} {k}" for k, v in report.counts.items())
        verdict = "OK" if report.ok else f"{len(report.problems)} problem(s)"
        if report.ok and report.unchecked:
            verdict = f"WARNING: {report.unchecked} anchor(s) not checked (no TSA roots)"
        click.echo(
            f"fsck {settings.data_dir}: {verdict}; checked {counts} in {report.seconds:.2f} s"
        )
    sys.exit(1 if not report.ok else UNCHECKED_EXIT if report.unchecked else 0)


# --- backup and restore --------------------------------------------------------------------


@click.command("backup")
@connection_options
@_config
@_data_dir
@click.option("--out", type=_DIR, required=True, help="backup directory (must not exist)")
@click.option(
    "--offline",
    is_flag=True,
    help="back up the stopped log in --data-dir (or --config) instead of a server",
)
def backup_command(
    config: Path | None, data_dir: Path | None, out: Path, offline: bool, **conn: Any
) -> None:
    """Take a consistent backup: from a running server (the Backup admin RPC; OUT is a path on
    the server's host) or, with --offline, from a stopped log's data dir."""
    from ledger.app.trust import backup_trust
    from ledger.ops.backup import backup_data_dir

    target = out.resolve()
    if offline or data_dir is not None or config is not None:
        settings = _settings(config, data_dir=data_dir)
        done = backup_data_dir(settings.data_dir, target, backup_trust(settings))
        where, size, cp = str(done.out_dir), done.tree_size, done.checkpoint_size
    else:
        from ledger_client.remote.log import RemoteLog

        with RemoteLog(connection_from(**conn), timeout=600) as remote:
            where, size, cp = remote.backup(str(target))
    click.echo(json.dumps({"out": where, "tree_size": size, "checkpoint_size": cp}))


@click.command("from-backup")
@_config
@_data_dir
@click.option("--from", "source", type=_DIR, required=True, help="a backup directory")
@click.option(
    "--published-checkpoint",
    "notes",
    type=_FILE,
    multiple=True,
    help="a checkpoint the log published (from a monitor or witness); repeatable",
)
@click.option(
    "--force",
    is_flag=True,
    help="restore even if older than a published checkpoint (a visible rollback)",
)
def restore_command(
    config: Path | None,
    data_dir: Path | None,
    source: Path,
    notes: tuple[Path, ...],
    force: bool,
) -> None:
    """Restore a backup into a stopped log's data dir, refusing a state older than the newest
    checkpoint the log published (its high-water mark, the data dir's own checkpoints, and any
    --published-checkpoint; unless --force); fsck runs on the result first."""
    from ledger.log.highwater import HighWaterMark
    from ledger.ops.backup import TRUST_DIR, read_witnesses
    from ledger.ops.fsck import fsck
    from ledger.ops.restore import restore

    settings = _settings(config, data_dir=data_dir)
    texts = [p.read_bytes().decode("utf-8") for p in notes]
    mark = HighWaterMark(settings.high_water_file).read()
    done = restore(
        source,
        settings.data_dir,
        published_notes=texts,
        published_sizes=[mark.checkpoint.size] if mark is not None else [],
        force=force,
        run_fsck=lambda d: fsck(
            d, key_file=settings.signer_key_file, tsa_roots=tsa_roots(settings, d)
        ),
        tokens_file=settings.token_file,
    )
    click.echo(
        json.dumps(
            {
                "data_dir": str(done.data_dir),
                "tree_size": done.tree_size,
                "checkpoint_size": done.checkpoint_size,
                "newest_published": done.newest_published,
                "previous_db": str(done.replaced) if done.replaced else None,
                "fsck": "ok",
                "access": done.access,
                "tokens_restored": done.tokens_restored,
                "trust_restored": done.trust_restored,
                "witnesses_recorded": [
                    w.name for w in read_witnesses(settings.data_dir / TRUST_DIR)
                ],
            }
        )
    )
