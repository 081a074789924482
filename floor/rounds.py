"""The hand look-up for disputes: a round laid out exactly as ``audit report --round`` does.

The floor feeds the table's indexed records of the day to the audit report's own builder
(:class:`controller.audit.report.timeline.DayBuilder`) and lays the rounds out with its
:func:`~controller.audit.report.rounds.round_lines`: one way to reconstruct a hand, the
same on the floor as in the auditor's report. (The builder re-runs the engine on the
records as a replay does; the floor's live state never does.)
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import orjson

from controller.audit.files import parse_log_name
from controller.audit.records import LogRecord
from controller.audit.report.model import list_at
from controller.audit.report.rounds import round_lines
from controller.audit.report.timeline import DayBuilder
from floor.core import file_order

if TYPE_CHECKING:
    from floor.core import Floor
    from floor.views import Disclosure


class RoundLookupError(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _number(name: str, text: str | None) -> int | None:
    if text in (None, ""):
        return None
    try:
        value = int(str(text))
    except ValueError:
        raise RoundLookupError(f"{name}: a whole number (got {text!r})") from None
    if value < 0:
        raise RoundLookupError(f"{name}: at least 0 (got {value})")
    return value


def lookup_rounds(floor: Floor, table: str, *, day: str | None, shoe: str | None,
                  round_: str | None, disclosure: Disclosure) -> list[dict[str, Any]]:
    """The rounds of ``table`` on ``day`` (default: its latest) matching shoe and round."""
    want_shoe, want_round = _number("shoe", shoe), _number("round", round_)
    if day:
        try:
            date = dt.date.fromisoformat(day)
        except ValueError:
            raise RoundLookupError(f"day: YYYY-MM-DD (got {day!r})") from None
    if table not in floor.tables:  # another floor process took its records in
        floor.catch_up(table)
    with floor.lock:
        watch = floor.tables.get(table)
        if watch is None:
            raise RoundLookupError(f"no table {table!r} on this floor", 404)
        files = sorted(watch.files.values(), key=lambda p: file_order(p.file))
        current_shoe, shoe_over = watch.state.shoe, watch.state.state in (
            "shoe_complete", "closing_check", "closed", "shuffle")
    dated = [(parse_log_name(p.file), p) for p in files]
    if not dated:
        return []
    if not day:
        date = max(n.date for n, _ in dated if n is not None)
    names = [p for n, p in dated if n is not None and n.date == date]
    builder = DayBuilder()
    for pos in names:
        for line_no, (_, line) in enumerate(floor.store.records(table, [pos.file]), start=1):
            builder.feed(LogRecord(pos.path, line_no, orjson.loads(line)))
    builder.flush_early()
    out = []
    latest = names[-1].file if names else None
    for report_day in builder.order:
        for r in report_day.rounds:
            if want_shoe is not None and r.shoe != want_shoe:
                continue
            if want_round is not None and r.round != want_round:
                continue
            if (disclosure == "shoe" and r.shoe == current_shoe and not shoe_over
                    and latest is not None):
                raise RoundLookupError(
                    f"round {r.round} of shoe {r.shoe}: this floor shows a shoe's cards only "
                    "after the shoe ends (disclosure: shoe)", 403)
            if disclosure == "round" and r.end is None and r.shoe == current_shoe:
                raise RoundLookupError(f"round {r.round} has not ended (disclosure: round)",
                                       403)
            data = r.data or {}
            times = r.inputs if len(r.inputs) == len(list_at(data, "cards")) else []
            cards = [{"card": c.get("card"), "to": c.get("to"), "why": c.get("why"),
                      "time": times[i].time if times else None,
                      "seq": times[i].seq if times else None}
                     for i, c in enumerate(list_at(data, "cards"))]
            out.append({"day": report_day.date, "table": report_day.table, "shoe": r.shoe,
                        "round": r.round, "start": r.start, "end": r.end, "bets": r.bets,
                        "cards": cards, "result": data, "text": r.note_text,
                        "deviations": [{"seq": d.seq, "code": d.code, "severity": d.severity,
                                        "message": d.message} for d in r.deviations],
                        "layout": round_lines(report_day, r)})
    return out
