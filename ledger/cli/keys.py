"""Creating key files for the operator CLIs (``ledger keygen``, ``ledger witness keygen``): a
C2SP signed-note key of the kind asked for, written with mode 0600, its verifier key printed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Protocol, Self

import click

from ledger.core.errors import LedgerError
from ledger.fileio.keys import default_key_file, write_signer

__all__ = ["create_key_file"]


class _Verifier(Protocol):
    def key_string(self) -> str: ...


class _Generated(Protocol):
    @classmethod
    def generate(cls, name: str) -> Self: ...

    def key_string(self) -> str: ...

    def verifier(self) -> _Verifier: ...


def create_key_file(
    kind: type[_Generated], name: str, out: Path | None, force: bool, *, what: str
) -> None:
    """Generate a ``kind`` key named ``name`` into ``out`` (default: ``NAME.key``), refusing to
    overwrite unless ``force``; print its verifier key (stdout) and where it went (stderr)."""
    path = out or default_key_file(name)
    try:
        key = kind.generate(name)
        write_signer(path, key, overwrite=force)
    except FileExistsError:
        click.echo(f"error: {path} exists; pass --force to overwrite it", err=True)
        sys.exit(2)
    except (LedgerError, ValueError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    click.echo(key.verifier().key_string())
    click.echo(f"{what} key written to {path} (mode 0600)", err=True)
