"""The ``ledger`` console script and ``python -m ledger``.

Importing this module guards Ctrl-C (``ledger_client.clikit.interrupt``) before the command tree
(click, pydantic, the server's packages) is imported: interrupted at any moment, ``ledger``
exits with 130 and no traceback.
"""

from __future__ import annotations

from ledger_client.clikit.interrupt import guard, run_cli

guard()

__all__ = ["main"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def main() -> None:
    """Run ``ledger``."""
    run_cli(_command_tree)


def _command_tree() -> Callable[[], object]:
    from ledger.cli.main import main as command_tree

    return command_tree
