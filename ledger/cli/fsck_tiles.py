"""``ledger fsck --tiles URL``: check a published copy of the log (a bucket's HTTP endpoint, a
CDN, a mirror folder) instead of a data dir (``ledger_client.remote.tiles_audit``). The log's
key comes from ``--vkey`` or from the key file of the settings; TSA roots from the settings."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ledger.core.errors import FormatError, LedgerError

__all__ = ["fsck_tiles"]


def fsck_tiles(
    url: str, vkey: str | None, key_file: Any, tsa_roots: dict[str, list[Any]], as_json: bool
) -> None:
    """Run the audit and exit: 0 ok, 1 problems, 2 usage, 3 anchors not checked."""
    from ledger.core.note import Ed25519Verifier
    from ledger.fileio.keys import load_signer
    from ledger_client.remote.tiles import TileClient
    from ledger_client.remote.tiles_audit import audit_tiles

    try:
        if vkey is not None:
            verifier = Ed25519Verifier.from_key_string(vkey)
        elif key_file is not None and key_file.exists():
            verifier = load_signer(key_file).verifier()
        else:
            raise FormatError("give --vkey VKEY (the log's verifier key) or the log's key file")
        report = audit_tiles(TileClient(url), [verifier], tsa_roots=tsa_roots)
    except FormatError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except LedgerError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps({
            "ok": report.ok, "url": report.url, "size": report.size, "counts": report.counts,
            "seconds": round(report.seconds, 3), "anchors_not_checked": report.unchecked,
            "problems": [{"what": p.what, "where": p.where, "detail": p.detail}
                         for p in report.problems],
        }))  # fmt: skip
    else:
        for problem in report.problems:
            click.echo(f"PROBLEM: {problem}", err=True)
        counts = ", ".join(f"{v} {k}" for k, v in report.counts.items())
        verdict = "OK" if report.ok else f"{len(report.problems)} problem(s)"
        if report.ok and report.unchecked:
            verdict = f"WARNING: {report.unchecked} anchor(s) not checked (no TSA roots)"
        click.echo(
            f"fsck {report.url} (size {report.size}): {verdict}; checked {counts} "
            f"in {report.seconds:.2f} s"
        )
    sys.exit(1 if not report.ok else 3 if report.unchecked else 0)
