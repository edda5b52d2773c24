"""``ledger config init``: a commented sample TOML file written from the ``Settings`` model
(every option with its description, range and default), so the sample cannot drift."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from ledger.app.settings import TABLES, Settings

__all__ = ["field_help", "sample_toml"]


def _bounds(info: FieldInfo) -> str:
    parts = []
    for meta in info.metadata:
        for name, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            value = getattr(meta, name, None)
            if value is not None:
                parts.append(f"{sign} {value}")
    return ", ".join(parts)


def field_help(name: str) -> str:
    """Help text of a setting: its description and range."""
    info = Settings.model_fields[name]
    bounds = _bounds(info)
    return (info.description or name) + (f" ({bounds})" if bounds else "")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        return json.dumps(str(value))
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value)


def sample_toml() -> str:
    """Every table and key, commented out at its default, with its description."""
    defaults = Settings.model_construct()
    lines = [
        "# Decision Ledger configuration (ledger serve --config FILE).",
        "# Precedence: defaults < this file < LEDGER_<FIELD> environment variables < flags.",
        "# Every key is optional; uncomment what you change.",
    ]
    for table, keys in TABLES.items():
        lines += ["", f"[{table}]"]
        for key, field in keys.items():
            lines.append(f"# {field_help(field)}")
            if field == "tsas":
                lines += [
                    "# [[anchor.tsa]]",
                    '# name = "freetsa"',
                    '# url = "https://freetsa.org/tsr"',
                    '# roots = ["freetsa-root.pem"]',
                    "# intermediates = []",
                    "# timeout_s = 10.0",
                ]
                continue
            if field == "witnesses":
                lines += [
                    "# [[witness]]   (repeatable; also written [[witnessing.witness]])",
                    '# name = "witness-1"',
                    '# url = "http://127.0.0.1:7380"',
                    '# key = "witness-1+abcd1234+BA..."',
                    "# timeout_s = 10.0",
                ]
                continue
            if field == "auth_mtls":
                lines += ["# [auth.mtls]", '# "agent-b" = ["append"]']
                continue
            value = getattr(defaults, field)
            if value is None:
                lines.append(f"# {key} = ...   (default: {_none_default(field)})")
            else:
                lines.append(f"# {key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def _none_default(field: str) -> str:
    return {
        "key_file": "<data_dir>/signer.key",
        "tokens_file": "<data_dir>/tokens.json",
    }.get(field, "unset")
