"""The spool resynchronises after damage: random byte flips and truncations never lose an intact
record (one whose frames were untouched and lie before the cut), never invent one, and keep
what they skip in the quarantine file."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger_client.sdk.spool import HEADER, FileSpool, SpoolItem, read_spool


def make_item(n: int, size: int) -> SpoolItem:
    body = b'{"n":%d,"pad":"%s"}' % (n, b"x" * size)
    return SpoolItem(hashlib.sha256(body).digest(), body)


@st.composite
def damaged_spools(draw: st.DrawFn) -> tuple[list[SpoolItem], list[int], int | None]:
    sizes = draw(st.lists(st.integers(0, 300), min_size=1, max_size=40))
    items = [make_item(n, size) for n, size in enumerate(sizes)]
    total = len(HEADER) + sum(i.size for i in items)
    flips = draw(st.lists(st.integers(len(HEADER), total - 1), max_size=6))
    cut = draw(st.none() | st.integers(len(HEADER), total))
    return items, flips, cut


@pytest.mark.slow  # a fuzz: 150 damaged spools, each written and fsynced (I/O-bound, ~8 s)
@settings(max_examples=150, deadline=None)
@given(damaged_spools(), st.integers(1, 255))
def test_flips_and_truncations_never_lose_an_intact_record(
    case: tuple[list[SpoolItem], list[int], int | None], xor: int
) -> None:
    items, flips, cut = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.spool"
        spool = FileSpool(path)
        spans = []
        for item in items:
            start = path.stat().st_size
            spool.append(item)
            spans.append((start, start + item.size))
        spool.close()
        raw = bytearray(path.read_bytes())
        for at in flips:
            raw[at] ^= xor
        if cut is not None:
            del raw[cut:]
        path.write_bytes(bytes(raw))
        end = len(raw)
        intact = [
            item
            for item, (s, e) in zip(items, spans, strict=True)
            if e <= end and not any(s <= f < e for f in flips)
        ]
        again = FileSpool(path)
        delivered = again.peek(len(items) + 1)
        again.close()
        assert all(i in delivered for i in intact)
        assert all(d in items for d in delivered)
        assert read_spool(path) == ([], delivered)
        quarantine = Path(tmp) / "s.spool.quarantine"
        kept = quarantined_bytes(quarantine) if quarantine.exists() else 0
        assert kept + sum(d.size for d in delivered) == end - len(HEADER)  # every byte accounted


def quarantined_bytes(path: Path) -> int:
    raw, pos, total = path.read_bytes(), 0, 0
    while pos < len(raw):
        assert raw[pos : pos + 8] == b"LDGQUAR1"
        length = int.from_bytes(raw[pos + 16 : pos + 20], "big")
        total += length
        pos += 20 + length
    return total


def test_a_damaged_frame_in_the_middle_is_quarantined_and_the_rest_delivered(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.spool"
    spool = FileSpool(path)
    items = [make_item(n, 20) for n in range(100)]
    for item in items:
        spool.append(item)
    spool.close()
    raw = bytearray(path.read_bytes())
    at = len(HEADER) + 9 * items[0].size + 12  # inside record 10's frame
    raw[at] ^= 0xFF
    path.write_bytes(bytes(raw))
    again = FileSpool(path)
    assert again.peek(200) == items[:9] + items[10:]
    again.close()
    quarantined = (tmp_path / "s.spool.quarantine").read_bytes()
    assert quarantined.startswith(b"LDGQUAR1") and len(quarantined) == 8 + 8 + 4 + items[9].size
