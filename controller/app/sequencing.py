"""Putting the bench's inputs in step order: the dealer console's lines and what the
drivers make from the simulated devices' messages (docs/devices.md, "The console channel").

The simulator writes each console line with, per device, how many of that device's
counted events must come before it; the controller's side of that guarantee lives here,
beside the engine's other inputs, not in the simulator that only writes the lines.
Pure logic: no I/O, no clock, no threads (the runtime's engine thread drives it).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from controller.events import Event, EventError, attach

T = TypeVar("T")


def merge_dicts(event: Any, fields: Mapping[str, Any]) -> Any:
    """The merger's default ``attach`` for events that are JSON objects (tests, a client
    that maps frames to dicts itself)."""
    return {**event, **fields}


class ConsoleMerger(Generic[T]):
    """The reader's side of the console ordering guarantee (for the bench).

    Give it every console line (:meth:`console_line`) and every input event a driver made
    (:meth:`device_event`, in the order the driver made them); :meth:`ready` returns the
    input events in step order:

    - an event a driver made from a device message (docs/protocol.md "From messages to
      input events": a card, an unreadable card's fault, a deck check, a jam, …) is
      ``counted``; link-health events (silence, no ACK, lost frames, a disconnect, and their
      ``device_ok``) are not: they are passed on at once, where they happen;
    - a console line is released once, for every device ``d``, ``after[d]`` counted events
      of ``d`` were released; its ``event`` follows them;
    - a device line's ``attach`` fields (what the wire does not carry: ``t``, a stud card's
      ``to``, a new pack's ``deck_lots``) are added to that device's event number
      ``after[device]`` (the step's own message, always its last), by ``attach(event,
      fields)``: a dict merge by default; the bench's sequencer keeps its events typed.

    Device events are whatever the caller gives (``T``); a console line's ``event`` is
    released as the JSON object it is.
    """

    def __init__(self, attach: Callable[[T, Mapping[str, Any]], T] = merge_dicts) -> None:
        self._attach = attach
        self._lines: deque[dict[str, Any]] = deque()
        self._queues: dict[str, deque[T]] = {}
        self._released: Counter[str] = Counter()
        self._out: list[T | dict[str, Any]] = []
        self._abandoned: set[str] = set()
        self.ended = False

    def console_line(self, line: dict[str, Any]) -> None:
        self._lines.append(line)

    def device_event(self, device: str, event: T, counted: bool = True) -> None:
        if counted and device not in self._abandoned:
            self._queues.setdefault(device, deque()).append(event)
        else:
            self._out.append(event)

    def abandon(self, device: str) -> None:
        """Stop waiting for ``device`` (refused for its identity, or gone for good): its
        counted events are taken as given; any that still come are passed on at once."""
        self._abandoned.add(device)
        for ev in self._queues.pop(device, ()):
            self._out.append(ev)

    def waiting_for(self) -> dict[str, int]:
        """Counted events still needed, per device, before the next line can go."""
        if not self._lines:
            return {}
        need = self._need(self._lines[0])
        return {d: n - self._released[d] - len(self._queues.get(d, ()))
                for d, n in need.items() if n > self._released[d] + len(self._queues.get(d, ()))}

    def _need(self, line: dict[str, Any]) -> dict[str, int]:
        return {d: n for d, n in line.get("after", {}).items() if d not in self._abandoned}

    def ready(self) -> list[T | dict[str, Any]]:
        while self._lines:
            line = self._lines[0]
            need = self._need(line)
            if any(self._released[d] + len(self._queues.get(d, ())) < n for d, n in need.items()):
                break
            self._lines.popleft()
            for d, n in need.items():
                q = self._queues.get(d)
                while self._released[d] < n and q:
                    ev = q.popleft()
                    self._released[d] += 1
                    if self._released[d] == n and line.get("device") == d and line.get("attach"):
                        ev = self._attach(ev, line["attach"])
                    self._out.append(ev)
            if "event" in line:
                self._out.append(line["event"])
            if line.get("end"):
                self.ended = True
        out, self._out = self._out, []
        return out


@dataclass(slots=True)
class _Held:
    """A driver's event while the merger holds it: ``live`` if it is fed at once, unnumbered;
    ``fields`` what its console line attaches (applied, typed, on release)."""

    event: Event
    live: bool
    fields: Mapping[str, Any] | None = None


def _hold_fields(held: _Held, fields: Mapping[str, Any]) -> _Held:
    held.fields = fields
    return held


class BenchSequencer:
    """The :class:`ConsoleMerger`, with the bench's numbering, clock and resume.

    Scripted events (what the merger releases for the day's lines and counted device
    messages) are numbered 1, 2, … in release order: the ``line`` they are logged with.
    The first ``skip`` are not fed (already in the log). Events the script does not know
    (``counted=False``, or from an abandoned device) are fed at once, without a number.

    A driver's event stays the typed event it made: on release it gets the dealer's clock
    (``t``: its console line's, else the last one seen; the driver's wall clock is not the
    day's) and its line's other attached fields, by :func:`dataclasses.replace`
    (:func:`controller.events.attach`). Only the console's own ``event`` objects are JSON,
    parsed once where they are fed.
    """

    def __init__(self, skip: int = 0, start_t: str | None = None) -> None:
        self.merger: ConsoleMerger[_Held] = ConsoleMerger(_hold_fields)
        self.skip = skip
        self.ordinal = 0
        self.last_t: str | None = start_t  # the dealer's clock (before the first step: start_t)
        self.cards: dict[str, list[str]] | None = None
        self._abandoned: set[str] = set()

    @property
    def ended(self) -> bool:
        return self.merger.ended

    def console_line(self, line: dict[str, Any]) -> None:
        if line.get("end"):
            cards = line.get("cards")
            self.cards = dict(cards) if isinstance(cards, dict) else {}
        self.merger.console_line(line)

    def device_event(self, device: str, event: Event, counted: bool = True) -> None:
        live = not counted or device in self._abandoned
        self.merger.device_event(device, _Held(event, live), counted)

    def abandon(self, device: str) -> None:
        self._abandoned.add(device)
        self.merger.abandon(device)

    def waiting_for(self) -> dict[str, int]:
        return self.merger.waiting_for()

    def _on_the_dealers_clock(self, held: _Held) -> Event | dict[str, Any]:
        fields = held.fields
        if fields is None:
            return held.event if held.event.t == self.last_t else replace(held.event,
                                                                          t=self.last_t)
        if "t" in fields:
            self.last_t = fields["t"]
        try:
            return attach(held.event, {**fields, "t": self.last_t})
        except EventError:
            # no event of its type with these fields: handed on as the JSON object it makes,
            # which the runtime refuses and counts like any bad input
            record = {k: v for k, v in held.event.to_record().items() if k != "t"}
            record.update(fields)
            if "t" not in fields and self.last_t is not None:
                record["t"] = self.last_t
            return record

    def ready(self) -> list[tuple[Event | dict[str, Any], int | None]]:
        out: list[tuple[Event | dict[str, Any], int | None]] = []
        for item in self.merger.ready():
            live = False
            ev: Event | dict[str, Any]
            if isinstance(item, _Held):
                live = item.live
                ev = self._on_the_dealers_clock(item)
            else:  # a console line's event: JSON, parsed where it is fed
                ev = item
                if "t" in ev:
                    self.last_t = ev["t"]
                elif self.last_t is not None:
                    ev["t"] = self.last_t
            if live:
                out.append((ev, None))
                continue
            self.ordinal += 1
            if self.ordinal > self.skip:
                out.append((ev, self.ordinal))
        return out
