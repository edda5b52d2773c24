"""The compiled strict JSON reader and writer (ledger/core/_strictjson.c) and their twin, the
plain Python path of ``ledger.core.jcs``, answer alike: on every text, both accept it with the
same value (JSON types, ``-0.0`` and member order included) and the same ``exact`` flag, or
both refuse it with the same message. Over 10,000 texts, adversarial ones among them:
duplicate members at depth, escapes, escaped and raw surrogates, big integers, float forms,
NaN/Infinity, whitespace, deep nesting, bad UTF-8, cut and altered texts.

The compiled writer gives ``json.dumps``'s sorted compact bytes for what the reader read
exactly. `make test` runs this module on the compiled build and again under ``LEDGER_PURE=1``
(where ``jcs`` runs its plain path only); where the module is not built, the direct
comparisons skip, naming why.
"""

from __future__ import annotations

import base64
import copy
import json
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core import accel, jcs
from ledger.core.errors import InvalidRecordError
from ledger_client.receipts.receipt import _hashes_b64_plain
from ledger_client.receipts.run_load import _same_json_plain

pytestmark = pytest.mark.slow


def compiled() -> ModuleType:
    try:
        from ledger.core import _strictjson
    except ImportError as exc:
        pytest.skip(f"the compiled JSON reader is not built ({exc}): nothing to compare with")
    return _strictjson


def typed(value: object) -> object:
    """``value`` with every JSON type spelled out (``1``, ``1.0``, ``True`` and ``-0.0`` differ;
    member order kept)."""
    if isinstance(value, dict):
        return ("object", [(k, typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("array", [typed(v) for v in value])
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


def answer(read: object, data: str | bytes, safe_numbers: bool) -> tuple[object, ...]:
    try:
        value, exact = read(data, safe_numbers=safe_numbers)  # type: ignore[operator]
    except InvalidRecordError as exc:
        return ("refused", str(exc))
    return ("read", typed(value), exact)


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.sampled_from([2**53 - 1, -(2**53 - 1), 2**53, -(2**53), 0, -1, 10**16, 10**15]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["\U0001f600", "\ud800", "\udfff", "a\x00b", "\x7f", "\u2028", '"\\/']),
)
_KEYS = st.one_of(st.text(max_size=4), st.sampled_from(["a", "b", "\U0001f600", "\ud83d"]))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=24,
)


def _dump(value: object, ascii_only: bool, spaced: bool) -> str:
    separators = (" , ", " :\t") if spaced else (",", ":")
    return json.dumps(value, ensure_ascii=ascii_only, separators=separators, allow_nan=True)


_FRAGMENTS = [
    '{"a":1,"a":2}', '{"x":{"y":[{"k":1,"k":1}]}}', "NaN", "-Infinity", "Infinity", "1e400",
    "-1e400", "9007199254740991", "9007199254740992", "-9007199254740992", "1" * 30, "1.0",
    "-0", "-0.0", "0.1e1", "1E+2", "1e-400", "01", "1.", "-", ".5", "1e", "+1", '"\\ud800"',
    '"\\ud83d\\ude00"', '"\\uD83D"', '"\\udc00x"', '"\\\\ud800"', '"\\u00e9"', '"\\u0000"',
    '"\\x"', '"\\u12"', '"\\u12g4"', '"\t"', '"\x01"', '"\x7f"', "\ufeff{}", " \t\r\n[] \n",
    "[1,]", '{"a":1,}', "[1 2]", "{,}", "[", "]", "", " ", "tru", "nul", "true false",
    '{"a" 1}', '{1:2}', "[" * 64 + "]" * 64, "[" * 65 + "]" * 65, "[" * 70, '"[[[[[["',
    "9007199254740991.0", "9007199254740993.0", "1e15", "1e16", "123456789012345678",
    '"\U0001f600"', '"\u00e9"', '{"\U0001f600":1,"\ue000":2}', "[1.5e308, 2e308]", "\x00",
]  # fmt: skip


@st.composite
def texts(draw: st.DrawFn) -> str | bytes:
    kind = draw(st.integers(0, 5))
    if kind == 0:  # a value written some way
        text = _dump(draw(_VALUES), draw(st.booleans()), draw(st.booleans()))
    elif kind == 1:  # fragments put together into an array or an object
        parts = draw(st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=4))
        if draw(st.booleans()):
            text = "[" + ",".join(parts) + "]"
        else:
            text = "{" + ",".join(f'"k{i % 2}":{p}' for i, p in enumerate(parts)) + "}"
    elif kind == 2:
        text = draw(st.sampled_from(_FRAGMENTS))
    elif kind == 3:  # a duplicate member at some depth
        inner = _dump(draw(_VALUES), False, False)
        depth = draw(st.integers(0, 8))
        text = '{"d":' * depth + f'{{"m":{inner},"n":0,"m":1}}' + "}" * depth
    else:  # a written value cut, or with one character changed or inserted
        text = _dump(draw(_VALUES), draw(st.booleans()), False)
        if text:
            at = draw(st.integers(0, len(text)))
            edit = draw(st.integers(0, 2))
            char = draw(st.sampled_from([*'"\\{}[],:0-.eE \x01', "\ud800", "\xe9"]))
            text = (
                text[:at]
                if edit == 0
                else text[:at] + char + text[at + 1 :]
                if edit == 1
                else text[:at] + char + text[at:]
            )
    as_bytes = draw(st.integers(0, 3))
    if as_bytes == 0:
        return text
    raw = text.encode("utf-8", "surrogatepass")
    if as_bytes == 3 and raw:  # bad UTF-8 somewhere
        at = draw(st.integers(0, len(raw) - 1))
        raw = (
            raw[:at]
            + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"]))
            + raw[at:]
        )
    return raw


@settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts(), st.booleans())
def test_the_compiled_reader_answers_as_the_plain_path(data: str | bytes, safe: bool) -> None:
    module = compiled()
    plain = answer(jcs.plain_loads_exact, data, safe)
    assert answer(jcs.loads_exact, data, safe) == plain
    strict = answer(
        lambda d, safe_numbers: (jcs.loads_strict(d, safe_numbers=safe_numbers), 0), data, safe
    )
    assert strict == (plain if plain[0] == "refused" else ("read", plain[1], 0))
    got = module.read(data, safe)
    if got is not None:  # it answers only what the plain path accepts, with the same answer
        assert ("read", typed(got[0]), got[1]) == plain
    if got is not None and got[1]:
        expected = json.dumps(got[0], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        assert module.dump_exact(got[0]) == expected.encode("utf-8")


@settings(max_examples=2_000, deadline=None)
@given(_VALUES, st.booleans())
def test_it_answers_every_ordinary_text_itself(value: object, safe: bool) -> None:
    """Not vacuous: a text within the limits is read by the compiled reader, not left to the
    plain path (which would make the comparison above trivially true)."""
    module = compiled()
    text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    try:
        expected = jcs.plain_loads_exact(text, safe_numbers=safe)
    except InvalidRecordError:
        return
    if "\\ud" in text.lower() or text.count("[") + text.count("{") > jcs.MAX_DEPTH:
        return  # the plain path walks these: the compiled reader leaves them to it
    got = module.read(text, safe)
    assert got is not None
    assert typed(got[0]) == typed(expected[0]) and got[1] == expected[1]


@settings(max_examples=2_000, deadline=None)
@given(_VALUES)
def test_the_writer_writes_json_dumps_bytes_or_leaves_it(value: object) -> None:
    module = compiled()
    got = module.dump_exact(value)
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        expected: bytes | None = text.encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError):
        expected = None
    if got is not None:
        assert got == expected
    floats = "float" in repr(typed(value))
    if expected is not None and not floats and "\\ud" not in json.dumps(value).lower():
        assert got == expected or any(  # left to json.dumps only for ints beyond 64 bits
            isinstance(v, int) and not -(2**63) <= v < 2**63 for v in _leaves(value)
        )


def _leaves(value: object) -> list[object]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


@st.composite
def hash_texts(draw: st.DrawFn) -> object:
    text = base64.b64encode(draw(st.binary(min_size=32, max_size=32))).decode()
    edit = draw(st.integers(0, 6))
    if edit == 1:  # another digit before the pad: its low bits may be set
        text = text[:42] + draw(st.sampled_from(_ALPHABET)) + "="
    elif edit == 2:  # any character anywhere
        at = draw(st.integers(0, 43))
        char = draw(st.sampled_from([*_ALPHABET, "-", "_", "=", " ", "\xe9", "\n", "\ud800"]))
        text = text[:at] + char + text[at + 1 :]
    elif edit == 3:  # another length, or another 44-character text
        text = draw(st.sampled_from([text[:-1], text + "A", text[:40] + "AA==", "A" * 44]))
    elif edit == 4:
        return draw(st.sampled_from([None, 1, b"x" * 44, text.encode(), ["x"]]))
    return text


@settings(max_examples=3_000, deadline=None)
@given(st.one_of(st.lists(hash_texts(), max_size=16), hash_texts()))
def test_the_compiled_hash_list_reader_answers_as_its_twin(value: object) -> None:
    assert compiled().hashes_b64(value) == _hashes_b64_plain(value)


def _variant(value: object, change: int, path: list[int]) -> object:
    """A copy of ``value`` with one leaf's JSON type or value changed (``1`` -> ``1.0`` or
    ``true``, ``0.0`` -> ``-0.0``, ...), the members of one object reordered, or nothing."""
    if isinstance(value, dict) and value:
        items = list(value.items())
        if change == 0:
            return dict(reversed(items))
        k, v = items[path[0] % len(items)] if path else items[0]
        return {**value, k: _variant(v, change, path[1:])}
    if isinstance(value, list) and value:
        i = path[0] % len(value) if path else 0
        return [*value[:i], _variant(value[i], change, path[1:]), *value[i + 1 :]]
    swaps: dict[int, object] = {
        1: float(value) if type(value) is int and abs(value) < 2**53 else value,
        2: bool(value) if type(value) is int and value in (0, 1) else value,
        3: -value if type(value) is float else value,
        4: int(value) if type(value) is float and value.is_integer() else value,
        5: value + "x" if isinstance(value, str) else value,
        6: None,
    }
    return swaps.get(change, copy.deepcopy(value))


@settings(max_examples=3_000, deadline=None)
@given(_VALUES, st.integers(0, 7), st.lists(st.integers(0, 8), max_size=6))
def test_the_compiled_comparison_answers_as_its_twin(
    value: object, change: int, path: list[int]
) -> None:
    other = _variant(value, change, path)
    got = compiled().same_json(value, other)
    if got is not None:
        assert got == _same_json_plain(value, other)  # type: ignore[arg-type]
    plain = json.dumps(value, allow_nan=True)
    if "NaN" not in plain:  # a NaN is left to the twin (Python's == and identity decide)
        assert got is not None


def test_refusals_keep_the_plain_paths_messages() -> None:
    compiled()
    cases = {
        b'{"a":{"b":1,"b":2}}': "b: duplicate object member name",
        b"[NaN]": "NaN is not a JSON number",
        b"[9007199254740992]": "outside the JCS-safe range",
        b'["\\ud800"]': "lone surrogate",
        b"[1,]": "not JSON",
        b'["\xff"]': "not UTF-8",
    }
    for data, message in cases.items():
        with pytest.raises(InvalidRecordError, match=message):
            jcs.loads_exact(data, safe_numbers=True)
        assert compiled().read(data, True) is None


def test_the_selector_names_the_reader() -> None:
    assert accel.JSON_CORE in ("native", "pure")
    assert (accel.json_read is None) == (accel.JSON_CORE == "pure")


def test_a_list_changed_by_a_collection_pass_is_not_read_stale() -> None:
    """``hashes_b64`` allocates its answer (which may run a GC pass, and so Python code that
    changes the list) before it reads the list: a list emptied by a GC callback gives the
    twin's answer for the emptied list, never freed memory."""
    import gc

    hashes = compiled().hashes_b64
    value: list[object] = [
        "A" * 43 + "="
    ] * 30  # more than 20 items: the answer's tuple goes through the GC
    armed = [False]

    def empty_it(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and armed[0]:
            armed[0] = False
            value[:] = [1] * 30  # no longer hashes (the stale read took these ints as strings)

    threshold = gc.get_threshold()
    gc.callbacks.append(empty_it)
    gc.set_threshold(1)
    try:
        armed[0] = True  # set last: nothing between it and the call allocates
        got = hashes(value)
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(empty_it)
    assert not armed[0], "no collection ran: the test did not test"
    assert got is None and _hashes_b64_plain(value) is None


def test_the_comparison_leaves_member_names_of_other_types_to_the_twin() -> None:
    class Name(str):
        pass

    assert compiled().same_json({"x": 1}, {Name("x"): 1}) is None


# The scans that see every byte (a string's fast scan, and the pre-scan for brackets, escaped
# surrogates and 4-byte characters) read eight bytes at a time: each byte they stop at, placed
# at every offset of a word, in strings and between values, near the text's end or not.
_STOPS = ['"', "\\\\", "\\n", "\\u00e9", "\\ud800", "\\udc00\\u0041", "\x7f", "\u00e9", "\u20ac"]
_STOPS += ["\U0001f600", "{", "[", "}", "]", "\x01", "\ud800"]


def test_each_stop_byte_at_each_offset_reads_as_the_plain_path() -> None:
    module = compiled()
    for stop in _STOPS:
        for before in range(18):
            for after in (0, 1, 7, 8, 9):
                inner = "a" * before + stop + "b" * after
                for text in (
                    f'"{inner}"',
                    f'{{"k{inner}": 1, "x": "{inner}"}}',
                    f'["{"c" * before}", {stop if stop in "{[" else 0}]',
                    "[" * before + "1" + "]" * before,
                ):
                    for data in (text, text.encode("utf-8", "surrogatepass")):
                        plain = answer(jcs.plain_loads_exact, data, True)
                        got = module.read(data, True)
                        if got is not None:
                            assert ("read", typed(got[0]), got[1]) == plain, data
                        assert answer(jcs.loads_exact, data, True) == plain, data
    deep = "[" * 64 + "]" * 64  # at the nesting limit, then one over: left to the plain path
    assert module.read(deep, True) is not None
    assert module.read("[" + deep + "]", True) is None


@settings(max_examples=1_500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_VALUES, st.integers(0, 3), st.integers(0, 10**6), st.sampled_from([*'"\\{}[],:0-.eE \x01']))
def test_a_large_object_read_again_is_given_again_only_when_its_text_is_the_same(
    value: object, edit: int, at: int, char: str
) -> None:
    """The reader gives a large object (256 bytes or more) read before again when the same
    text comes again (a run item's record beside its receipt and inside it): the answer is the
    plain path's on exact copies, on copies changed by one character, cut, or spaced, and on
    copies deeper than the first."""
    module = compiled()
    first = json.dumps({"pad": "p" * 260, "v": value}, ensure_ascii=False, allow_nan=True)
    again = first
    if edit == 1:  # one character changed
        i = at % len(first)
        again = first[:i] + char + first[i + 1 :]
    elif edit == 2:  # cut: the copy's text continues otherwise
        again = first[: at % len(first)] + ', "x": 1}'
    elif edit == 3:
        again = first.replace(",", " ,", 1)
    for text in (
        f'{{"a":{first},"b":{again}}}',
        f'{{"a":{first},"b":[{again},{first}],"c":{{"d":{again}}}}}',
        f"[{first},{first},{again}]",
    ):
        for data in (text, text.encode("utf-8", "surrogatepass")):
            plain = answer(jcs.plain_loads_exact, data, False)
            assert answer(jcs.loads_exact, data, False) == plain
            got = module.read(data, False)
            if got is not None:
                assert ("read", typed(got[0]), got[1]) == plain


def test_a_run_items_record_is_read_once() -> None:
    """The record beside a receipt and inside it: one dict (and ``run_load``'s comparison of
    the two then answers at once), equal to the plain path's two."""
    module = compiled()
    record = {"kind": "tool_call", "step": 3, "padding": "r" * 300, "tags": ["a", "b"]}
    item = json.dumps({"receipt": {"index": 4, "record": record}, "record": record})
    got = module.read(item.encode(), True)
    assert got is not None
    assert got[0]["record"] is got[0]["receipt"]["record"]
    assert typed(got[0]) == typed(jcs.plain_loads_exact(item, safe_numbers=True)[0])
    small = json.dumps({"a": {"k": 1}, "b": {"k": 1}})  # below 256 bytes: read each time
    value = module.read(small, True)[0]
    assert value["a"] == value["b"] and value["a"] is not value["b"]
