"""The one top-level handler of the CLIs (``ledger``, ``ledger-verify``): every expected failure
becomes one line on stderr and an exit code, never a traceback.

Exit codes: 0 ok; 1 the operation failed (a claim did not verify, the port is busy, the data
dir is in use or unreadable, the server refused); 2 usage or bad input (a flag, a config value,
a file that does not parse or decode); 3 anchors pending (``ledger-verify`` with TSA roots:
everything verified but some receipts carry no anchor yet); 4 unsupported schema version (a
record or receipt newer than this tool: upgrade it); 130 interrupted (Ctrl-C: nothing printed, see
``clikit.interrupt``). ``LEDGER_DEBUG=1`` re-raises, for developers who want the traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

import click

from ledger.core.errors import (
    AnchorsPendingError,
    FormatError,
    InvalidArgumentError,
    LedgerError,
    StorageError,
    UnsupportedSchemaError,
)
from ledger_client.clikit.interrupt import EXIT_INTERRUPTED, interrupted

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PENDING",
    "EXIT_UNSUPPORTED",
    "EXIT_USAGE",
    "CliGroup",
    "describe",
    "fail",
]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_PENDING = 3  # verified but for anchors the log has not issued yet
EXIT_UNSUPPORTED = 4  # input of a newer schema version than this tool reads


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """End a command with one line on stderr (``error: ...``) and the exit code."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def describe(exc: BaseException) -> tuple[str, int]:
    """One line and an exit code for an exception."""
    if isinstance(exc, UnsupportedSchemaError):
        return str(exc), EXIT_UNSUPPORTED
    if isinstance(exc, AnchorsPendingError):
        return str(exc), EXIT_PENDING
    if isinstance(exc, (FormatError, InvalidArgumentError)):
        return str(exc), EXIT_USAGE
    if isinstance(exc, StorageError) and "lock file" in str(exc).lower():
        return (
            f"{str(exc).split(':', 1)[0]}: the data dir is in use by a running server (RocksDB "
            "lock held); stop it, or talk to it with --server",
            EXIT_FAILED,
        )
    if isinstance(exc, LedgerError):
        return str(exc), EXIT_FAILED
    if isinstance(exc, UnicodeDecodeError):
        return "a file is not UTF-8 text (a binary file?)", EXIT_USAGE
    if isinstance(exc, PermissionError):
        return f"{exc.filename or 'a file'}: permission denied", EXIT_FAILED
    if isinstance(exc, (NotADirectoryError, IsADirectoryError, FileNotFoundError)):
        return f"{exc.filename or 'a path'}: {exc.strerror}", EXIT_USAGE
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}", EXIT_FAILED
    return f"unexpected {type(exc).__name__}: {exc} (LEDGER_DEBUG=1 shows the traceback)", 1


class CliGroup(click.Group):
    """A click group whose commands fail with one line (``describe``), never a traceback, and
    end quietly with 130 on Ctrl-C (also while the arguments are parsed or help is shown)."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except KeyboardInterrupt:
            interrupted()

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            interrupted()
        except Exception as exc:
            if os.environ.get("LEDGER_DEBUG"):
                raise
            fail(*describe(exc))
