"""``ledger keygen`` and ``ledger verifier-key``, and creating key files for the operator CLIs
(``ledger keygen``, ``ledger witness keygen``): a C2SP signed-note key of the kind asked for,
written with mode 0600, its verifier key printed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Protocol, Self

import click

from ledger.core.errors import LedgerError
from ledger.fileio.keys import default_key_file, write_signer
from ledger_client.clikit.errors import fail

__all__ = ["create_key_file", "keygen", "verifier_key"]


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


@click.command()
@click.argument("name")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="signer key file")
@click.option("--force", is_flag=True, help="overwrite an existing key file")
def keygen(name: str, out: Path | None, force: bool) -> None:
    """Create an Ed25519 signer key NAME (file mode 0600); print its verifier key."""
    from ledger.core.checkpoint import Ed25519Signer

    create_key_file(Ed25519Signer, name, out, force, what="signer")


@click.command("verifier-key")
@click.option(
    "--key",
    "key_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("ledger-data/signer.key"),
    show_default=True,
    help="signer key file",
)
def verifier_key(key_file: Path) -> None:
    """Print the verifier key of a signer key file (what third parties verify with)."""
    from ledger.fileio.keys import load_signer

    try:
        click.echo(load_signer(key_file).verifier().key_string())
    except LedgerError as exc:
        fail(str(exc), 2)
