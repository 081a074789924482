"""A table session: the engine, its audit log, and the running tally a summary needs.

The session is the one place where inputs meet the log. It writes each input
event *before* handing it to the engine (write-ahead: with the default
durability policy the input is fsynced before any effect can be shown), then
writes every output the engine returned. ``shoewarden check`` and, later,
``shoewarden run`` and ``bench`` all go through :meth:`TableSession.feed`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from controller import __version__
from controller.audit import AuditLog
from controller.deviations import Deviation, Severity
from controller.engine import TableEngine
from controller.events import ANCHOR_WRITE_FAILED, AUDIT_DEVICE, CardDrawn, DeviceDiagnostic, Event
from controller.outputs import Note, Output
from controller.profiles import Profile

SOFTWARE = {"name": "shoewarden", "version": __version__}


@dataclass
class Tally:
    """Counts for the end-of-run summary."""

    events: int = 0
    cards: int = 0
    rounds: int = 0
    shoes: int = 0
    deviations: Counter[str] = field(default_factory=Counter)
    severities: Counter[str] = field(default_factory=Counter)

    @property
    def worst(self) -> Severity | None:
        for sev in (Severity.CRITICAL, Severity.WARNING, Severity.INFO):
            if self.severities[sev]:
                return sev
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "events": self.events, "shoes": self.shoes, "rounds": self.rounds,
            "cards": self.cards, "deviations": dict(sorted(self.deviations.items())),
            "by_severity": {str(k): v for k, v in sorted(self.severities.items())},
        }


def engine_for(profile: Profile, settings: dict[str, Any] | None = None) -> TableEngine:
    """The engine a session with these settings runs (a replay builds it the same way).

    Settings that reach the engine: ``sabot_history`` and ``sabot_rotation_k``
    (SABOT_ROTATION, docs/deviations.md). They are in the log header, so a
    replay decides the same.
    """
    settings = settings or {}
    kw: dict[str, Any] = {}
    if settings.get("sabot_history") is not None:
        kw["sabot_history"] = settings["sabot_history"]
    if settings.get("sabot_rotation_k") is not None:
        kw["sabot_rotation_k"] = settings["sabot_rotation_k"]
    return TableEngine(profile, **kw)


class TableSession:
    """Feeds input events to one table's engine, logging every input ahead of its effects."""

    def __init__(self, profile: Profile, audit: AuditLog | None = None,
                 settings: dict[str, Any] | None = None) -> None:
        self.profile = profile
        self.engine = engine_for(profile, settings)
        self.audit = audit
        self.settings = dict(settings or {})
        self.tally = Tally()
        self._header_written = False

    def start(self, table: str | None = None) -> None:
        """Write the header: software, table, and the profile with every setting in force."""
        if self.audit is not None and not self._header_written:
            self.audit.header(software=SOFTWARE, table=table, profile=self.profile.to_dict(),
                              settings=self.settings)
        self._header_written = True

    def feed(self, event: Event, line: int | None = None) -> list[Output]:
        if not self._header_written:
            self.start(getattr(event, "table", None))
        audit = self.audit
        engine = self.engine
        if audit is not None:  # write-ahead: the input is in the log before its effects
            audit.input_event(event, line=line, context=engine.context_key())
        shoe_before = engine.shoe
        outputs = engine.handle(event)
        if audit is not None:
            audit.outputs(outputs, context=engine.context_key())
        self._count(event, outputs, shoe_before)
        if audit is not None:
            for trouble in audit.take_anchor_trouble():
                outputs += self.feed(DeviceDiagnostic(device=AUDIT_DEVICE, code=ANCHOR_WRITE_FAILED,
                                                  detail=trouble[:300], t=event.t))
        return outputs

    def _count(self, event: Event, outputs: list[Output], shoe_before: int) -> None:
        t = self.tally
        t.events += 1
        if isinstance(event, CardDrawn):
            t.cards += 1
        t.shoes += self.engine.shoe - shoe_before
        for o in outputs:
            if isinstance(o, Deviation):
                t.deviations[o.code] += 1
                t.severities[o.severity] += 1
            elif isinstance(o, Note) and o.kind == "round":
                t.rounds += 1

    def close(self) -> None:
        if self.audit is not None:
            if not self._header_written:  # no event came (every line bad): the log still
                self.start()  # says what wrote it, not an empty file that reads as wiped
            self.audit.close()
