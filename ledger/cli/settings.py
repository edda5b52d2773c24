"""Flags of ``ledger serve`` built from the ``Settings`` model: the help text is the setting's
description and range, the shown default is the model's default (a flag left out keeps the
value from the file or the environment, so the flag itself defaults to None)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ledger.app.settings import Settings
from ledger.app.settings_sample import field_help

__all__ = ["setting_option"]

_F = TypeVar("_F", bound=Callable[..., Any])
_SHOWN = {"key_file": "<data-dir>/signer.key", "tls_server_cert": "none (plaintext)",
          "tls_server_key": "none", "tls_client_ca": "none (no mTLS)"}  # fmt: skip


def setting_option(flag: str, field: str, **kwargs: Any) -> Callable[[_F], _F]:
    """A click option for the setting ``field`` (passed to the command as ``field``)."""
    default = Settings.model_fields[field].default
    shown = _SHOWN.get(field, default)
    if isinstance(shown, bool):
        shown = "true" if shown else "false"
    env = "LEDGER_" + field.upper()
    return click.option(
        flag,
        field,
        help=f"{field_help(field)}; env {env}",
        show_default=str(shown) if shown != "" else "disabled",
        **kwargs,
    )
