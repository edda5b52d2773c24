"""``ledger-verify report``: one self-contained HTML page for auditors.

Pure: builds a string (the CLI writes it). docs/design.md "Receipts" and "Decision record (v1)".
The page has no script, no external asset and a Content-Security-Policy that forbids every
fetch (``default-src 'none'``), so opening it contacts nothing. For each run: a verdict banner,
the problems ``ledger-verify run`` finds (highlighted), the parent graph as inline SVG (one box
per record, laid out by depth in the graph, coloured by verdict; untrusted memory writes
outlined), and the timeline (``ledger_client.audit.timeline``) with each record's verification
status part by part: record digest, checkpoint signature, inclusion proof, witnesses, anchor and its
time, plus the values disclosed in the receipts. Each record shows the agent's claimed time
beside the log's leaf time and their difference, and its verdict (``ledger_client.audit.verdicts``)
with every warning (``late by Δ``, ``inputs not linked``); each run lists its own checks
(receipts, run, time, lineage) with where each verdict came from. Parents the record labels as
inferred are marked ``(inferred)`` and drawn dashed. Every text from the files is HTML-escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from ledger_client.audit.timeline import TimelineRow, label_of, timeline, trust_of
from ledger_client.audit.verdicts import PENDING, TimePolicy, Verdict, run_checks, time_text
from ledger_client.audit.verify import RunAudit

__all__ = ["render_report"]

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1b1f24;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 6px}
.meta{color:#555;font-family:monospace;font-size:12px}
.banner{padding:10px 14px;border-radius:6px;font-weight:600;margin:8px 0}
.ok{background:#dff5e1;color:#10591c;border:1px solid #9fd8a7}
.bad{background:#fde2e1;color:#8a1212;border:1px solid #f1a3a0}
.pend{background:#fff4d6;color:#6b4b00;border:1px solid #e8c766}
ul.problems li{background:#fde2e1;margin:3px 0;padding:4px 8px;border-left:4px solid #c62828}
table{border-collapse:collapse;margin-top:8px;width:100%}
th,td{border:1px solid #d0d7de;padding:3px 6px;text-align:left;vertical-align:top;font-size:12px}
th{background:#f0f3f6} tr.fail td{background:#fff0ef}
tr.taint td:first-child{border-left:4px solid #e36209}
td.v{color:#10591c} td.x{color:#b71c1c;font-weight:600} td.n{color:#777}
td.w{color:#8a5a00;font-weight:600}
td.nw{white-space:nowrap} code{font-size:11px} .legend span{display:inline-block;margin-right:14px}
svg text{font:11px sans-serif}
"""
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _status_cell(status: str) -> str:
    css = {"valid": "v", "failed": "x", "untrusted": "x"}.get(status.split(" ")[0], "n")
    if status[:1].isdigit():
        css = "n" if status.startswith("0 ") else "v"
    return f'<td class="{css}">{escape(status.replace("_", " "))}</td>'


def _depths(rows: Sequence[TimelineRow]) -> dict[str, int]:
    """Longest distance from a root of the run's parent graph (external parents ignored)."""
    depth: dict[str, int] = {}
    for row in sorted(rows, key=lambda r: r.check.record.step):
        inside = [depth[d] for d, step in row.parents if step is not None and d in depth]
        depth[row.check.digest] = 1 + max(inside) if inside else 0
    return depth


def _graph(rows: Sequence[TimelineRow]) -> str:
    depth = _depths(rows)
    columns: dict[int, int] = {}
    place: dict[str, tuple[int, int]] = {}
    for row in sorted(rows, key=lambda r: r.check.record.step):
        d = depth[row.check.digest]
        place[row.check.digest] = (20 + d * 190, 20 + columns.get(d, 0) * 56)
        columns[d] = columns.get(d, 0) + 1
    width = 40 + (max(depth.values(), default=0) + 1) * 190
    height = 40 + max(columns.values(), default=1) * 56
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'role="img" aria-label="parent graph"><defs><marker id="a" viewBox="0 0 10 10" '
        'refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto">'
        '<path d="M0,0L10,5L0,10z" fill="#57606a"/></marker></defs>'
    ]
    for row in rows:
        x, y = place[row.check.digest]
        for parent, _ in row.parents:
            if parent in place:
                px, py = place[parent]
                dash = ' stroke-dasharray="5,4"' if parent in row.inferred else ""
                parts.append(
                    f'<line x1="{px + 160}" y1="{py + 20}" x2="{x}" y2="{y + 20}" '
                    f'stroke="#57606a"{dash} marker-end="url(#a)"/>'
                )
    for row in rows:
        parts.append(_graph_node(row, *place[row.check.digest]))
    parts.append("</svg>")
    return "".join(parts)


def _graph_node(row: TimelineRow, x: int, y: int) -> str:
    record = row.check.record
    fill = "#fde2e1" if not row.verified else "#fff4c2" if row.warnings else "#dff5e1"
    stroke = "#e36209" if trust_of(record) == "untrusted" else "#57606a"
    external = sum(1 for _, step in row.parents if step is None)
    note = f" +{external} ext" if external else ""
    title = escape(f"{record.kind} {label_of(record)} {row.check.digest}")
    return (
        f'<g><title>{title}</title><rect x="{x}" y="{y}" width="160" height="40" rx="6" '
        f'fill="{fill}" stroke="{stroke}" stroke-width="2"/>'
        f'<text x="{x + 8}" y="{y + 16}">#{record.step} {escape(record.kind)}{note}</text>'
        f'<text x="{x + 8}" y="{y + 32}">{escape(label_of(record)[:26])}</text></g>'
    )


def _disclosed(row: TimelineRow) -> str:
    if not row.check.disclosed:
        return '<td class="n">-</td>'
    items = "<br>".join(
        f"<code>{escape(path)}</code> = {escape(_short(value))}"
        for path, value in row.check.disclosed
    )
    return f"<td>{items}</td>"


def _short(value: object) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def _row(row: TimelineRow) -> str:
    c, record = row.check, row.check.record
    classes = " ".join(
        name
        for name, on in (("fail", not row.verified), ("taint", trust_of(record) == "untrusted"))
        if on
    )
    anchor = c.anchor + (f" {c.anchored_at_text}" if c.anchored_at_text else "")
    warned = "; ".join(row.warnings)
    if not row.verified:
        verdict = f'<td class="x">NOT VERIFIED: {escape(row.why_not or "")}</td>'
    elif warned:
        verdict = f'<td class="w">verified, warning: {escape(warned)}</td>'
    else:
        verdict = '<td class="v">verified</td>'

    cells = [
        f"<td>{record.step}</td>",
        f'<td class="nw">claimed {escape(record.time)}<br>'
        f"<span class=meta>log {escape(_log_time(row))} "
        f"({escape(time_text(record, c.logged_at_ms))})</span></td>",
        f'<td class="nw">{escape(record.kind)}</td>',
        f"<td>{escape(label_of(record))}</td>",
        f"<td>{escape(trust_of(record) or '')}</td>",
        f"<td>{escape(row.parent_text() or '-')}</td>",
        f"<td>{c.index}</td>",
        _status_cell(c.record_status),
        _status_cell(c.checkpoint),
        _status_cell(c.inclusion),
        _status_cell(c.witnesses),
        _status_cell(anchor),
        _disclosed(row),
        verdict,
    ]
    return f'<tr class="{classes}" id="r-{c.digest[:16]}">{"".join(cells)}</tr>'


def _log_time(row: TimelineRow) -> str:
    value = row.to_json_obj()["logged_at"]
    return str(value) if value else "?"


_HEADER = (
    "step", "time", "kind", "tool / decision", "trust", "parents", "log index", "record",
    "checkpoint signature", "inclusion", "witnesses", "anchor", "disclosed", "verdict",
)  # fmt: skip


def run_verdict(audit: RunAudit, policy: TimePolicy | None = None) -> Verdict:
    """The run's checks (``verdicts.run_checks``) over its timeline rows."""
    rows = timeline(audit, policy)
    return run_checks(audit, [(r.check, r.verdict) for r in rows])


def _checks_list(verdict: Verdict) -> str:
    items = "".join(
        f"<li><b>{escape(c.name)}</b>: {escape(c.status)}"
        f"{f' ({escape(c.message)})' if c.message else ''} "
        f'<span class="meta">[{escape(c.source)}]</span></li>'
        for c in verdict.checks
    )
    return f'<ul class="checks">{items}</ul>'


def _run_section(name: str, audit: RunAudit, policy: TimePolicy | None) -> str:
    rows = timeline(audit, policy)
    verdict = run_checks(audit, [(r.check, r.verdict) for r in rows])
    late = [r for r in rows if (t := r.verdict.named("time")) and t.status == "failed"]
    bad = len(audit.problems) + len(late)
    warned = len(verdict.of("warning"))
    if not verdict.ok:
        banner = f'<div class="banner bad">run NOT verified: {bad} problem(s)</div>'
    else:
        note = f", {warned} warning(s)" if warned else ""
        banner = (
            f'<div class="banner ok">run verified: {len(rows)} records, every receipt valid, '
            f"complete and in order{note}</div>"
        )
    if verdict.status == PENDING:
        banner = (
            f'<div class="banner pend">anchors pending: {bad} record(s) not anchored yet, '
            "everything else verified (upgrade the run file after the log's next anchor)</div>"
        )
    problems = "".join(
        f"<li><b>{escape(p.code)}</b> at "
        f"{'run' if p.step is None else f'step {p.step}'}"
        f"{f' [{escape(src)}]' if src else ''}: {escape(p.message)}</li>"
        for p, src in audit.problems
    )
    external = ", ".join(d[:16] for d in audit.external_parents)
    head = "".join(f"<th>{h}</th>" for h in _HEADER)
    return (
        f'<section class="run"><h2>Run {escape(audit.run_id or "?")}</h2>'
        f'<div class="meta">file {escape(name)} &middot; agent {escape(audit.agent or "?")}'
        f"{f' &middot; parents in other runs: {escape(external)}' if external else ''}</div>"
        f"{banner}{_checks_list(verdict)}"
        f"{f'<ul class=problems>{problems}</ul>' if problems else ''}"
        f"<h3>Parent graph</h3>{_graph(rows)}"
        f"<h3>Timeline</h3><table><thead><tr>{head}</tr></thead><tbody>"
        f"{''.join(_row(r) for r in rows)}</tbody></table></section>"
    )


def render_report(
    runs: Sequence[tuple[str, RunAudit]],
    *,
    anchors_checked: bool,
    witnesses_checked: bool,
    policy: TimePolicy | None = None,
) -> str:
    """The whole page for ``runs`` ((file name, audit) pairs) under the time ``policy``."""
    failing = sum(1 for _, audit in runs if not run_verdict(audit, policy).ok)
    pending = sum(1 for _, audit in runs if run_verdict(audit, policy).status == PENDING)
    summary = (
        f'<div class="banner ok">all {len(runs)} run(s) verified</div>'
        if not failing
        else f'<div class="banner bad">{failing} of {len(runs)} run(s) NOT verified</div>'
    )
    if failing and failing == pending:
        summary = f'<div class="banner pend">{pending} of {len(runs)} run(s) anchors pending</div>'

    notes = []
    if not anchors_checked:
        notes.append("anchors not checked (no --tsa-root given)")
    if not witnesses_checked:
        notes.append("witness cosignatures not checked (no --witness key given)")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        "<title>Decision Ledger audit report</title>"
        f"<style>{_CSS}</style></head><body>"
        "<h1>Decision Ledger audit report</h1>"
        f'<div class="meta">{escape("; ".join(notes)) or "anchors and witnesses checked"}</div>'
        f"{summary}"
        '<div class="legend meta"><span>green: verified</span><span>red: not verified</span>'
        "<span>orange outline: untrusted memory write</span>"
        "<span>yellow: verified with a warning</span>"
        "<span>#n: parent at step n; ext: parent in another run; (inferred), dashed: a link "
        "the SDK inferred by content match</span></div>"
        f"{''.join(_run_section(name, audit, policy) for name, audit in runs)}"
        "</body></html>\n"
    )
