"""``loads_strict`` checks numbers and member names in the parser's hooks and walks the value
with ``to_plain`` only when it must: the same values and the same errors as parsing, then
walking everything (the reader it replaced, written out here as the reference)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.errors import InvalidRecordError
from ledger.core.jcs import MAX_DEPTH, MAX_SAFE_INTEGER, child_path, loads_strict, to_plain


def _reference(text: str | bytes, safe_numbers: bool) -> object:
    """Parse, refusing duplicate names and NaN/Infinity, then check everything with
    ``to_plain``: the reader as it was before the quick pass."""

    def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
        out: dict[str, object] = {}
        for key, value in items:
            if key in out:
                raise InvalidRecordError(child_path("", key), "duplicate object member name")
            out[key] = value
        return out

    def constant(name: str) -> object:
        raise InvalidRecordError("$", f"{name} is not a JSON number (RFC 8259 §6)")

    try:
        data = text.decode("utf-8") if isinstance(text, bytes) else text
        parsed = json.loads(data, object_pairs_hook=pairs, parse_constant=constant)
    except InvalidRecordError:
        raise
    except (ValueError, RecursionError) as exc:
        raise InvalidRecordError("$", f"not JSON: {exc}") from exc
    return to_plain(parsed, safe_numbers=safe_numbers)


def _outcome(text: str | bytes, safe: bool, *, reference: bool) -> tuple[str, object]:
    try:
        if reference:
            return "ok", _reference(text, safe)
        return "ok", loads_strict(text, safe_numbers=safe)
    except InvalidRecordError as exc:
        return "refused", str(exc)


_EDGE_NUMBERS = [
    "0", "-0", "1.0", "-0.0", "1e999", "-1e999", "1e16", "9007199254740991", "9007199254740992",
    "-9007199254740992", "123456789012345678901234567890", "0.1", "2.5e-300", "NaN", "Infinity",
]  # fmt: skip
_EDGE_STRINGS = ['"\\ud800"', '"\\udfff x"', '"\\ud83d\\ude00"', '"\\\\ud800"', '"plain"', '""']

scalars = st.one_of(
    st.sampled_from(_EDGE_NUMBERS + _EDGE_STRINGS + ["true", "false", "null"]),
    st.integers(-(2**60), 2**60).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.text(max_size=6).map(json.dumps),
)
names = st.sampled_from(['"a"', '"b"', '"\\ud800"', '"a"'])


@st.composite
def documents(draw: st.DrawFn, depth: int = 0) -> str:
    if depth > 3 or draw(st.booleans()):
        return draw(scalars)
    if draw(st.booleans()):
        member = st.tuples(names, st.deferred(lambda: documents(depth + 1)))
        members = draw(st.lists(member, max_size=4))
        return "{" + ", ".join(f"{k}: {v}" for k, v in members) + "}"
    items = draw(st.lists(st.deferred(lambda: documents(depth + 1)), max_size=4))
    return "[" + ", ".join(items) + "]"


@settings(max_examples=300, deadline=None)
@given(documents(), st.booleans(), st.booleans())
def test_same_values_and_errors_as_the_full_walk(text: str, safe: bool, as_bytes: bool) -> None:
    data: str | bytes = text.encode("utf-8", "surrogatepass") if as_bytes else text
    expected = _outcome(data, safe, reference=True)
    got = _outcome(data, safe, reference=False)
    assert got == expected
    assert json.dumps(got[1]) == json.dumps(expected[1])  # the same JSON types, too


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"a": 1, "b": 2, "a": 3}', "a: duplicate object member name"),
        ('{"x": [1, 9007199254740992]}', "x[1]: integer 9007199254740992 outside"),
        ('{"x": 1e999}', "x: inf is not a JSON number"),
        ('{"x": "\\ud800"}', "x: string holds a lone surrogate"),
        ('{"\\udc00": 1}', "string holds a lone surrogate"),
        ("[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2), f"deeper than {MAX_DEPTH}"),
        ('{"x": NaN}', "NaN is not a JSON number"),
    ],
)
def test_refusals_name_the_field(text: str, needle: str) -> None:
    with pytest.raises(InvalidRecordError, match=needle.replace("[", r"\[")):
        loads_strict(text)


def test_unsafe_floats_only_with_safe_numbers() -> None:
    big = f'{{"x": {float(MAX_SAFE_INTEGER) * 4}}}'
    assert loads_strict(big) == {"x": float(MAX_SAFE_INTEGER) * 4}
    with pytest.raises(InvalidRecordError, match=r"x: number .* outside the JCS-safe range"):
        loads_strict(big, safe_numbers=True)
    assert loads_strict('["\\ud83d\\ude00"]') == ["\U0001f600"]  # a valid pair is one character
    deepest = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)  # the innermost value at MAX_DEPTH
    assert loads_strict(deepest) == _reference(deepest, False)


def test_depth_limit_as_the_full_walk() -> None:
    for n in range(MAX_DEPTH - 4, MAX_DEPTH + 4):
        for text in ("[" * n + "1" + "]" * n, '{"a": ' * n + "1" + "}" * n):
            assert _outcome(text, True, reference=False) == _outcome(text, True, reference=True)
