"""``load_run(path, data)`` (the index's worker: the file's bytes read once, hashed, then its
lines read) reads exactly as ``load_run(path)`` reads the file: the same items, sources and
digests, or the same refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.core.errors import FormatError
from ledger.core.limits import MAX_ITEM_BYTES
from ledger_client.receipts.run_load import load_run
from tests.audit_world import build, write_runs

RUNS = build()


def _reading(path: Path, data: bytes | None) -> tuple[object, ...]:
    try:
        items = load_run(path, data)
    except FormatError as exc:
        return ("refused", type(exc).__name__, str(exc))
    return ("read", [(i.source, i.digest, i.record, i.receipt) for i in items])


def _variants(lines: list[bytes]) -> list[bytes]:
    """The run's lines written in ways a file may hold them, well-formed or not."""
    good = b"\n".join(lines)
    broken = lines[1][: len(lines[1]) // 2]  # cut inside a string: no closing quote
    return [
        good + b"\n",
        good,  # no newline after the last line
        b"\n\n" + b"\n \t\n".join(lines) + b"\n  \n",  # blank and white lines between
        b"\r\n".join(lines) + b"\r\n",  # CRLF: the CR stays in the line (JSON whitespace)
        b"\n".join([lines[0], broken, *lines[2:]]) + b"\n",
        b"\n".join([*lines[:-1], broken]),  # the broken line last, without a newline
        b"\n".join([lines[0], b'{"receipt": 1, "x"', *lines[1:]]) + b"\n",
        b"\n".join([lines[0], b"[1, 2]\r"]) + b"\n",
        b"\n".join([lines[0], lines[1] + b" x"]),  # text after the value
        b"\n".join([lines[0], b"\x0b\x0c"]) + b"\n",  # a line of other whitespace bytes
        b"\n".join([lines[0], b'"\xff"']) + b"\n",  # not UTF-8
        b"",
        b"\n\n",
    ]


def test_a_file_read_from_its_bytes_reads_as_the_file(tmp_path: Path) -> None:
    files = write_runs(tmp_path / "runs", RUNS)
    lines = files["support"].read_bytes().splitlines()
    for n, text in enumerate(_variants(lines)):
        path = tmp_path / f"v{n}.jsonl"
        path.write_bytes(text)
        expected = _reading(path, None)
        assert _reading(path, text) == expected, n


@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_the_line_length_limit_is_the_files(tmp_path: Path, extra: int) -> None:
    """A line of ``MAX_ITEM_BYTES`` with its newline is read; one byte more is refused, with or
    without a newline after it."""
    line = b"[" + b" " * (MAX_ITEM_BYTES - 3 + extra) + b"]"
    for text in (line + b"\n", line, b"[]\n" + line + b"\n"):
        path = tmp_path / "long.jsonl"
        path.write_bytes(text)
        assert _reading(path, text) == _reading(path, None)
