"""Reports from audit logs: per table and day, a timeline per shoe, a disputed round laid out.

:func:`build_report` reads the logs and re-runs the engine beside them (as a
replay does) so that figures the log implies but does not spell out — the
measured position of the cut card, which shoe a step belongs to — come from
the same engine that made the decisions. Everything else comes from the
logged records: deviations, round notes, device faults, dealer changes.

- :func:`render_text` — the text report (``shoewarden audit report``);
- :func:`render_round` — the hand reconstruction of one round (``--round N``);
- :mod:`controller.audit.report_html` — the same as one self-contained HTML file.

Times are the events' ``t`` where they have one, else the record's ``ts``.

Sabot rotation (001 §3): the sabot at each opening is compared with the
table's last K openings found in the logs of earlier days (the directories of
the logs, or ``log_dirs``). A repeat the live engine did not flag (it had no
history) is added as ``SABOT_ROTATION`` with source ``report``.

The package: :mod:`.model` (what a report holds), :mod:`.timeline` (log records → a
day's timeline, shoes, rounds, deviations), :mod:`.build` (reading the logs, the chain's
verdict, the sabot history), :mod:`.text` and :mod:`.rounds` (the text report and one
round laid out), :mod:`.html` (the HTML file).
"""

from controller.audit.report.build import build_report
from controller.audit.report.model import (
    SEVERITIES,
    CardRow,
    DayReport,
    DevRow,
    Entry,
    Report,
    RoundInfo,
    ShoeInfo,
    clock,
)
from controller.audit.report.rounds import render_round, round_lines
from controller.audit.report.text import day_summary, entry_text, render_text, timeline_lines

__all__ = [
    "SEVERITIES", "CardRow", "DayReport", "DevRow", "Entry", "Report", "RoundInfo", "ShoeInfo",
    "build_report", "clock", "day_summary", "entry_text", "render_round", "render_text",
    "round_lines", "timeline_lines",
]
