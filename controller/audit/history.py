"""The sabot history of a table, read from the logs of earlier days (001 §3, SABOT_ROTATION).

The engine reads no files; the runtime gives it the history as the session
setting ``sabot_history`` (recorded in the log header, so replay decides the
same)::

    settings.update(history_settings(root, "BJ-3", today))
    # {"sabot_history": {"BJ-3": [{"date": "2026-11-18", "sabot": "S-07"}, …]},
    #  "sabot_rotation_k": 3}

Openings are the ``table_open`` input records; their date is the event's
``t`` (else the log file's date, else the record's ``ts``).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller import jsontext
from controller.audit.files import parse_log_name, table_files

DEFAULT_K = 3
_MARK = b'"type":"table_open"'


@dataclass(frozen=True, order=True)
class Opening:
    date: str  # YYYY-MM-DD ("" when unknown)
    seq: int
    table: str
    sabot: str | None
    file: str
    line: int

    def to_history(self) -> dict[str, Any]:
        return {"date": self.date or None, "sabot": self.sabot}


def utc_date(text: str) -> str | None:
    """The UTC date (YYYY-MM-DD) of an ISO-8601 time, or None if it is not one.

    The same reading as ``controller.events.parse_time`` (naive = UTC); kept here in the
    standard library because this module is part of the engine-free audit core.
    """
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is not None:
        when = when.astimezone(dt.UTC)
    return when.date().isoformat()


def _date_of(event: dict[str, Any], record: dict[str, Any], path: Path) -> str:
    t = event.get("t")
    if isinstance(t, str) and len(t) >= 10:
        date = utc_date(t)
        if date is not None:
            return date
    parsed = parse_log_name(path.name)
    if parsed is not None:
        return parsed.date.isoformat()
    ts = record.get("ts")
    return ts[:10] if isinstance(ts, str) else ""


def openings_in(paths: Iterable[str | os.PathLike[str]]) -> list[Opening]:
    """Every ``table_open`` input in the given log files (unreadable lines are skipped)."""
    out: list[Opening] = []
    for raw_path in paths:
        path = Path(raw_path)
        try:
            with open(path, "rb") as f:
                for n, raw in enumerate(f, start=1):
                    if _MARK not in raw or not raw.endswith(b"\n"):
                        continue
                    try:
                        record = jsontext.loads(raw)
                    except ValueError:
                        continue
                    event = record.get("event") if isinstance(record, dict) else None
                    if record.get("kind") != "input" or not isinstance(event, dict) \
                            or event.get("type") != "table_open":
                        continue
                    table = event.get("table")
                    sabot = event.get("sabot")
                    seq = record.get("seq") if type(record.get("seq")) is int else 0
                    out.append(Opening(_date_of(event, record, path), seq, str(table),
                                       None if sabot is None else str(sabot), str(path), n))
        except OSError:
            continue
    return out


def placements(history: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Openings as placements of a sabot: a table reopened the same day with the sabot it
    had is the same placement, counted once (001 §3 is about where sabots are put)."""
    return placement_counts(history)[0]


def placement_counts(history: Iterable[dict[str, Any]]
                     ) -> tuple[list[dict[str, Any]], list[int]]:
    """:func:`placements`, and after each opening (from none) how many placements the
    openings so far make: each opening only joins the last placement or starts one, so
    the placements of the first ``i`` openings are the first ``counts[i]`` of all."""
    out: list[dict[str, Any]] = []
    counts = [0]
    for h in history:
        if not (out and h["date"] is not None and out[-1] == h):
            out.append(h)
        counts.append(len(out))
    return out, counts


def history_for(openings: Iterable[Opening], table: str, before: str,
                k: int = DEFAULT_K) -> list[dict[str, Any]]:
    """The table's last ``k`` placements (:func:`placements`) dated before ``before``
    (YYYY-MM-DD), oldest first."""
    rows = sorted(o for o in openings if o.table == table and o.date and o.date < before)
    return placements(o.to_history() for o in rows)[-k:]


def sabot_history(root: str | os.PathLike[str], table: str, before: dt.date,
                  k: int = DEFAULT_K) -> list[dict[str, Any]]:
    """The table's last ``k`` openings before ``before``, from its logs under ``root``."""
    return history_for(openings_in(table_files(root, table)), table, before.isoformat(), k)


def history_settings(root: str | os.PathLike[str], table: str, date: dt.date,
                     k: int = DEFAULT_K) -> dict[str, Any]:
    """The session settings that give the engine the sabot history for ``date``."""
    return {"sabot_history": {table: sabot_history(root, table, date, k)},
            "sabot_rotation_k": k}
