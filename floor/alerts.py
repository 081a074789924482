"""Alerts: what the floor asks a person to look at, until someone acknowledges it.

An alert is a table's deviation of severity warning or critical, or something the floor
itself found in a table's log: a broken chain, a rewritten or cut record, a new chain, a
table gone silent while open. Each is keyed by (table, file, seq, code), so reading the
same record twice — after a restart — can never make a second alert.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class AlertStatus(StrEnum):
    OPEN = "open"
    ACKED = "acked"
    ALL = "all"


#: the deviation severities that become alerts (info stays in the log and on the page)
ALERTING = frozenset({"warning", "critical"})

# The floor's own codes (a table's deviations keep theirs, docs/deviations.md).
CHAIN_BREAK = "CHAIN_BREAK"  # the table's hash chain does not verify at this record
LOG_REWRITTEN = "LOG_REWRITTEN"  # records the floor had read changed or vanished since
CHAIN_NEW = "CHAIN_NEW"  # a new chain started with a recorded reason (the old one broke)
TABLE_SILENT = "TABLE_SILENT"  # an open table wrote nothing for too long
CHAIN_REPAIRED = "CHAIN_REPAIRED"  # a broken file's true records taken in from the log
FLOOR_RULE = "docs/floor.md"

SEVERITY_ORDER = {"critical": 2, "warning": 1, "info": 0}


@dataclass
class Alert:
    """One alert; ``id`` is the floor's, stable across restarts (the SQLite row id)."""

    id: int
    table: str
    file: str
    seq: int
    code: str
    severity: str
    message: str
    rule: str
    ts: str
    acked_by: str | None = None
    acked_at: str | None = None
    note: str | None = None

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.table, self.file, self.seq, self.code)

    @property
    def is_open(self) -> bool:
        return self.acked_by is None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["status"] = AlertStatus.OPEN if self.is_open else AlertStatus.ACKED
        return out


@dataclass(frozen=True)
class AlertDraft:
    """An alert before the index gave it its id."""

    table: str
    file: str
    seq: int
    code: str
    severity: str
    message: str
    rule: str
    ts: str


def from_deviation(table: str, row: dict[str, Any]) -> AlertDraft | None:
    """The alert a deviation row (:meth:`TableState.feed`) makes, or None for an info one."""
    severity = row.get("severity")
    if severity not in ALERTING:
        return None
    return AlertDraft(table, str(row.get("file")), int(row.get("seq") or 0),
                      str(row.get("code")), str(severity), str(row.get("message")),
                      str(row.get("rule")), str(row.get("ts") or ""))


def worst(alerts: list[Alert]) -> str | None:
    """The worst severity among ``alerts`` (the colour of a table's tile), None if none."""
    best = None
    for a in alerts:
        if best is None or SEVERITY_ORDER.get(a.severity, 0) > SEVERITY_ORDER.get(best, 0):
            best = a.severity
    return best
