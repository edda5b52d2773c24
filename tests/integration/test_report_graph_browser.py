"""The report's parent graph measured in real headless Chromium with the network blocked: for
every parent link in the data of a 17-step chain and of a 30-record fan-out/fan-in graph (with
a parent in another run), the drawn path starts inside the parent's box, ends inside the
child's and passes through no other box (positions from the browser's own SVG geometry:
``getBBox`` and ``getPointAtLength`` every pixel along each path). The page is the report as
written, plus a measuring script the test adds (and allows in the copy's CSP). A graph wider
than the window scrolls inside its own box."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.records.decision import record_digest
from ledger_client.cli.main import main
from tests.browser import NO_NETWORK, chromium, dump_dom
from tests.decision_world import CHAIN, FAN, build, write

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MEASURE = """<script>(function () {
  const out = [];
  for (const svg of document.querySelectorAll('svg[aria-label="parent graph"]')) {
    const boxes = {};
    for (const g of svg.querySelectorAll("g.node")) {
      boxes[g.dataset.digest] = g.querySelector("rect").getBBox();
    }
    const inside = (p, r) =>
      p.x >= r.x && p.x <= r.x + r.width && p.y >= r.y && p.y <= r.y + r.height;
    const strictly = (p, r) =>
      p.x > r.x && p.x < r.x + r.width && p.y > r.y && p.y < r.y + r.height;
    for (const path of svg.querySelectorAll("path.edge")) {
      const from = path.dataset.from, to = path.dataset.to, len = path.getTotalLength();
      const crossed = new Set();
      for (let s = 0; s <= len; s += 1) {
        const p = path.getPointAtLength(s);
        for (const [d, r] of Object.entries(boxes)) {
          if (d !== from && d !== to && strictly(p, r)) crossed.add(d);
        }
      }
      out.push({from, to, crossed: [...crossed],
        starts: from in boxes && inside(path.getPointAtLength(0), boxes[from]),
        ends: to in boxes && inside(path.getPointAtLength(len), boxes[to])});
    }
  }
  const graphs = [...document.querySelectorAll("div.graph")].map((d) => ({
    scroll: d.scrollWidth, client: d.clientWidth, window: window.innerWidth}));
  const pre = document.createElement("pre");
  pre.id = "geometry";
  pre.textContent = JSON.stringify({edges: out, graphs: graphs});
  document.body.appendChild(pre);
})();</script>"""


def test_every_edge_runs_from_parent_box_to_child_box_crossing_no_other(tmp_path: Path) -> None:
    chromium()
    world = build()
    files = write(tmp_path / "runs", world)
    page = tmp_path / "report.html"
    result = CliRunner().invoke(
        main,
        ["report", str(files["chain"]), str(files["fan"]), "--key", world.world.key.key_string(),
         "--tsa-root", str(files["root"]), "--html", str(page)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "<script" not in html and not re.search(r"(?:src|href)=\"?(?:https?:)?//", html)
    measured = tmp_path / "measured.html"
    measured.write_text(
        html.replace(
            "default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';"
        ).replace("</body>", MEASURE + "</body>")
    )
    dom = dump_dom(measured, *NO_NETWORK)
    found = re.search(r'<pre id="geometry">(.*?)</pre>', dom, re.S)
    assert found, "the measuring script did not run"
    measured_json = json.loads(found.group(1).replace("&quot;", '"'))
    drawn = {(e["from"], e["to"]): e for e in measured_json["edges"]}
    graphs = measured_json["graphs"]
    assert len(graphs) == 2 and all(g["client"] <= g["window"] for g in graphs)
    assert any(g["scroll"] > g["client"] for g in graphs)  # the wide fan graph scrolls in its box
    for run, expected in ((CHAIN, 17 + 1), (FAN, 30 + 1)):
        links = [
            (parent, record_digest(r).hex()) for r in world.runs[run] for parent in r.parent_digests
        ]
        assert len(world.runs[run]) == expected and len(links) >= expected - 1
        for link in links:
            edge = drawn.get(link)
            assert edge is not None, f"{run}: no path drawn for {link}"
            assert edge["starts"], f"{run}: path does not start in the parent's box {link}"
            assert edge["ends"], f"{run}: path does not end in the child's box {link}"
            assert edge["crossed"] == [], f"{run}: path {link} crosses {edge['crossed']}"
    fan_root = record_digest(world.runs[FAN][0]).hex()
    chain_last = world.runs[FAN][0].parent_digests[0]
    assert drawn[(chain_last, fan_root)]["starts"]  # the other run's box, drawn and linked
    assert f'href="#r-{chain_last[:16]}"' in html
