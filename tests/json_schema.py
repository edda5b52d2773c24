"""A small JSON Schema (draft 2020-12) evaluator for the keywords the published schemas use."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any


def schema_errors(schema: dict[str, Any], value: Any, root: dict[str, Any]) -> list[str]:
    """A small draft 2020-12 evaluator for the keywords the published schema uses."""
    errors: list[str] = []
    for key, arg in schema.items():
        check = _KEYWORDS.get(key)
        if check is None:
            assert key in _ANNOTATIONS, f"evaluator does not know keyword {key}"
        elif not check(arg, value, root, schema):
            errors.append(key)
    return errors


def _ok(schema: dict[str, Any], value: Any, root: dict[str, Any]) -> bool:
    return not schema_errors(schema, value, root)


def _is_type(name: str, value: Any) -> bool:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return {
        "null": value is None,
        "boolean": isinstance(value, bool),
        "number": number,
        "integer": number and float(value).is_integer(),
        "string": isinstance(value, str),
        "array": isinstance(value, list),
        "object": isinstance(value, dict),
    }[name]


def _ref(arg: str, value: Any, root: dict[str, Any], _: Any) -> bool:
    return _ok(root["$defs"][arg.removeprefix("#/$defs/")], value, root)


def _if(arg: Any, value: Any, root: dict[str, Any], schema: dict[str, Any]) -> bool:
    branch = schema.get("then" if _ok(arg, value, root) else "else", {})
    return _ok(branch, value, root)


_ANNOTATIONS = {"$schema", "$id", "$comment", "$defs", "title", "description", "format"}
_ANNOTATIONS |= {"then", "else"}
_KEYWORDS: dict[str, Callable[[Any, Any, dict[str, Any], dict[str, Any]], bool]] = {
    "$ref": _ref,
    "if": _if,
    "type": lambda a, v, r, s: any(_is_type(t, v) for t in ([a] if isinstance(a, str) else a)),
    "const": lambda a, v, r, s: bool(v == a),
    "enum": lambda a, v, r, s: v in a,
    "required": lambda a, v, r, s: not isinstance(v, dict) or all(k in v for k in a),
    "properties": lambda a, v, r, s: (
        not isinstance(v, dict) or all(_ok(a[k], v[k], r) for k in a if k in v)
    ),
    "additionalProperties": lambda a, v, r, s: (
        not isinstance(v, dict)
        or all(
            (a if isinstance(a, bool) else _ok(a, v[k], r))
            for k in v
            if k not in s.get("properties", {})
        )
    ),
    "propertyNames": lambda a, v, r, s: not isinstance(v, dict) or all(_ok(a, k, r) for k in v),
    "maxProperties": lambda a, v, r, s: not isinstance(v, dict) or len(v) <= a,
    "items": lambda a, v, r, s: not isinstance(v, list) or all(_ok(a, x, r) for x in v),
    "minItems": lambda a, v, r, s: not isinstance(v, list) or len(v) >= a,
    "maxItems": lambda a, v, r, s: not isinstance(v, list) or len(v) <= a,
    "uniqueItems": lambda a, v, r, s: (
        not (isinstance(v, list) and a) or len({json.dumps(x, sort_keys=True) for x in v}) == len(v)
    ),
    "minLength": lambda a, v, r, s: not isinstance(v, str) or len(v) >= a,
    "pattern": lambda a, v, r, s: not isinstance(v, str) or re.search(a, v) is not None,
    "minimum": lambda a, v, r, s: not _is_type("number", v) or v >= a,
    "maximum": lambda a, v, r, s: not _is_type("number", v) or v <= a,
    "anyOf": lambda a, v, r, s: any(_ok(x, v, r) for x in a),
    "allOf": lambda a, v, r, s: all(_ok(x, v, r) for x in a),
    "not": lambda a, v, r, s: not _ok(a, v, r),
}
