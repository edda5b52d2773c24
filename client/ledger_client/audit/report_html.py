"""``ledger-verify report``: self-contained HTML pages for auditors.

Pure: builds strings (the CLI writes them). Runs are ordered by time (the log's time of their
first record). Up to ``PAGE_RUNS`` runs make one page (``render_report``); more make an overview
page listing every run with its verdict and linking one page per run (``render_pages``), so no
page grows with the number of runs. docs/design.md "Receipts" and "Decision record (v1)". The
page has no script, no external asset and a Content-Security-Policy that forbids every fetch
(``default-src 'none'``), so opening it contacts nothing. For each run: a verdict banner, the
problems ``ledger-verify run`` finds (highlighted), the parent graph as inline SVG (one box per
record, laid out by ``audit.graph_layout`` so that no edge passes under a box, coloured by
verdict; untrusted memory writes outlined and every record resting on one, in any run,
highlighted as tainted; a parent in another run drawn as its own box linking to that run; a wide
graph scrolls), what each record decided (``audit.decision``: candidates, scores and ranks, the
selection and why, expected and actual outcome and its status, evidence digests, model,
duration, tokens, cost; committed values shown as ``committed`` unless the auditor's disclosures
file opens them), and the timeline (``ledger_client.audit.timeline``) with each record's
verification status part by part: record digest, checkpoint signature, inclusion proof,
witnesses, anchor and its time, plus the values disclosed in the receipts. Each record shows the
agent's claimed time beside the log's leaf time and their difference, and its verdict
(``ledger_client.audit.verdicts``) with every warning (``late by Δ``, ``inputs not linked``);
each run lists its own checks (receipts, run, time, lineage) with where each verdict came from.
Parents the record labels as inferred are marked ``(inferred)`` and drawn dashed. Every text
from the files is HTML-escaped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from html import escape

from ledger.records.commitments import Kept
from ledger_client.audit.decision import Decision, shown_text
from ledger_client.audit.graph_layout import BOX_H, BOX_W, layout
from ledger_client.audit.timeline import TimelineRow, label_of, timeline, trust_of
from ledger_client.audit.verdicts import (
    FROM_INDEX,
    PENDING,
    TimePolicy,
    Verdict,
    run_checks,
    time_text,
)
from ledger_client.audit.verify import RunAudit, iso_ms

__all__ = ["PAGE_RUNS", "render_pages", "render_report", "run_verdict"]

PAGE_RUNS = 20  # more runs than this: an overview page and one page per run

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
svg text{font:11px sans-serif} .graph{overflow-x:auto;max-width:100%;border:1px solid #eee}
tr.down td:first-child{border-left:4px solid #f0a35e} td.dec{font-size:11px;min-width:220px}
td.dec .sel{font-weight:600} td.dec .c{color:#555} .wide{overflow-x:auto;max-width:100%}
"""
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _status_cell(status: str) -> str:
    css = {"valid": "v", "failed": "x", "untrusted": "x"}.get(status.split(" ")[0], "n")
    if status[:1].isdigit():
        css = "n" if status.startswith("0 ") else "v"
    return f'<td class="{css}">{escape(status.replace("_", " "))}</td>'


@dataclass(frozen=True, slots=True)
class _Where:
    """Where each record of every run is drawn: digest -> (run id, step, link target), and
    the digests tainted (an untrusted memory write, or resting on one, across runs)."""

    runs: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    tainted: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What the pages of other runs need to know of a run (small: it crosses processes): its
    file, id, agent, when it started and, per record in log order, (digest, step, closes the
    run, parents, an untrusted memory write)."""

    name: str
    run_id: str | None
    agent: str | None
    started: tuple[int, str]
    records: tuple[tuple[str, int, bool, tuple[str, ...], bool], ...]


def run_summary(name: str, audit: RunAudit) -> RunSummary:
    records = tuple(
        (c.digest, c.record.step, c.record.kind == "run_closed", c.record.parent_digests,
         trust_of(c.record) == "untrusted")
        for c in audit.checks
    )  # fmt: skip
    return RunSummary(
        name=name, run_id=audit.run_id, agent=audit.agent, started=_started(audit), records=records
    )


def _where(audits: Sequence[RunAudit], href: Mapping[str, str]) -> _Where:
    return _where_of([run_summary("", a) for a in audits], href)


def _where_of(runs_in_order: Sequence[RunSummary], href: Mapping[str, str]) -> _Where:
    runs: dict[str, tuple[str, int, str]] = {}
    children: dict[str, list[str]] = {}
    sources = []
    for run in runs_in_order:
        target = href.get(run.run_id or "", "")
        for digest, step, closes, parents, untrusted in run.records:
            runs.setdefault(digest, (run.run_id or "?", step, target))
            if closes:
                continue
            for parent in parents:
                children.setdefault(parent, []).append(digest)
            if untrusted:
                sources.append(digest)
    tainted = set(sources)
    todo = list(sources)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in tainted:
                tainted.add(child)
                todo.append(child)
    return _Where(runs, frozenset(tainted))


def _graph(rows: Sequence[TimelineRow], where: _Where) -> str:
    ids = [r.check.digest for r in rows]
    inside = set(ids)
    external = sorted({d for r in rows for d, _ in r.parents if d not in inside})
    edges = [(d, r.check.digest) for r in rows for d, _ in r.parents]
    drawn = layout([*ids, *external], edges)
    parts = [
        f'<div class="graph"><svg xmlns="http://www.w3.org/2000/svg" '
        f'width="{drawn.width:.0f}" height="{drawn.height:.0f}" role="img" '
        'aria-label="parent graph"><defs><marker id="a" viewBox="0 0 10 10" '
        'refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto">'
        '<path d="M0,0L10,5L0,10z" fill="#57606a"/></marker></defs>'
    ]
    by_digest = {r.check.digest: r for r in rows}
    for (parent, child), points in zip(edges, drawn.edges, strict=True):
        dash = ' stroke-dasharray="5,4"' if parent in by_digest[child].inferred else ""
        colour = "#e36209" if parent in where.tainted else "#57606a"
        path = "M" + " L".join(f"{x:.1f},{y:.1f}" for x, y in points)
        parts.append(
            f'<path class="edge" data-from="{parent}" data-to="{child}" d="{path}" '
            f'fill="none" stroke="{colour}" stroke-width="1.5"{dash} marker-end="url(#a)"/>'
        )
    for digest in ids:
        parts.append(_graph_node(by_digest[digest], *drawn.boxes[digest], where))
    for digest in external:
        parts.append(_external_node(digest, *drawn.boxes[digest], where))
    parts.append("</svg></div>")
    return "".join(parts)


def _graph_node(row: TimelineRow, x: float, y: float, where: _Where) -> str:
    record = row.check.record
    fill = "#fde2e1" if not row.verified else "#fff4c2" if row.warnings else "#dff5e1"
    untrusted = trust_of(record) == "untrusted"
    stroke = "#e36209" if untrusted or row.check.digest in where.tainted else "#57606a"
    note = " tainted" if row.check.digest in where.tainted and not untrusted else ""
    title = escape(f"{record.kind} {label_of(record)} {row.check.digest}")
    return (
        f'<g class="node" data-digest="{row.check.digest}"><title>{title}</title>'
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{BOX_W}" height="{BOX_H}" rx="6" '
        f'fill="{fill}" stroke="{stroke}" stroke-width="2"/>'
        f'<text x="{x + 8:.1f}" y="{y + 16:.1f}">#{record.step} {escape(record.kind)}'
        f"{note}</text>"
        f'<text x="{x + 8:.1f}" y="{y + 32:.1f}">{escape(label_of(record)[:26])}</text></g>'
    )


def _external_node(digest: str, x: float, y: float, where: _Where) -> str:
    run, step, target = where.runs.get(digest, ("", -1, ""))
    text = f"run {run[:13]} #{step}" if run else f"ext:{digest[:12]} (not given)"
    stroke = "#e36209" if digest in where.tainted else "#0969da"
    box = (
        f'<g class="node ext" data-digest="{digest}"><title>parent in another run: '
        f"{escape(digest)}</title>"
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{BOX_W}" height="{BOX_H}" rx="6" '
        f'fill="#ddf4ff" stroke="{stroke}" stroke-width="2" stroke-dasharray="3,2"/>'
        f'<text x="{x + 8:.1f}" y="{y + 16:.1f}">{escape(text)}</text>'
        f'<text x="{x + 8:.1f}" y="{y + 32:.1f}">{digest[:16]}</text></g>'
    )
    if not run:
        return box
    return f'<a href="{escape(target)}#r-{digest[:16]}">{box}</a>'


def _decision_cell(decision: Decision | None) -> str:
    if decision is None:
        return '<td class="dec n">-</td>'
    parts = []
    if decision.model:
        parts.append(f"model <b>{escape(decision.model)}</b>")
    for c in decision.candidates:
        line = (
            f"{escape(str(c['id']))} rank {escape(str(c['rank']))} score "
            f"{escape(str(c['score']))}: {escape(shown_text(c['action'], 60))}"
        )
        parts.append(f'<span class="{"sel" if c["selected"] else "c"}">'
                     f"{'selected ' if c['selected'] else ''}{line}</span>")  # fmt: skip
    if decision.selected is not None:
        parts.append(f"selected <b>{escape(decision.selected)}</b>: {escape(decision.why or '')}")
    if decision.expected is not None:
        parts.append(f"expected {escape(shown_text(decision.expected))}")
    if decision.actual is not None:
        parts.append(f"actual {escape(shown_text(decision.actual))}")
    if decision.status is not None:
        parts.append(f"outcome <b>{escape(decision.status)}</b>")
    parts += [
        f"evidence {escape(name)} <code>{escape(d[:16])}</code>"
        for name, d in sorted(decision.evidence.items())
    ]
    parts += [f"input <code>{d[:16]}</code>" for d in decision.inputs]
    parts += [f"output <code>{d[:16]}</code>" for d in decision.outputs]
    parts += [
        f"{escape(k)} = {escape(shown_text(v, 60))}" for k, v in sorted(decision.parameters.items())
    ]
    for name, value in (
        ("duration", None if decision.duration_ms is None else f"{decision.duration_ms} ms"),
        ("tokens", decision.tokens),
        ("cost", decision.cost),
    ):
        if value is not None:
            parts.append(f"{name} {escape(str(value))}")
    model = decision.capture.get("model_parameters")
    if isinstance(model, dict) and model:
        shown = ", ".join(f"{k}={shown_text(v, 30)}" for k, v in sorted(model.items()))
        parts.append(f"model parameters {escape(shown)}")
    return f'<td class="dec">{"<br>".join(parts) or "-"}</td>'


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


def _parents_cell(row: TimelineRow, where: _Where) -> str:
    if not row.parents:
        return "<td>-</td>"
    out = []
    for digest, step in row.parents:
        mark = " (inferred)" if digest in row.inferred else ""
        if step is not None:
            out.append(f'<a href="#r-{digest[:16]}">#{step}</a>{mark}')
            continue
        run, other, target = where.runs.get(digest, ("", -1, ""))
        if run:
            out.append(
                f'<a href="{escape(target)}#r-{digest[:16]}">run {escape(run[:13])} '
                f"#{other}</a>{mark}"
            )
        else:
            out.append(f"ext:{digest[:12]}{mark}")
    return f"<td>{', '.join(out)}</td>"


def _row(row: TimelineRow, where: _Where) -> str:
    c, record = row.check, row.check.record
    untrusted = trust_of(record) == "untrusted"
    classes = " ".join(
        name
        for name, on in (
            ("fail", not row.verified),
            ("taint", untrusted),
            ("down", c.digest in where.tainted and not untrusted),
        )
        if on
    )
    anchor = c.anchor + (f" {c.anchored_at_text}" if c.anchored_at_text else "")
    warned = "; ".join(row.warnings)
    if not row.verified:
        verdict = f'<td class="x">NOT VERIFIED: {escape(row.why_not or "")}</td>'
    elif warned:
        verdict = f'<td class="w">verified, warning: {escape(warned)}</td>'
    else:
        verdict = '<td class="v">verified'
    checks = " &middot; ".join(f"{escape(k.name)} {escape(k.status)}" for k in row.verdict.checks)
    verdict = verdict.replace("</td>", "") + f'<br><span class="meta">{checks}</span></td>'

    cells = [
        f"<td>{record.step}</td>",
        f'<td class="nw">claimed {escape(record.time)}<br>'
        f"<span class=meta>log {escape(_log_time(row))} "
        f"({escape(time_text(record, c.logged_at_ms))})</span></td>",
        f'<td class="nw">{escape(record.kind)}</td>',
        f"<td>{escape(label_of(record))}</td>",
        f"<td>{escape(trust_of(record) or '')}</td>",
        _parents_cell(row, where),
        f"<td>{c.index}</td>",
        _status_cell(c.record_status),
        _status_cell(c.checkpoint),
        _status_cell(c.inclusion),
        _status_cell(c.witnesses),
        _status_cell(anchor),
        _disclosed(row),
        _decision_cell(row.decision),
        verdict,
    ]
    return f'<tr class="{classes}" id="r-{c.digest[:16]}">{"".join(cells)}</tr>'


def _log_time(row: TimelineRow) -> str:
    return iso_ms(row.check.logged_at_ms) or "?"


_HEADER = (
    "step", "time", "kind", "tool / decision", "trust", "parents", "log index", "record",
    "checkpoint signature", "inclusion", "witnesses", "anchor", "disclosed", "decision",
    "verdict",
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


def _run_section(
    name: str,
    audit: RunAudit,
    policy: TimePolicy | None,
    where: _Where,
    private: Mapping[str, Sequence[Kept]] | None,
) -> tuple[str, Verdict]:
    """The run's section and its verdict."""
    rows = timeline(audit, policy, private)
    verdict = run_checks(audit, [(r.check, r.verdict) for r in rows])
    if audit.stored:  # the index's stored verdict for this file and these trust inputs
        verdict = Verdict(checks=tuple(replace(c, source=FROM_INDEX) for c in verdict.checks))
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
        f'<section class="run" id="run-{escape(audit.run_id or "")}">'
        f"<h2>Run {escape(audit.run_id or '?')}</h2>"
        f'<div class="meta">file {escape(name)} &middot; agent {escape(audit.agent or "?")}'
        f"{f' &middot; parents in other runs: {escape(external)}' if external else ''}</div>"
        f"{banner}{_checks_list(verdict)}"
        f"{f'<ul class=problems>{problems}</ul>' if problems else ''}"
        f"<h3>Parent graph</h3>{_graph(rows, where)}"
        f'<h3>Timeline</h3><div class="wide"><table><thead><tr>{head}</tr></thead><tbody>'
        f"{''.join(_row(r, where) for r in rows)}</tbody></table></div></section>",
        verdict,
    )


def _started(audit: RunAudit) -> tuple[int, str]:
    """When a run started: the log's time of its first record (then the claimed time)."""
    logged = [c.logged_at_ms for c in audit.checks if c.logged_at_ms is not None]
    claimed = min((c.record.time for c in audit.checks), default="")
    return (min(logged) if logged else 2**62, claimed)


def _ordered(runs: Sequence[tuple[str, RunAudit]]) -> list[tuple[str, RunAudit]]:
    return sorted(runs, key=lambda pair: (_started(pair[1]), pair[0]))


def _page(title: str, notes: list[str], summary: str, body: str) -> str:
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        f"<title>{escape(title)}</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<h1>{escape(title)}</h1>"
        f'<div class="meta">{escape("; ".join(notes)) or "anchors and witnesses checked"}</div>'
        f"{summary}"
        '<div class="legend meta"><span>green: verified</span><span>red: not verified</span>'
        "<span>orange outline: untrusted memory write, and (tainted) every record resting on "
        "one</span><span>yellow: verified with a warning</span>"
        "<span>blue dashed box: a parent in another run (a link to it)</span>"
        "<span>#n: parent at step n; ext: parent in another run; (inferred), dashed: a link "
        "the SDK inferred by content match</span></div>"
        f"{body}</body></html>\n"
    )


def _summary(verdicts: Sequence[Verdict]) -> str:
    failing = sum(1 for v in verdicts if not v.ok)
    pending = sum(1 for v in verdicts if v.status == PENDING)
    if failing and failing == pending:
        return f'<div class="banner pend">{pending} of {len(verdicts)} run(s) anchors pending</div>'
    if failing:
        return f'<div class="banner bad">{failing} of {len(verdicts)} run(s) NOT verified</div>'
    return f'<div class="banner ok">all {len(verdicts)} run(s) verified</div>'


def _notes(anchors_checked: bool, witnesses_checked: bool) -> list[str]:
    notes = []
    if not anchors_checked:
        notes.append("anchors not checked (no --tsa-root given)")
    if not witnesses_checked:
        notes.append("witness cosignatures not checked (no --witness key given)")
    return notes


_TITLE = "Decision Ledger audit report"


def render_report(
    runs: Sequence[tuple[str, RunAudit]],
    *,
    anchors_checked: bool,
    witnesses_checked: bool,
    policy: TimePolicy | None = None,
    private: Mapping[str, Sequence[Kept]] | None = None,
    verdicts: dict[int, Verdict] | None = None,
) -> str:
    """The whole page for ``runs`` ((file name, audit) pairs) under the time ``policy``;
    ``private``: the auditor's disclosures (record digest -> disclosures); ``verdicts``, when
    given, receives each run's verdict by ``id(audit)``."""
    ordered = _ordered(runs)
    where = _where([a for _, a in ordered], {})
    sections = [_run_section(n, a, policy, where, private) for n, a in ordered]
    if verdicts is not None:
        verdicts.update((id(a), v) for (_, a), (_, v) in zip(ordered, sections, strict=True))
    body = "".join(html for html, _ in sections)
    summary = _summary([verdict for _, verdict in sections])
    return _page(_TITLE, _notes(anchors_checked, witnesses_checked), summary, body)


def _in_order(
    section: Callable[[int], tuple[str, Verdict]], count: int
) -> list[tuple[str, Verdict]]:
    return [section(n) for n in range(count)]


def run_page_name(number: int) -> str:
    """The file name of the ``number``-th run's page (beside the overview's folder)."""
    return f"run-{number:05d}.html"


@dataclass(frozen=True, slots=True)
class PagePlan:
    """The pages of many runs (``render_pages``): ``order[n]`` is the index (in the runs given)
    of the run on page ``n`` (time order); ``names``: run id -> its page, as the overview
    links it; ``where``: every record's run and page, and the tainted records."""

    order: tuple[int, ...]
    names: Mapping[str, str]
    where: _Where
    notes: tuple[str, ...]
    overview: str


def plan_pages(
    summaries: Sequence[RunSummary],
    *,
    anchors_checked: bool,
    witnesses_checked: bool,
    folder: str,
    overview: str,
) -> PagePlan:
    order = sorted(range(len(summaries)), key=lambda i: (summaries[i].started, summaries[i].name))
    names = {summaries[i].run_id or "": f"{folder}/{run_page_name(n)}" for n, i in enumerate(order)}
    pages_of = {run: path.rsplit("/", 1)[-1] for run, path in names.items()}
    where = _where_of([summaries[i] for i in order], pages_of)
    notes = tuple(_notes(anchors_checked, witnesses_checked))
    return PagePlan(tuple(order), names, where, notes, overview)


def run_page(
    plan: PagePlan,
    name: str,
    audit: RunAudit,
    *,
    policy: TimePolicy | None = None,
    private: Mapping[str, Sequence[Kept]] | None = None,
) -> tuple[str, Verdict]:
    """A run's page (``plan``: ``plan_pages``) and its verdict."""
    section, verdict = _run_section(name, audit, policy, plan.where, private)
    back = f'<p><a href="../{escape(plan.overview)}">overview of every run</a></p>'
    page = _page(f"{_TITLE}: run {audit.run_id or '?'}", list(plan.notes), back, section)
    return page, verdict


def overview_page(
    plan: PagePlan, summaries: Sequence[RunSummary], verdicts: Sequence[Verdict]
) -> str:
    """The overview: one line per run (``summaries`` and ``verdicts`` in the order given,
    shown in ``plan.order``), linking its page."""
    lines = []
    for n, i in enumerate(plan.order):
        run, verdict = summaries[i], verdicts[i]
        css = "v" if verdict.ok else "x"
        lines.append(
            f'<tr><td>{n + 1}</td><td><a href="{escape(plan.names[run.run_id or ""])}">'
            f"{escape(run.run_id or '?')}</a></td><td>{escape(run.agent or '?')}</td>"
            f"<td>{len(run.records)}</td><td>{escape(run.name)}</td>"
            f'<td class="{css}">{escape(verdict.status)}'
            f"{escape(': ' + '; '.join(verdict.notes())) if verdict.notes() else ''}</td></tr>"
        )
    table = (
        "<table><thead><tr><th>#</th><th>run</th><th>agent</th><th>records</th><th>file</th>"
        f"<th>verdict</th></tr></thead><tbody>{''.join(lines)}</tbody></table>"
    )
    shown = [verdicts[i] for i in plan.order]
    return _page(_TITLE, list(plan.notes), _summary(shown), table)


def render_pages(
    runs: Sequence[tuple[str, RunAudit]],
    *,
    anchors_checked: bool,
    witnesses_checked: bool,
    folder: str,
    overview: str,
    policy: TimePolicy | None = None,
    private: Mapping[str, Sequence[Kept]] | None = None,
    verdicts: dict[int, Verdict] | None = None,
    map_runs: Callable[[Callable[[int], tuple[str, Verdict]], int], list[tuple[str, Verdict]]]
    | None = None,
) -> tuple[str, dict[str, str]]:
    """The overview page (one line per run, in time order, linking its page in the folder
    ``folder`` beside it) and the run pages by file name (each links back to ``overview``,
    the overview's file name); every page self-contained. ``verdicts`` as for
    ``render_report``. ``map_runs(section, count)``: ``[section(n) for n in range(count)]``,
    in order (the default), or the same computed elsewhere (``audit.parallel.map_forked``:
    in worker processes). ``audit.parallel.report_pages`` makes the same pages in the
    processes that check the runs."""
    summaries = [run_summary(name, audit) for name, audit in runs]
    plan = plan_pages(
        summaries, anchors_checked=anchors_checked, witnesses_checked=witnesses_checked,
        folder=folder, overview=overview,
    )  # fmt: skip

    def page_of(n: int) -> tuple[str, Verdict]:
        name, audit = runs[plan.order[n]]
        return run_page(plan, name, audit, policy=policy, private=private)

    every = (map_runs or _in_order)(page_of, len(runs))
    pages = {run_page_name(n): page for n, (page, _) in enumerate(every)}
    shown: list[Verdict | None] = [None] * len(runs)
    for i, (_, verdict) in zip(plan.order, every, strict=True):
        shown[i] = verdict
        if verdicts is not None:
            verdicts[id(runs[i][1])] = verdict
    done = [v for v in shown if v is not None]
    return overview_page(plan, summaries, done), pages
