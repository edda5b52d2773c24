"""Headless Debian Chromium for tests (``--dump-dom``, ``--screenshot``), and a small PNG reader
to check that a screenshot is not blank. Chromium is found on PATH (``chromium``, Debian's
package); tests skip with a clear reason where it is absent. Nothing is downloaded."""

from __future__ import annotations

import shutil
import struct
import subprocess
import tempfile
import zlib
from collections import Counter
from pathlib import Path

import pytest

from tests import processes

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
)  # fmt: skip


def chromium() -> str:
    """The Chromium binary, or skip the test saying how to get it."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")


def _run(*args: str) -> subprocess.CompletedProcess[bytes]:
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        done = processes.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True, timeout=180, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done


# Every host resolves to nothing and every request goes to a closed local port: no network.
NO_NETWORK = ("--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9")


def dump_dom(page: Path, *flags: str) -> str:
    """The DOM of ``page`` after Chromium loaded and rendered it (``flags``: more switches,
    e.g. ``NO_NETWORK``)."""
    return _run(*flags, "--dump-dom", page.resolve().as_uri()).stdout.decode("utf-8")


def screenshot(page: Path, out: Path, *, width: int = 1400, height: int = 1000) -> Path:
    """A PNG screenshot of ``page`` at ``width`` x ``height``."""
    _run(f"--screenshot={out}", f"--window-size={width},{height}", page.resolve().as_uri())
    return out


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def _unfilter(raw: bytes, width: int, height: int, channels: int) -> list[bytearray]:
    stride = width * channels
    rows: list[bytearray] = []
    prev = bytearray(stride)
    at = 0
    for _ in range(height):
        kind, line = raw[at], bytearray(raw[at + 1 : at + 1 + stride])
        at += 1 + stride
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            line[i] = (line[i] + (0, a, b, (a + b) >> 1, _paeth(a, b, c))[kind]) & 0xFF
        rows.append(line)
        prev = line
    return rows


def png_colors(path: Path) -> Counter[tuple[int, int, int]]:
    """How many pixels of each RGB colour an 8-bit RGB/RGBA PNG has."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at, idat, header = 8, b"", b""
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        at += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6), f"unexpected PNG type {depth}/{colour}"
    channels = 3 if colour == 2 else 4
    rows = _unfilter(zlib.decompress(idat), width, height, channels)
    counts: Counter[tuple[int, int, int]] = Counter()
    for row in rows[::2]:  # every other row is plenty
        for x in range(0, len(row), channels * 2):
            counts[(row[x], row[x + 1], row[x + 2])] += 1
    return counts
