"""Configuration errors in the words the operator wrote: the file and its ``[table] key``, the
``LEDGER_*`` variable, or the ``--flag``; an unknown key gets the nearest known one
(``did you mean listen?``). One line each, raised as ``FormatError`` (the CLIs: exit 2).

The settings model (``ledger.app.settings``) says where a value came from (``Where``) and what
the known names are; this module only words the message.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = [
    "FieldProblem",
    "Where",
    "describe",
    "nearest",
    "parse_failure",
    "unknown_key",
    "unknown_table",
]

_PARSE_FAILED = re.compile(r'error parsing value for field "(\w+)"')


class FieldProblem(ValueError):
    """A check across settings (a model validator) that names the setting it is about."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class Where:
    """How to name a setting in one layer: the TOML file, the environment, or the flags."""

    layer: str  # "file", "environment" or "flags"
    keys: Mapping[str, tuple[str, str]]  # field -> (table, key) as written in TOML
    submodels: Mapping[str, type[BaseModel]]  # field -> model of each entry (lists of tables)
    path: Path | None = None
    env_prefix: str = "LEDGER_"
    flags: Mapping[str, str] | None = None  # field -> flag, where it is not --field-name
    present: frozenset[str] | None = None  # the fields this layer sets (None: any)
    fallback: Where | None = None  # names a field this layer does not set (a cross-check)

    def name(self, loc: Sequence[str | int]) -> str:
        """``a.toml: [server] listen``, ``environment variable LEDGER_LISTEN``, ``--listen``."""
        if not loc:
            return {"environment": "environment", "flags": "options"}.get(
                self.layer, str(self.path or "configuration")
            )
        field, rest = str(loc[0]), list(loc[1:])
        if self.present is not None and field not in self.present and self.fallback is not None:
            return self.fallback.name(loc)
        if self.layer == "environment":
            return f"environment variable {self.env_prefix}{field.upper()}{_path(rest)}"
        if self.layer == "flags":
            flag = (self.flags or {}).get(field, "--" + field.replace("_", "-"))
            return f"option {flag}{_path(rest)}"
        table, key = self.keys.get(field, ("", field))
        if field in self.submodels and rest and isinstance(rest[0], int):
            entry = f"[[{table}.{key}]]" if table else f"[[{key}]]"
            inner = f" {_path(rest[1:]).lstrip('.')}" if rest[1:] else ""
            return f"{self._prefix()}{entry} #{rest[0] + 1}{inner}"
        if rest and isinstance(rest[0], str):  # a key of a table-valued setting ([auth.mtls])
            table, key, rest = f"{table}.{key}", rest[0], rest[1:]
        where = f"[{table}] {key}" if table else key
        return f"{self._prefix()}{where}{_path(rest)}"

    def _prefix(self) -> str:
        return f"{self.path}: " if self.layer == "file" and self.path is not None else ""


def _path(rest: Sequence[str | int]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in rest)


def nearest(word: str, known: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The known name closest to ``word`` (difflib), if any is close enough."""
    found = difflib.get_close_matches(word, list(known), n=1, cutoff=cutoff)
    return found[0] if found else None


def _did_you_mean(word: str, known: Iterable[str]) -> str:
    match = nearest(word, known)
    return f" (did you mean {match}?)" if match else ""


def unknown_key(path: Path, table: str, key: str, tables: Mapping[str, Mapping[str, str]]) -> str:
    """``a.toml: [server] lisen: unknown key (did you mean listen?)``."""
    hint = _did_you_mean(key, tables[table])
    if not hint:
        elsewhere = [f"[{t}] {key}" for t, keys in tables.items() if key in keys]
        hint = f" (did you mean {elsewhere[0]}?)" if elsewhere else ""
    return f"{path}: [{table}] {key}: unknown key{hint}"


def unknown_table(
    path: Path, name: str, value: Any, tables: Mapping[str, Mapping[str, str]]
) -> str:
    """An unknown ``[table]``, or a key written outside any table."""
    if isinstance(value, dict):
        match = nearest(name, tables)
        hint = f" (did you mean [{match}]?)" if match else ""
        return f"{path}: [{name}]: unknown table{hint}"
    keys: dict[str, str] = {}
    for table, known in tables.items():
        for key in known:
            keys.setdefault(key, f"[{table}] {key}")
    match = nearest(name, keys)
    hint = f" (did you mean {keys[match]}?)" if match else ""
    return f"{path}: {name}: a key outside any table{hint}"


def describe(exc: ValidationError, where: Where) -> str:
    """One line for the first problem (unknown keys first: they explain missing ones)."""
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    loc: list[str | int] = list(first["loc"])
    problem = first.get("ctx", {}).get("error")
    if isinstance(problem, FieldProblem):
        loc = [problem.field]
    elif isinstance(problem, ValueError) and _PARSE_FAILED.search(str(problem)):
        return parse_failure(problem, where)
    if first["type"] == "extra_forbidden":
        message = "unknown key" + _did_you_mean(str(loc[-1]), _known_keys(loc, where))
    else:
        message = str(first["msg"]).removeprefix("Value error, ")
        value = first.get("input")
        if not isinstance(value, dict | list) and repr(value) not in message:
            message += f" (got {value!r})"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where.name(loc)}: {message}{more}"


def parse_failure(exc: ValueError, where: Where) -> str:
    """A ``LEDGER_*`` value that had to be JSON (a list or table setting) and is not."""
    found = _PARSE_FAILED.search(str(exc))
    if found is None:
        return f"environment: {exc}"
    env = Where("environment", where.keys, where.submodels, env_prefix=where.env_prefix)
    return f"{env.name([found.group(1)])}: not valid JSON"


def _known_keys(loc: Sequence[str | int], where: Where) -> list[str]:
    model = where.submodels.get(str(loc[0])) if len(loc) > 1 else None
    return list(model.model_fields) if model is not None else []
