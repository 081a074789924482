"""Building a report: read the logs, state the chain's verdict, check the sabot rotation.

:func:`build_report` verifies the files first (a report on a log that does not verify
says so before anything it reads from it), feeds every record to the
:class:`~controller.audit.report.timeline.DayBuilder`, then compares the sabot at each
opening with the table's last K openings in the logs of earlier days (001 §3): a repeat
the live engine did not flag (it had no history) is added as ``SABOT_ROTATION`` with
source ``report``.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from controller.audit.anchors import Anchor
from controller.audit.history import Opening, openings_in, placement_counts, placements
from controller.audit.records import LogReader, Meter
from controller.audit.report.model import DayReport, DevRow, Entry, Report
from controller.audit.report.timeline import DayBuilder
from controller.audit.sets import verify_set
from controller.deviations import CATALOG


def _history_files(paths: Sequence[str], log_dirs: Sequence[str] | None) -> list[Path]:
    dirs = [Path(d) for d in log_dirs] if log_dirs else sorted({Path(p).parent for p in paths})
    given = {os.path.realpath(p) for p in paths}
    out = []
    for d in dirs:
        if not d.is_dir():
            continue
        for candidate in sorted(d.glob("*.jsonl")) + sorted(d.glob("*/*.jsonl")):
            if os.path.realpath(candidate) not in given:
                out.append(candidate)
    return out


class _TableOpenings:
    """One table's openings (sorted), indexed so that the history before any opening is a
    look-up: the placements of its dated openings and of each day's, with their counts
    after each (:func:`~controller.audit.history.placement_counts`). Rescanning every
    opening for each made a report of 1,000 openings take 10 s, and of 4,000 three minutes
    (a review)."""

    def __init__(self, rows: list[Opening]) -> None:
        dated = [o for o in rows if o.date]
        self.dates = [o.date for o in dated]
        self.dated, self.dated_counts = placement_counts(o.to_history() for o in dated)
        by_day: dict[str, list[Opening]] = {}
        for o in rows:
            by_day.setdefault(o.date, []).append(o)
        self.days = {date: ([o.seq for o in day], *placement_counts(o.to_history()
                                                                   for o in day))
                     for date, day in by_day.items()}

    def before(self, date: str, seq: int, k: int
               ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """The table's last ``k`` placements before the opening at (``date``, ``seq``):
        those of earlier days (:func:`~controller.audit.history.history_for`), then the
        same day's earlier openings; and the last of those same-day openings, if any."""
        i = bisect_left(self.dates, date) if date else 0  # (dated before ``date``)
        c = self.dated_counts[i]
        seqs, today, counts = self.days.get(date, ([], [], [0]))
        t = counts[bisect_left(seqs, seq)]
        history = placements([*self.dated[max(0, c - k):c], *today[max(0, t - k):t]])
        return history[-k:], (today[t - 1] if t else None)


def _sabot_rotation(days: list[DayReport], openings: list[Opening]) -> None:
    tables: dict[str, list[Opening]] = {}
    # (by date and seq, then where it was read: an opening's sabot may be None, which no
    # sort compares with a name)
    for o in sorted(openings, key=lambda o: (o.date, o.seq, o.file, o.line)):
        tables.setdefault(o.table, []).append(o)
    index = {table: _TableOpenings(rows) for table, rows in tables.items()}
    for day in days:
        for time, sabot, seq in day.openings:
            if sabot is None or not day.table:
                continue
            table = index.get(day.table)
            last, today = table.before(day.date, seq or 0, day.sabot_k) if table \
                else ([], None)
            if today is not None and today["sabot"] == sabot:
                continue  # reopened the same day with its sabot: the same placement
            if len(last) < day.sabot_k or any(h["sabot"] != sabot for h in last):
                continue
            if any(d.code == "SABOT_ROTATION" and d.time == time for d in day.deviations):
                continue  # the live engine had the history and flagged it
            spec = CATALOG["SABOT_ROTATION"]
            dates = [h["date"] for h in last]
            day.deviations.append(DevRow(
                seq, time, "SABOT_ROTATION", str(spec.severity),
                f"sabot {sabot} is on table {day.table} again: it was placed there at the "
                f"table's last {day.sabot_k} openings ({', '.join(str(d) for d in dates)}); "
                "sabots must not go to the same table systematically (001 §3)",
                day.rule, 0, 0, source="report",
                evidence={"sabot": sabot, "table": day.table, "openings": dates,
                          "k": day.sabot_k}))
            day.opening.append(Entry(time, seq, "SABOT_ROTATION",
                                     f"sabot {sabot} at the last {day.sabot_k} openings too "
                                     "(found by the report)", severity=str(spec.severity)))


def build_report(paths: Iterable[str | os.PathLike[str]], *,
                 log_dirs: Sequence[str] | None = None, key: bytes | None = None,
                 anchors: Sequence[Anchor] | None = None,
                 meter: Meter | None = None) -> Report:
    """Read the logs (in order) and build the report; raises on unreadable logs.

    Raises :class:`~controller.audit.records.LogReadError` or
    :class:`~controller.audit.replay.ReplayError`.
    """
    files = [os.fspath(p) for p in paths]
    checked = verify_set(files, key=key, anchors=anchors, partial=True, meter=meter)
    builder = DayBuilder()
    reader = LogReader(files, meter=meter)
    for rec in reader:
        builder.feed(rec)
    builder.replayer.finish()
    builder.flush_early()
    notes = [f"{path}: line {line}: torn last line ignored" for path, line in reader.torn]
    if builder.replayer.differences:
        notes.append(f"{len(builder.replayer.differences)} difference(s) between the log and "
                     "a replay (run 'shoewarden audit replay'); figures from the replay may "
                     "not match the log")
    openings = openings_in(files) + openings_in(_history_files(files, log_dirs))
    _sabot_rotation(builder.order, openings)
    for day in builder.order:
        day.deviations.sort(key=lambda d: (d.time, d.seq or 0))
    verdict = [f"chain: {'verified' if checked.ok else 'DOES NOT VERIFY'}"
               + ("" if checked.ok else ": this report reads a log that was altered or "
                  "damaged; what follows may not be what happened")]
    verdict += [f"  {line}" for line in checked.lines()]
    verdict += [f"  unreadable: {u}" for u in checked.unreadable]
    for file, line, why in builder.seed_reveals:  # (a bench day's: the cards follow from it)
        verdict.append(f"seed: {file}: line {line}: the bench seed revealed matches the "
                       "header's commitment" if why is None else
                       f"seed: DOES NOT MATCH: {file}: line {line}: {why}: this day was not "
                       "dealt from the seed it claims, or its log was altered")
    seeds_ok = all(why is None for _, _, why in builder.seed_reveals)
    return Report(builder.order, files, notes, checked.ok and seeds_ok, verdict,
                  differences=list(builder.replayer.differences))
