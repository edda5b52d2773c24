"""Flags of ``ledger serve`` built from the ``Settings`` model: the help text is the setting's
description and range, the shown default is the model's default (a flag left out keeps the
value from the file or the environment, so the flag itself defaults to None)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ledger.app.settings import Settings
from ledger.app.settings_sample import field_help

__all__ = ["FLAGS", "setting_option", "shown_default"]

_F = TypeVar("_F", bound=Callable[..., Any])
# What an empty or None default means, in words (the model's "" or None says nothing).
_SHOWN = {
    "key_file": "<data-dir>/signer.key",
    "mark_file": "<data-dir>.high-water",
    "tls_server_cert": "none: plaintext",
    "tls_server_key": "none",
    "tls_client_ca": "none: no mTLS",
    "tokens_file": "<data-dir>/tokens.json",
    "tiles_listen": "on, 127.0.0.1 at the gRPC port + 1",
    "metrics_listen": "on, on the tiles endpoint",
    "tiles_dir": "none: no static mirror",
    "object_store_url": "none: no bucket mirror",
    "object_store_endpoint": "AWS",
    "object_store_region": "us-east-1",
    "object_store_writer": "the host name",
}
FLAGS: dict[str, str] = {}
"""Setting field -> the ``ledger serve`` flag that sets it (errors in flags name the flag)."""


def shown_default(field: str) -> str:
    """The default of a setting as ``--help`` shows it."""
    if field in _SHOWN:
        return _SHOWN[field]
    default = Settings.model_fields[field].default
    if isinstance(default, bool):
        return "true" if default else "false"
    if default is None or default == "":
        raise AssertionError(f"setting {field}: say in _SHOWN what its empty default means")
    return str(default)


def setting_option(flag: str, field: str, **kwargs: Any) -> Callable[[_F], _F]:
    """A click option for the setting ``field`` (passed to the command as ``field``)."""
    env = "LEDGER_" + field.upper()
    FLAGS[field] = flag.split("/", 1)[0]
    return click.option(
        flag,
        field,
        help=f"{field_help(field)}; env {env}",
        show_default=shown_default(field),
        **kwargs,
    )
