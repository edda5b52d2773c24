"""Canonical JSON of a caller's own ``str`` subclasses (``ledger.core.jcs``): the characters
count, never the subclass's ``__str__``, ``__hash__`` or ordering, for values and keys alike."""

from __future__ import annotations

import enum
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core import jcs
from ledger.core.errors import InvalidRecordError


class Color(str, enum.Enum):  # noqa: UP042 (the mixin whose str() is "Color.RED" on 3.11)
    RED = "red"
    BLUE = "blue"


class Shouting(str):
    """A subclass that lies in every way it can."""

    def __str__(self) -> str:
        return "LIES"

    def __hash__(self) -> int:
        return 7

    def __lt__(self, other: str) -> bool:
        return str.__gt__(self, other)

    def encode(self, *args: object, **kwargs: object) -> bytes:
        return b"LIES"


def test_a_str_enum_member_is_its_value_as_json_writes_it() -> None:
    record = {"colour": Color.RED, Color.BLUE: [Color.RED]}
    assert jcs.canonical_bytes(record) == b'{"blue":["red"],"colour":"red"}'
    assert json.loads(jcs.canonical_bytes(record)) == json.loads(json.dumps(record))


def test_subclass_keys_and_values_come_back_as_exact_str() -> None:
    plain = jcs.to_plain({Shouting("b"): Shouting("x"), Shouting("a"): [Shouting("y")]})
    assert plain == {"a": ["y"], "b": "x"}
    assert isinstance(plain, dict) and all(type(k) is str for k in plain)
    assert type(plain["b"]) is str
    assert jcs.canonical_bytes(plain) == b'{"a":["y"],"b":"x"}'


def test_a_key_given_twice_through_a_subclass_is_refused() -> None:
    twice = {"red": 1, Shouting("red"): 2}  # its own hash: the dict keeps both
    assert len(twice) == 2
    with pytest.raises(InvalidRecordError, match="given twice"):
        jcs.to_plain(twice)


@given(st.dictionaries(st.text(), st.text(), max_size=8))
def test_subclassed_text_canonicalizes_as_its_characters(mapping: dict[str, str]) -> None:
    lying = {Shouting(k): Shouting(v) for k, v in mapping.items()}
    assert jcs.canonical_bytes(lying) == jcs.canonical_bytes(mapping)
