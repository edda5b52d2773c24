"""RFC 8785 JSON Canonicalization Scheme (JCS), strict JSON parsing, and field paths.

Pure: standard library plus ``rfc8785``, no I/O.

* ``canonical_bytes`` is RFC 8785 §3.2: members sorted by UTF-16 code units (§3.2.3), no
  insignificant whitespace (§3.2.1), ECMAScript number formatting (§3.2.2.3), minimal string
  escaping (§3.2.2.2), UTF-8 output (§3.2.4). Before serialising, every value is checked against
  the I-JSON limits RFC 8785 §3.1 relies on (RFC 7493): integers within +-(2**53 - 1), no NaN or
  Infinity, no lone surrogates, string keys only. A violation raises ``InvalidRecordError``
  naming the field path.
* ``loads_strict`` parses JSON text and refuses what would make canonical bytes ambiguous:
  duplicate member names, NaN/Infinity literals, non-UTF-8 bytes, unsafe numbers.
  ``loads_exact`` is the same and also says whether every value inside may be written by the
  C encoder (``canonical_exact``: no fraction or exponent, nothing outside the BMP).
  Both read through the compiled reader when it is built (``ledger.core._strictjson``, selected
  by ``ledger.core.accel``), which answers only where it answers exactly as the plain path here
  (its twin) and leaves everything else, every refusal included, to that path.
* Field paths name a place in a JSON value: ``candidates[1].score``, ``parameters["a.b"]``.
  The same syntax appears in error messages and in disclosures (``parse_path``).
* ``read_*`` are small typed readers over plain JSON for schema validators: each takes
  ``(value, path)``, returns the typed value or raises ``InvalidRecordError`` naming ``path``.

``safe_numbers=True`` (used for decision records) additionally refuses any number, float
included, whose magnitude exceeds 2**53 - 1: a float such as ``2.0**60`` serialises as an integer
literal that a strict reader must refuse, so a record holding it could not be read back.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, cast

import rfc8785

from ledger.core import accel
from ledger.core.errors import FormatError, InvalidRecordError

__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "Json",
    "canonical_bytes",
    "canonical_exact",
    "canonical_plain",
    "child_path",
    "index_path",
    "json_type_name",
    "loads_exact",
    "loads_strict",
    "parse_path",
    "plain_loads_exact",
    "read_bool",
    "read_int",
    "read_list",
    "read_matching",
    "read_object",
    "read_optional",
    "read_text",
    "to_plain",
    "wrong_type",
]

Json: TypeAlias = bool | int | float | str | list["Json"] | dict[str, "Json"] | None

MAX_SAFE_INTEGER = 2**53 - 1
MAX_DEPTH = 64
_ROOT = "$"
_READ = accel.json_read  # the compiled reader and writer (None: the plain path does it all)
_DUMP = accel.json_dump
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DIGITS = re.compile(r"[0-9]+")


# --- field paths ---------------------------------------------------------------------------------


def child_path(path: str, key: str) -> str:
    """The path of member ``key`` of the object at ``path`` (identifier keys use ``.key``)."""
    if _IDENT.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


def index_path(path: str, index: int) -> str:
    """The path of element ``index`` of the array at ``path``."""
    return f"{path}[{index}]"


def _name(path: str) -> str:
    return path or _ROOT


def parse_path(path: str) -> list[str | int]:
    """Split a field path (``a.b[2]["c d"]``) into member names and array indexes.

    The inverse of ``child_path``/``index_path``; raises ``InvalidRecordError`` on bad syntax.
    """
    parts: list[str | int] = []
    pos = 0
    while pos < len(path):
        pos = _parse_segment(path, pos, parts)
    return parts


def _parse_segment(path: str, pos: int, parts: list[str | int]) -> int:
    if path[pos] == "[":
        return _parse_bracket(path, pos + 1, parts)
    if parts:
        if path[pos] != ".":
            raise InvalidRecordError("field_path", f"expected '.' or '[' at {pos} in {path!r}")
        pos += 1
    match = _IDENT.match(path, pos)
    if match is None:
        raise InvalidRecordError("field_path", f"expected a member name at {pos} in {path!r}")
    parts.append(match.group())
    return match.end()


def _parse_bracket(path: str, pos: int, parts: list[str | int]) -> int:
    digits = _DIGITS.match(path, pos)
    if digits is not None:
        parts.append(int(digits.group()))
        end = digits.end()
    else:
        try:
            key, end = json.JSONDecoder().raw_decode(path, pos)
        except json.JSONDecodeError as exc:
            raise InvalidRecordError("field_path", f"bad member name in {path!r}") from exc
        if not isinstance(key, str):
            raise InvalidRecordError("field_path", f"bad member name in {path!r}")
        parts.append(key)
    if path[end : end + 1] != "]":
        raise InvalidRecordError("field_path", f"expected ']' at {end} in {path!r}")
    return end + 1


# --- validation and conversion -------------------------------------------------------------------


def json_type_name(value: object) -> str:
    """The JSON name of a Python value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _check_text(text: str, path: str) -> str:
    """``text`` as an exact ``str`` of the same characters. Not ``str(text)``: a subclass may
    override ``__str__`` (a ``(str, Enum)`` member gives ``"Color.RED"``), and the JSON value
    is the characters, as ``json.dumps`` writes them."""
    plain = str.__str__(text)
    try:
        plain.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidRecordError(_name(path), "string holds a lone surrogate") from exc
    return plain


def _check_int(value: int, path: str) -> int:
    if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        raise InvalidRecordError(
            _name(path), f"integer {value} outside the JCS-safe range +-(2**53 - 1)"
        )
    return int(value)


def _check_float(value: float, path: str, safe_numbers: bool) -> float:
    if not math.isfinite(value):
        raise InvalidRecordError(_name(path), f"{value} is not a JSON number (NaN/Infinity)")
    if safe_numbers and abs(value) > MAX_SAFE_INTEGER:
        raise InvalidRecordError(
            _name(path), f"number {value!r} outside the JCS-safe range +-(2**53 - 1)"
        )
    return float(value)


def to_plain(value: object, path: str = "", *, safe_numbers: bool = False, depth: int = 0) -> Json:
    """Check ``value`` against the I-JSON limits and return it as plain JSON (dict/list/scalars).

    Tuples become lists; objects with a ``to_json_obj()`` method are converted through it.
    Raises ``InvalidRecordError`` naming the first offending field path.

    Fast first (``_plain_fast``: exact built-in types, no field paths built); anything it does
    not take (a problem, a subclass, an unusual type) is done again here, which names the field.
    """
    try:
        return _plain_fast(value, safe_numbers, depth)
    except (_NotFast, UnicodeEncodeError):
        return _to_plain(value, path, safe_numbers=safe_numbers, depth=depth)


class _NotFast(Exception):
    """``_plain_fast`` leaves this value to ``_to_plain``."""


_SIMPLE = (int, float, str, list, tuple, Mapping)


def _plain_fast(value: object, safe_numbers: bool, depth: int) -> Json:
    """``_to_plain`` for exact ``dict``/``list``/``tuple``/``str``/``int``/``float``/``bool``/
    ``None`` and objects with ``to_json_obj``; raises ``_NotFast`` (or ``UnicodeEncodeError``
    for a lone surrogate) where ``_to_plain`` would raise or convert a subclass."""
    if depth > MAX_DEPTH:
        raise _NotFast
    kind = type(value)
    if kind is str:
        if not value.isascii():  # type: ignore[attr-defined]
            value.encode("utf-8")  # type: ignore[attr-defined]
        return value  # type: ignore[return-value]
    if kind is dict:
        out: dict[str, Json] = {}
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise _NotFast
            if not key.isascii():
                key.encode("utf-8")
            out[key] = _plain_fast(item, safe_numbers, depth + 1)
        return out
    if kind is list or kind is tuple:
        return [_plain_fast(item, safe_numbers, depth + 1) for item in value]  # type: ignore[attr-defined]
    if value is None or kind is bool:
        return value  # type: ignore[return-value]
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:  # type: ignore[operator]
            return value  # type: ignore[return-value]
        raise _NotFast
    if kind is float:
        if math.isfinite(value) and not (safe_numbers and abs(value) > MAX_SAFE_INTEGER):  # type: ignore[arg-type]
            return value  # type: ignore[return-value]
        raise _NotFast
    convert = getattr(value, "to_json_obj", None)
    if callable(convert) and not isinstance(value, _SIMPLE):
        return _plain_fast(convert(), safe_numbers, depth)
    raise _NotFast


def _to_plain(value: object, path: str = "", *, safe_numbers: bool = False, depth: int = 0) -> Json:
    if depth > MAX_DEPTH:
        raise InvalidRecordError(_name(path), f"nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return _check_int(value, path)
    if isinstance(value, float):
        return _check_float(value, path, safe_numbers)
    if isinstance(value, str):
        return _check_text(value, path)
    if isinstance(value, list | tuple):
        return [
            _to_plain(item, index_path(path, i), safe_numbers=safe_numbers, depth=depth + 1)
            for i, item in enumerate(value)
        ]
    if isinstance(value, Mapping):
        return _plain_object(value, path, safe_numbers, depth)
    convert = getattr(value, "to_json_obj", None)
    if callable(convert):
        return _to_plain(convert(), path, safe_numbers=safe_numbers, depth=depth)
    raise InvalidRecordError(_name(path), f"{type(value).__name__} is not a JSON value")


def _plain_object(
    value: Mapping[object, object], path: str, safe_numbers: bool, depth: int
) -> dict[str, Json]:
    out: dict[str, Json] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise InvalidRecordError(_name(path), f"object key {key!r} is not a string")
        name = _check_text(key, path)  # an exact str: a subclass may sort or hash its own way
        if name in out:  # two keys of the same characters (a str and a subclass of it)
            raise InvalidRecordError(_name(path), f"object key {name!r} given twice")
        out[name] = _to_plain(
            item, child_path(path, name), safe_numbers=safe_numbers, depth=depth + 1
        )
    return out


def canonical_bytes(obj: object, *, path: str = "", safe_numbers: bool = False) -> bytes:
    """RFC 8785 §3.2 canonical form of ``obj`` as UTF-8 bytes.

    Requires a JSON value (or an object with ``to_json_obj()``) within the I-JSON limits; raises
    ``InvalidRecordError`` naming the offending field otherwise.
    """
    plain = to_plain(obj, path, safe_numbers=safe_numbers)
    fast = _fast_canonical(plain)
    if fast is not None:
        return fast
    try:
        return bytes(rfc8785.dumps(plain))
    except rfc8785.CanonicalizationError as exc:  # pragma: no cover - to_plain checks first
        raise InvalidRecordError(_name(path), str(exc)) from exc


def canonical_plain(plain: Json) -> bytes:
    """RFC 8785 bytes of a value ``to_plain`` already returned (skips checking it again)."""
    fast = _fast_canonical(plain)
    return fast if fast is not None else bytes(rfc8785.dumps(plain))


_LAST_BMP = "\uffff"


def _json_compatible(value: object) -> bool:
    """Whether ``json.dumps(sort_keys=True, ensure_ascii=False)`` writes ``value`` exactly as
    RFC 8785 does: no floats (ECMAScript number form differs), integers in the safe range,
    and object keys within the Basic Multilingual Plane (code point order is then UTF-16
    code unit order, RFC 8785 §3.2.3). Strings escape alike (RFC 8785 §3.2.2.2: ``\\b \\t
    \\n \\f \\r``, other controls ``\\u00xx`` in lower case, ``"`` and ``\\``)."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER  # type: ignore[operator]
    if kind is dict:
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str or not (key.isascii() or max(key) <= _LAST_BMP):
                return False
            if not _json_compatible(item):
                return False
        return True
    if kind is list:
        return all(_json_compatible(item) for item in value)  # type: ignore[attr-defined]
    return False


def _fast_canonical(plain: Json) -> bytes | None:
    """RFC 8785 bytes through the C JSON encoder when that is exact (``_json_compatible``);
    None: use the full canonicalizer (floats, supplementary-plane keys, lone surrogates)."""
    if not _json_compatible(plain):
        return None
    if _DUMP is not None:
        out = _DUMP(plain)
        if out is not None:
            return out
    text = json.dumps(plain, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the canonicalizer names the problem
        return None


# --- strict parsing ------------------------------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    seen: set[str] = set()
    for key, _ in pairs:  # name the first member that repeats
        if key in seen:
            raise InvalidRecordError(child_path("", key), "duplicate object member name")
        seen.add(key)
    raise AssertionError("unreachable: a shorter dict has a repeated key")  # pragma: no cover


def _no_constant(name: str) -> object:
    raise InvalidRecordError(_ROOT, f"{name} is not a JSON number (RFC 8259 §6)")


class _Walk(Exception):
    """A number the quick pass cannot accept: ``to_plain`` decides and names its field."""


def _quick_int(text: str) -> int:
    value = int(text)
    if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        raise _Walk
    return value


def _quick_float(limit: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = float(text)
        if not (math.isfinite(value) and abs(value) <= limit):  # 1e999 parses as infinity
            raise _Walk
        return value

    return parse


_QUICK_FLOAT = {True: _quick_float(MAX_SAFE_INTEGER), False: _quick_float(math.inf)}
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _needs_walk(text: str, raw: bool) -> bool:
    """Whether the text may hold what only ``to_plain`` checks precisely: nesting deeper than
    ``MAX_DEPTH`` (it has more brackets than that) or a lone surrogate (an escaped surrogate, or
    one in ``text`` itself when it was not decoded from UTF-8 here)."""
    if text.count("[") + text.count("{") > MAX_DEPTH or _ESCAPED_SURROGATE.search(text):
        return True
    if raw:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
    return False


def _walked(text: str, safe_numbers: bool) -> Json:
    parsed = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    return to_plain(parsed, safe_numbers=safe_numbers)


def loads_strict(data: str | bytes, *, safe_numbers: bool = False) -> Json:
    """Parse JSON text (``bytes`` must be UTF-8) and check it with ``to_plain``.

    Refuses duplicate member names, NaN/Infinity, lone surrogates and unsafe integers, so that
    the canonical form of what was read is well defined. Raises ``InvalidRecordError``.

    Fast: the C parser's hooks check member names and numbers while parsing, and the walk of
    ``to_plain`` runs only when a hook or ``_needs_walk`` says it must decide (same result,
    same errors; an index reads hundreds of thousands of lines).
    """
    if _READ is not None:
        got = _READ(data, safe_numbers)
        if got is not None:
            return cast(Json, got[0])
    return _loads(data, safe_numbers, _QUICK_FLOAT[safe_numbers])[0]


def loads_exact(data: str | bytes, *, safe_numbers: bool = False) -> tuple[Json, bool]:
    """``loads_strict``, and whether ``canonical_exact`` may write any value inside what was
    read: True when the text holds no number with a fraction or exponent (RFC 8785 writes
    those in ECMAScript form) and no character outside the Basic Multilingual Plane (member
    names then sort by UTF-16 code units as by code points), so sorted compact JSON from the
    C encoder is the RFC 8785 form (``_json_compatible``), without walking the value again.

    The compiled reader (``accel.json_read``) answers first; it gives None for anything it is
    not sure the plain path (``plain_loads_exact``, its twin) answers as it would, and that path
    then decides and names the problem."""
    if _READ is not None:
        got = _READ(data, safe_numbers)
        if got is not None:
            return cast(tuple[Json, bool], got)
    return plain_loads_exact(data, safe_numbers=safe_numbers)


def plain_loads_exact(data: str | bytes, *, safe_numbers: bool = False) -> tuple[Json, bool]:
    """``loads_exact`` on the plain Python path alone: the twin of the compiled reader."""
    floats = 0
    quick = _QUICK_FLOAT[safe_numbers]

    def parse_float(text: str) -> float:
        nonlocal floats
        floats += 1
        return quick(text)

    parsed, text, walked = _loads(data, safe_numbers, parse_float)
    if walked or floats:
        return parsed, False
    return parsed, text.isascii() or len(text.encode("utf-16-le")) == 2 * len(text)


def canonical_exact(plain: Json, exact: bool) -> bytes:
    """``canonical_plain(plain)`` of a value inside what ``loads_exact`` read (``exact``: its
    second answer): the C encoder's sorted compact JSON when ``exact``."""
    if not exact:
        return canonical_plain(plain)
    if _DUMP is not None:
        out = _DUMP(plain)
        if out is not None:
            return out
    text = json.dumps(plain, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text.encode("utf-8")


def _loads(
    data: str | bytes, safe_numbers: bool, parse_float: Callable[[str], float]
) -> tuple[Json, str, bool]:
    """(the value, the text, whether ``to_plain`` walked it) for ``loads_strict``."""
    raw = isinstance(data, str)
    if isinstance(data, bytes | bytearray):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRecordError(_ROOT, f"not UTF-8: {exc}") from exc
    else:
        text = data
    try:
        if _needs_walk(text, raw):
            return _walked(text, safe_numbers), text, True
        try:
            parsed: Json = json.loads(
                text,
                object_pairs_hook=_no_duplicates,
                parse_constant=_no_constant,
                parse_int=_quick_int,
                parse_float=parse_float,
            )
        except _Walk:
            return _walked(text, safe_numbers), text, True
        return parsed, text, False
    except InvalidRecordError:
        raise
    except (ValueError, RecursionError) as exc:
        raise InvalidRecordError(_ROOT, f"not JSON: {exc}") from exc


# --- typed readers for schema validators ---------------------------------------------------------

Reader: TypeAlias = Callable[[Json, str], Any]


def wrong_type(path: str, expected: str, value: object) -> InvalidRecordError:
    """``InvalidRecordError`` at ``path``: "expected <expected>, got <JSON type>"."""
    got = '""' if value == "" else json_type_name(value)
    return InvalidRecordError(_name(path), f"expected {expected}, got {got}")


def read_object(value: Json, path: str, names: tuple[str, ...]) -> dict[str, Json]:
    """An object with exactly the members ``names`` (a missing member is named, and so is
    every unknown one)."""
    if type(value) is dict and len(value) == len(names):  # the usual case, checked quickly
        for name in names:
            if name not in value:
                break
        else:  # every name present and no other member (as many members as names)
            return value
    if not isinstance(value, dict):
        raise wrong_type(path, "an object", value)
    for name in names:
        if name not in value:
            raise InvalidRecordError(child_path(path, name), "missing required field")
    unknown = [key for key in value if key not in names]
    if len(unknown) == 1:
        raise InvalidRecordError(child_path(path, unknown[0]), "unknown field")
    if unknown:
        raise InvalidRecordError(path or "$", f"unknown fields {', '.join(map(repr, unknown))}")
    return value


def read_text(value: Json, path: str) -> str:
    """A non-empty string."""
    if type(value) is str and value:
        return value
    if not isinstance(value, str) or not value:
        raise wrong_type(path, "a non-empty string", value)
    return value


def read_matching(pattern: re.Pattern[str], what: str) -> Reader:
    """A reader for strings that fully match ``pattern`` (``what`` describes it in errors)."""

    def read(value: Json, path: str) -> str:
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise InvalidRecordError(_name(path), f"expected {what}, got {value!r}")
        return value

    return read


def read_int(value: Json, path: str, minimum: int = 0) -> int:
    """An integer in ``[minimum, 2**53 - 1]``; ``2.0`` is the same JSON number, ``true`` is not."""
    if type(value) is int and minimum <= value <= MAX_SAFE_INTEGER:
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(path, f"an integer >= {minimum}", value)
    if not minimum <= value <= MAX_SAFE_INTEGER:
        raise InvalidRecordError(_name(path), f"{value} outside [{minimum}, 2**53 - 1]")
    return value


def read_bool(value: Json, path: str) -> bool:
    """``true`` or ``false``."""
    if not isinstance(value, bool):
        raise wrong_type(path, "true or false", value)
    return value


def read_list(value: Json, path: str, item: Reader, *, unique: bool = False) -> tuple[Any, ...]:
    """An array read item by item into a tuple; with ``unique`` a repeated item is named."""
    if not isinstance(value, list):
        raise wrong_type(path, "an array", value)
    try:  # readers are pure and use the path only to name a problem: read again to name it
        out = tuple([item(v, path) for v in value])
    except FormatError:
        out = tuple(item(v, index_path(path, i)) for i, v in enumerate(value))
    if unique:
        seen: set[Any] = set()
        for i, v in enumerate(out):
            if v in seen:
                raise InvalidRecordError(index_path(path, i), "duplicate entry")
            seen.add(v)
    return out


def read_optional(read: Reader) -> Reader:
    """A reader that maps ``null`` to ``None`` and anything else through ``read``."""
    return lambda value, path: None if value is None else read(value, path)
