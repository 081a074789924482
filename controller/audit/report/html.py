"""The report as one self-contained HTML file: no network, no external scripts, styles or fonts.

Same content as the text report (:mod:`controller.audit.report.text`), plus a
deviation table an inspector can sort (a few lines of inline JavaScript: click
a column heading) and three inline SVG charts per day: deviations over the
day, cut card positions against the profile's window, and cards per shoe.
"""

from __future__ import annotations

import html
import os

from controller.audit.report.model import (
    SEVERITIES,
    DayReport,
    DevRow,
    Report,
    RoundInfo,
    clock,
)
from controller.audit.report.rounds import round_lines
from controller.audit.report.text import day_summary, entry_text, shoe_heading
from controller.events import parse_time
from controller.screening.evidence import run_text

_COLOURS = {"critical": "#b3261e", "warning": "#c77700", "info": "#3b6ea5"}

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em;color:#1b1b1b;
 max-width:1100px}
h1{font-size:1.4em}h2{font-size:1.2em;border-bottom:2px solid #444;padding-bottom:.2em;
 margin-top:2em}h3{font-size:1.05em;margin-top:1.2em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
th,td{border:1px solid #bbb;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#eee}table.sortable th{cursor:pointer;user-select:none}
table.sortable th:after{content:" \\2195";color:#888}
td.num{text-align:right}.critical{color:#b3261e;font-weight:bold}
.warning{color:#c77700;font-weight:bold}.info{color:#3b6ea5}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.85em}
.charts{display:flex;flex-wrap:wrap;gap:1em}.chart{border:1px solid #ccc;padding:.3em}
.chart p{margin:.2em 0;font-size:.85em;font-weight:bold}
.note{color:#555;font-style:italic}
"""

_SCRIPT = """
(function(){
 function key(td){var v=td.getAttribute("data-sort");return v===null?td.textContent:v;}
 document.querySelectorAll("table.sortable").forEach(function(table){
  table.querySelectorAll("th").forEach(function(th,col){
   th.addEventListener("click",function(){
    var body=table.tBodies[0];var rows=Array.prototype.slice.call(body.rows);
    var asc=th.getAttribute("data-dir")!=="asc";
    table.querySelectorAll("th").forEach(function(h){h.removeAttribute("data-dir");});
    th.setAttribute("data-dir",asc?"asc":"desc");
    rows.sort(function(a,b){
     var x=key(a.cells[col]),y=key(b.cells[col]);var nx=parseFloat(x),ny=parseFloat(y);
     var c=(!isNaN(nx)&&!isNaN(ny)&&String(nx)===x.trim()&&String(ny)===y.trim())?nx-ny:
      x.localeCompare(y);
     return asc?c:-c;});
    rows.forEach(function(r){body.appendChild(r);});
   });
  });
 });
})();
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _seconds(time: str | None) -> float | None:
    if not time:
        return None
    try:
        return parse_time(time).timestamp()
    except ValueError:  # EventError: not an ISO-8601 time
        return None


# --------------------------------------------------------------------------- charts


def _deviation_chart(day: DayReport) -> str:
    width, height, left, right = 560, 150, 70, 15
    lanes = {s: 30 + i * 38 for i, s in enumerate(SEVERITIES)}
    start = _seconds(day.opened) or min(
        (s for s in (_seconds(d.time) for d in day.deviations) if s is not None), default=0.0)
    end = _seconds(day.closed) or max(
        (s for s in (_seconds(d.time) for d in day.deviations) if s is not None), default=start)
    span = max(end - start, 1.0)
    parts = [f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             'role="img" aria-label="deviations over the day">']
    for sev, y in lanes.items():
        parts.append(f'<text x="4" y="{y + 4}" font-size="11">{sev}</text>'
                     f'<line x1="{left}" y1="{y}" x2="{width - right}" y2="{y}" '
                     'stroke="#ddd"/>')
    for d in day.deviations:
        t = _seconds(d.time)
        if t is None or d.severity not in lanes:
            continue
        x = left + (t - start) / span * (width - left - right)
        parts.append(f'<circle cx="{x:.1f}" cy="{lanes[d.severity]}" r="5" '
                     f'fill="{_COLOURS[d.severity]}" fill-opacity="0.75">'
                     f'<title>{_e(clock(d.time))} {_e(d.code)}: {_e(d.message)}</title></circle>')
    parts.append(f'<text x="{left}" y="{height - 6}" font-size="11">{_e(clock(day.opened))}'
                 f'</text><text x="{width - right}" y="{height - 6}" font-size="11" '
                 f'text-anchor="end">{_e(clock(day.closed))}</text>')
    if not day.deviations:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" '
                     'font-size="13" fill="#555">no deviations</text>')
    parts.append("</svg>")
    return "".join(parts)


def _cut_card_chart(day: DayReport) -> str:
    if day.window is None:
        return ""
    lo, hi = day.window
    shoes = sorted(day.shoes.values(), key=lambda s: s.shoe)
    values = [v for s in shoes for v in (s.cut_card_placed, s.cut_card_measured) if v is not None]
    top = max([hi, *values]) * 1.3 + 5
    width, height, left, bottom = 560, 180, 45, 25
    n = max(len(shoes), 1)
    step = (width - left - 10) / n

    def y(v: float) -> float:
        return 10 + (1 - v / top) * (height - bottom - 10)

    parts = [f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             'role="img" aria-label="cut card positions against the window">',
             f'<rect x="{left}" y="{y(hi):.1f}" width="{width - left - 10}" '
             f'height="{max(y(lo) - y(hi), 2):.1f}" fill="#2e7d32" fill-opacity="0.18">'
             f'<title>rule: {lo}–{hi} cards behind the cut card</title></rect>',
             f'<text x="4" y="{y(hi) + 4:.1f}" font-size="10">{hi}</text>',
             f'<text x="4" y="{y(lo) + 4:.1f}" font-size="10">{lo}</text>',
             f'<line x1="{left}" y1="{y(0):.1f}" x2="{width - 10}" y2="{y(0):.1f}" '
             'stroke="#888"/>']
    for i, s in enumerate(shoes):
        cx = left + step * (i + 0.5)
        parts.append(f'<text x="{cx:.1f}" y="{height - 6}" font-size="10" '
                     f'text-anchor="middle">{s.shoe}</text>')
        for value, filled, what in ((s.cut_card_placed, False, "placed"),
                                    (s.cut_card_measured, True, "came out")):
            if value is None:
                continue
            out = not lo <= value <= hi
            colour = "#b3261e" if out else "#1b1b1b"
            fill = colour if filled else "none"
            parts.append(f'<circle cx="{cx:.1f}" cy="{y(value):.1f}" r="5" stroke="{colour}" '
                         f'stroke-width="2" fill="{fill}"><title>shoe {s.shoe}: {what} with '
                         f'{value} card(s) behind it</title></circle>')
    parts.append("</svg>")
    return "".join(parts)


def _cards_chart(day: DayReport) -> str:
    shoes = sorted(day.shoes.values(), key=lambda s: s.shoe)
    if not shoes:
        return ""
    width, height, left, bottom = 560, 180, 40, 25
    top = max(s.cards for s in shoes) or 1
    step = (width - left - 10) / len(shoes)
    parts = [f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             'role="img" aria-label="cards per shoe">']
    for i, s in enumerate(shoes):
        h = s.cards / top * (height - bottom - 20)
        x = left + step * i + step * 0.15
        parts.append(f'<rect x="{x:.1f}" y="{height - bottom - h:.1f}" width="{step * 0.7:.1f}" '
                     f'height="{h:.1f}" fill="#3b6ea5"><title>shoe {s.shoe}: {s.cards} card(s), '
                     f'{s.burns} burned, {s.rounds} round(s)</title></rect>'
                     f'<text x="{x + step * 0.35:.1f}" y="{height - 6}" font-size="10" '
                     f'text-anchor="middle">{s.shoe}</text>'
                     f'<text x="{x + step * 0.35:.1f}" y="{height - bottom - h - 3:.1f}" '
                     f'font-size="10" text-anchor="middle">{s.cards}</text>')
    parts.append("</svg>")
    return "".join(parts)


# --------------------------------------------------------------------------- page


def _deviation_table(day: DayReport) -> str:
    if not day.deviations:
        return '<p>No deviations.</p>'
    order = {s: i for i, s in enumerate(SEVERITIES)}
    rows = []
    for d in day.deviations:
        rows.append(
            f'<tr><td data-sort="{_e(d.time)}">{_e(clock(d.time))}</td>'
            f'<td class="num">{_e(d.seq)}</td><td class="num">{_e(d.shoe)}</td>'
            f'<td class="num">{_e(d.round)}</td><td>{_e(d.code)}</td>'
            f'<td class="{_e(d.severity)}" data-sort="{order.get(d.severity, 9)}">'
            f'{_e(d.severity)}</td><td>{_e(d.message)}{_run_cell(d)}</td><td>{_e(d.rule)}</td>'
            f'<td>{_e(d.source)}</td></tr>')
    head = "".join(f"<th>{h}</th>" for h in ("time", "seq", "shoe", "round", "code", "severity",
                                             "message", "rule", "decided by"))
    return (f'<table class="sortable deviations"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def _run_line(run: str | None) -> str:
    """The run of cards under a deviation (run_text), as the page shows it."""
    return f'<br><small class="run">{_e(run)}</small>' if run else ""


def _run_cell(d: DevRow) -> str:
    return _run_line(run_text(d.evidence))


def _timeline(day: DayReport) -> str:
    out = []

    def section(title: str, entries: list) -> None:
        if not entries:
            return
        rows = "".join(
            f'<tr><td>{_e(clock(e.time))}</td><td class="num">{_e(e.seq)}</td>'
            f'<td class="{_e(e.severity or "")}">{_e(entry_text(e))}'
            + _run_line(e.note)
            + '</td></tr>'
            for e in entries)
        out.append(f"<h4>{_e(title)}</h4><table class=\"timeline\"><thead><tr><th>time</th>"
                   f"<th>seq</th><th>what</th></tr></thead><tbody>{rows}</tbody></table>")

    section("opening", day.opening)
    for n, s in sorted(day.shoes.items()):
        section(shoe_heading(n, s), s.entries)
    section("closing", day.closing)
    return "".join(out)


def _day_section(day: DayReport) -> str:
    summary = "\n".join(day_summary(day))
    counts = "".join(
        f'<tr><td>{_e(code)}</td><td class="{_e(sev)}">{_e(sev)}</td><td class="num">{n}</td>'
        '</tr>' for code, sev, n in day.by_code())
    charts = [("Deviations over the day", _deviation_chart(day)),
              ("Cut card positions (cards behind it) against the window; hollow: placed, "
               "filled: came out", _cut_card_chart(day)),
              ("Cards per shoe", _cards_chart(day))]
    chart_html = "".join(f'<div class="chart"><p>{_e(t)}</p>{svg}</div>'
                         for t, svg in charts if svg)
    return (f'<section><h2>{_e(day.title)}</h2><pre>{_e(summary)}</pre>'
            f'<div class="charts">{chart_html}</div>'
            f'<h3>Deviations by code</h3>'
            + (f'<table class="sortable"><thead><tr><th>code</th><th>severity</th><th>count</th>'
               f'</tr></thead><tbody>{counts}</tbody></table>' if counts else "<p>None.</p>")
            + f'<h3>Deviations (click a heading to sort)</h3>{_deviation_table(day)}'
            f'<h3>Timeline</h3>{_timeline(day)}</section>')


def render_html(report: Report, rounds: list[tuple[DayReport, RoundInfo]] | None = None) -> str:
    """The whole report as one HTML document (UTF-8 text)."""
    files = ", ".join(os.path.basename(f) for f in report.files)
    body = [f"<h1>shoewarden audit report</h1><p>Logs: {_e(files)}</p>"]
    if report.verdict:  # the chain's verdict first
        cls = "ok" if report.verified else "critical"
        body.append(f'<pre class="verdict {cls}">{_e(chr(10).join(report.verdict))}</pre>')
    for note in report.notes:
        body.append(f'<p class="note">{_e(note)}</p>')
    if rounds:
        for day, r in rounds:
            body.append(f"<section><h2>Round {r.round}: {_e(day.title)}</h2>"
                        f"<pre>{_e(chr(10).join(round_lines(day, r)))}</pre></section>")
    for day in report.days:
        body.append(_day_section(day))
    if not report.days:
        body.append("<p>No table day in the log(s).</p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>shoewarden audit report: {_e(files)}</title><style>{_STYLE}</style></head>"
            f"<body>{''.join(body)}<script>{_SCRIPT}</script></body></html>\n")
