"""The fast RFC 8785 path (the C JSON encoder where it is exact) writes the very bytes of the
reference canonicalizer (the ``rfc8785`` package) for any JSON value, floats, keys outside the
Basic Multilingual Plane and control characters included."""

from __future__ import annotations

import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.errors import InvalidRecordError
from ledger.core.jcs import (
    MAX_SAFE_INTEGER,
    Json,
    _to_plain,
    canonical_bytes,
    canonical_exact,
    canonical_plain,
    loads_exact,
    loads_strict,
    to_plain,
)

_TEXT = st.text(
    alphabet=st.characters(exclude_categories=["Cs"]),  # no lone surrogates
    max_size=12,
)
_ODD_KEYS = ["\U0001f600", "\ue000", "\uffff", "a\x01", "\U00010000b"]
_KEYS = st.one_of(_TEXT, st.sampled_from(_ODD_KEYS))
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15),
    _TEXT,
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(_JSON)
def test_fast_path_writes_the_reference_bytes(value: object) -> None:
    expected = bytes(rfc8785.dumps(value))  # type: ignore[arg-type]
    assert canonical_plain(value) == expected  # type: ignore[arg-type]
    assert canonical_bytes(value) == expected


def test_keys_sort_by_utf16_code_units_not_code_points() -> None:
    value: Json = {"\U0001f600": 1, "\ue000": 2, "a": 3}
    assert canonical_plain(value) == bytes(rfc8785.dumps(value))
    assert canonical_plain(value).index("\U0001f600".encode()) < canonical_plain(value).index(
        "\ue000".encode()
    )


def test_controls_and_quotes_escape_as_rfc8785_says() -> None:
    value: Json = {"k": '\x00\x1f\b\t\n\f\r"\\\x7f\u2028'}
    assert canonical_plain(value) == bytes(rfc8785.dumps(value))


_ANY_SCALARS = st.one_of(
    _SCALARS,
    st.integers(),  # outside the safe range too
    st.floats(),  # NaN and infinities too
    st.text(max_size=4),  # lone surrogates too
)
_ANY = st.recursive(
    _ANY_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.one_of(_KEYS, st.integers(0, 3)), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(_ANY, st.booleans())
def test_to_plain_fast_path_answers_as_the_checking_path(value: object, safe: bool) -> None:
    def answer(fn: object) -> object:
        try:
            return ("ok", fn(value, "", safe_numbers=safe))  # type: ignore[operator]
        except InvalidRecordError as exc:
            return ("error", str(exc))

    assert answer(to_plain) == answer(_to_plain)


def _inside(value: Json) -> list[Json]:
    """``value`` and every value inside it."""
    out = [value]
    if isinstance(value, dict):
        out += [v for item in value.values() for v in _inside(item)]
    elif isinstance(value, list):
        out += [v for item in value for v in _inside(item)]
    return out


@settings(max_examples=1000, deadline=None)
@given(_JSON, st.sampled_from(["", " ", "\n"]))
def test_loads_exact_reads_as_loads_strict_and_writes_the_reference_bytes(
    value: object, space: str
) -> None:
    """``loads_exact`` answers as ``loads_strict``; every value inside what it read, written by
    ``canonical_exact`` with its answer, is the reference canonicalizer's bytes (numbers with a
    fraction, characters outside the BMP, sorting by UTF-16 code units, nesting)."""
    text = canonical_bytes(value)
    if space:  # insignificant whitespace, as another writer may leave it
        text = text.replace(b",", b"," + space.encode()).replace(b":", b":" + space.encode())
    try:
        expected: object = loads_strict(text, safe_numbers=True)
    except InvalidRecordError as exc:
        expected = str(exc)
    try:
        read, exact = loads_exact(text, safe_numbers=True)
    except InvalidRecordError as exc:
        assert str(exc) == expected
        return
    assert read == expected
    for inner in _inside(read):
        assert canonical_exact(inner, exact) == bytes(rfc8785.dumps(inner))


def test_loads_exact_refuses_what_loads_strict_refuses() -> None:
    for bad in (b'{"a":1,"a":2}', b"[NaN]", b"[9007199254740992]", b'["\\ud800"]', b"\xff",
                b"[1e400]", b"[" * 70 + b"]" * 70):  # fmt: skip
        try:
            loads_strict(bad, safe_numbers=True)
        except InvalidRecordError as exc:
            expected = str(exc)
        else:
            raise AssertionError(bad)
        try:
            loads_exact(bad, safe_numbers=True)
        except InvalidRecordError as exc:
            assert str(exc) == expected
        else:
            raise AssertionError(bad)
