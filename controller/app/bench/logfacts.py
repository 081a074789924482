"""What a bench's audit log says: its cards, deviations, faults, reconnects and scripted inputs.

The summary and the card check are the log's, not the memory's: they are read back from
the file once the run is over. A resumed run reads the same facts to know how far the
day got (the highest scripted ``line``).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from controller.audit.records import LogReader, LogReadError


@dataclass
class LogFacts:
    """What the finished audit log says (the summary is the log's, not the memory's)."""

    cards: list[str] = field(default_factory=list)  # the dealing device's cards, "??" unread
    deviations: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    reconnects: Counter[str] = field(default_factory=Counter)
    protocol_errors: Counter[str] = field(default_factory=Counter)
    recoveries: int = 0
    scripted: list[int] = field(default_factory=list)  # the `line` of each scripted input
    inputs: int = 0


def read_log_facts(path: Path, dealer: str) -> LogFacts:
    facts = LogFacts()
    seen: set[str] = set()
    for rec in LogReader([path]):
        r = rec.record
        if rec.kind == "recovery":
            facts.recoveries += 1
            seen.clear()
        elif rec.kind == "input":
            facts.inputs += 1
            ev = r.get("event") or {}
            kind = ev.get("type")
            if isinstance(r.get("line"), int):
                facts.scripted.append(r["line"])
            if kind == "card":
                facts.cards.append(cast(str, ev.get("card")))
            elif kind == "device_fault":
                facts.faults[f"{ev.get('device')}:{ev.get('code')}"] += 1
                if ev.get("code") == "UNREADABLE_CARD" and ev.get("device") == dealer:
                    facts.cards.append("??")
            elif kind == "device_connected":
                dev = str(ev.get("device"))
                if dev in seen:
                    facts.reconnects[dev] += 1
                seen.add(dev)
            elif kind == "device_diagnostic" and ev.get("code") == "PROTOCOL_ERROR":
                facts.protocol_errors[f"{ev.get('device')} {ev.get('kind')}"] += ev.get(
                    "count") or 1
        elif rec.kind == "output":
            out = r.get("output") or {}
            if out.get("type") == "deviation":
                facts.deviations[str(out.get("code"))] += 1
    return facts


def first_header(path: Path) -> dict[str, Any] | None:
    with contextlib.suppress(LogReadError):
        for rec in LogReader([path]):
            if rec.kind == "header":
                return rec.record
    return None
