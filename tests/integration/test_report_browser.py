"""``ledger-verify report --html`` rendered by real headless Chromium (Debian's ``chromium``):
the DOM text holds the runs, their records and checks, the screenshot is not blank, and a
tampered run shows its failure (text and red pixels). Skips where Chromium is absent."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger_client.cli.main import main
from tests.audit_world import SUPPORT, build, tamper, write_runs
from tests.browser import chromium, dump_dom, png_colors, screenshot

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FAIL_BANNER = (253, 226, 225)  # the "NOT verified" banner's background
PASS_BANNER = (223, 245, 225)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self._skip += tag in ("style", "title")

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in ("style", "title")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def text_of(dom: str) -> str:
    parser = _Text()
    parser.feed(dom)
    return " ".join(" ".join(parser.parts).split())


def report(tmp_path: Path, name: str, runs: Path, root: Path, key: str) -> tuple[int, Path]:
    page = tmp_path / name
    result = CliRunner().invoke(
        main, ["report", str(runs), "--key", key, "--tsa-root", str(root), "--html", str(page)]
    )
    return result.exit_code, page


def near(counts: dict[tuple[int, int, int], int], colour: tuple[int, int, int]) -> int:
    def close(c: tuple[int, int, int]) -> bool:
        return max(abs(a - b) for a, b in zip(c, colour, strict=True)) <= 3

    return sum(n for c, n in counts.items() if close(c))


def test_report_renders_in_chromium(tmp_path: Path) -> None:
    chromium()
    world = build()
    files = write_runs(tmp_path / "runs", world)
    key = world.world.key.key_string()
    code, page = report(tmp_path, "ok.html", files["support"].parent, files["root"], key)
    assert code == 0
    text = text_of(dump_dom(page))
    for expected in (
        "Decision Ledger audit report", "all 2 run(s) verified", f"Run {SUPPORT}",
        "Parent graph", "Timeline", "fetch_page", "note <- web", "untrusted", "refund",
        "checkpoint signature", "inclusion", "witnesses", "not checked", "anchor",
    ):  # fmt: skip
        assert expected in text, expected
    assert text.count("verified") >= 8 and "NOT VERIFIED" not in text
    assert re.search(r"not checked valid \d{4}-\d\d-\d\dT", text)  # witnesses, anchor time
    colours = png_colors(screenshot(page, tmp_path / "ok.png"))
    white = colours.get((255, 255, 255), 0)
    assert len(colours) > 50 and white < 0.97 * sum(colours.values())  # not blank
    assert near(colours, PASS_BANNER) > 100 and near(colours, FAIL_BANNER) == 0

    tamper(files["support"], line=3)
    code, bad = report(tmp_path, "bad.html", files["support"].parent, files["root"], key)
    assert code == 1
    text = text_of(dump_dom(bad))
    assert "1 of 2 run(s) NOT verified" in text and "run NOT verified" in text
    assert "invalid_receipt" in text and "altered" in text and "missing_parent" in text
    assert "NOT VERIFIED: receipt: the record hashes to" in text
    colours = png_colors(screenshot(bad, tmp_path / "bad.png"))
    assert near(colours, FAIL_BANNER) > 100  # the failure is on screen, in red
