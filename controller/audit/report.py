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
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.audit.anchors import Anchor
from controller.audit.history import DEFAULT_K, Opening, history_for, openings_in, utc_date
from controller.audit.records import LogReader, LogRecord, Meter
from controller.audit.replay import Replayer
from controller.audit.sets import verify_set
from controller.deviations import CATALOG
from controller.events import EventError, parse_time

SEVERITIES = ("critical", "warning", "info")

def _dict_at(obj: Any, key: str) -> dict[str, Any]:
    """``obj[key]`` when it is an object, else an empty one (a record read from a log)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def _list_at(obj: Any, key: str) -> list[Any]:
    """``obj[key]`` when it is an array, else an empty one (a record read from a log)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, list) else []



@dataclass
class Entry:
    """One line of a timeline."""

    time: str
    seq: int | None
    label: str
    detail: str = ""
    severity: str | None = None  # set for deviations
    end: str | None = None  # for grouped entries (rounds, burns)
    count: int = 0
    first: int | None = None
    last: int | None = None
    cards: int = 0


@dataclass
class DevRow:
    seq: int | None
    time: str
    code: str
    severity: str
    message: str
    rule: str
    shoe: int | None
    round: int | None
    source: str = "log"  # "log": decided live; "report": found by the report
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class CardRow:
    seq: int | None
    time: str
    card: str


@dataclass
class RoundInfo:
    round: int
    shoe: int
    seq: int | None
    start: str
    end: str | None = None
    bets: dict[str, Any] = field(default_factory=dict)
    inputs: list[CardRow] = field(default_factory=list)
    #: cards dealt into this round before its bets were closed (CARD_BEFORE_BETS_CLOSED):
    #: the engine files them before the round begins; the report lays them out with it
    early: list[CardRow] = field(default_factory=list)
    actions: list[tuple[str, str]] = field(default_factory=list)  # (time, action)
    note_text: str | None = None
    data: dict[str, Any] | None = None
    note_seq: int | None = None
    deviations: list[DevRow] = field(default_factory=list)


@dataclass
class ShoeInfo:
    shoe: int
    entries: list[Entry] = field(default_factory=list)
    rounds: int = 0
    cards: int = 0
    burns: int = 0
    cut_offset: int | None = None
    cut_card_placed: int | None = None
    cut_card_measured: int | None = None
    start: str | None = None
    end: str | None = None


@dataclass
class DayReport:
    table: str
    date: str
    directory: str = ""  # where its logs are (two tables may share an id)
    profile: str = "?"
    game: str = "?"
    window: tuple[int, int] | None = None
    decks: int | None = None
    sabot: str | None = None
    files: list[str] = field(default_factory=list)
    opened: str | None = None
    closed: str | None = None
    opening: list[Entry] = field(default_factory=list)
    closing: list[Entry] = field(default_factory=list)
    shoes: dict[int, ShoeInfo] = field(default_factory=dict)
    rounds: list[RoundInfo] = field(default_factory=list)
    deviations: list[DevRow] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    dealer_changes: list[dict[str, Any]] = field(default_factory=list)
    cards: int = 0
    burns: int = 0
    sabot_k: int = DEFAULT_K
    rule: str = ""  # the profile's own citation (rule of SABOT_ROTATION)
    openings: list[tuple[str, str | None, int | None]] = field(default_factory=list)

    @property
    def title(self) -> str:
        return f"table {self.table}, {self.date}"

    @property
    def cards_outside_rounds(self) -> int:
        return sum(1 for s in self.shoes.values() for e in s.entries if e.label == "card") + \
            sum(1 for e in self.opening + self.closing if e.label == "card")

    def shoe(self, n: int) -> ShoeInfo:
        if n not in self.shoes:
            self.shoes[n] = ShoeInfo(n)
        return self.shoes[n]

    def by_code(self) -> list[tuple[str, str, int]]:
        counts = Counter((d.code, d.severity) for d in self.deviations)
        order = {s: i for i, s in enumerate(SEVERITIES)}
        return sorted(((c, s, n) for (c, s), n in counts.items()),
                      key=lambda x: (order.get(x[1], 9), x[0]))

    def by_severity(self) -> dict[str, int]:
        counts = Counter(d.severity for d in self.deviations)
        return {s: counts[s] for s in SEVERITIES if counts[s]}


@dataclass
class Report:
    days: list[DayReport]
    files: list[str]
    notes: list[str] = field(default_factory=list)
    #: the chain's verdict (``audit verify`` over the same files), stated first: a report
    #: on a log that does not verify must say so before anything it reads from it
    verified: bool | None = None
    verdict: list[str] = field(default_factory=list)

    def find_round(self, n: int, table: str | None = None) -> list[tuple[DayReport, RoundInfo]]:
        return [(d, r) for d in self.days for r in d.rounds
                if r.round == n and (table is None or d.table == table)]


def _time_of(record: dict[str, Any], event: dict[str, Any] | None = None) -> str:
    if event is not None and isinstance(event.get("t"), str):
        return str(event["t"])
    return str(record.get("ts", ""))


def _date_of(time: str) -> str:
    return utc_date(time) or time[:10]


def clock(time: str | None) -> str:
    """An ISO time as ``YYYY-MM-DDTHH:MM:SSZ`` in UTC (the full text if it is not one).

    Always dated: a day that runs past midnight must not read "opened 10:00, closed
    09:10", and an auditor compares these with surveillance footage, to the second."""
    if not time:
        return "-"
    try:
        value = parse_time(time)
    except EventError:
        return time
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


class _Builder:
    def __init__(self) -> None:
        self.replayer = Replayer()
        self.days: dict[tuple[str, str, str], DayReport] = {}
        self.order: list[DayReport] = []
        self.day: DayReport | None = None
        self.round: RoundInfo | None = None
        self.time = ""
        self.header_table: str | None = None
        self.header_dir = ""
        #: the timeline entry of the rounds the current round belongs to (cards are counted
        #: there, whatever entries come between)
        self.rounds_entry: Entry | None = None
        #: cards dealt before bets closed, waiting for the round they were dealt into, and
        #: the deviations that flagged them
        self.early: list[CardRow] = []
        self.early_devs: list[DevRow] = []

    # ------------------------------------------------------------------ days and shoes

    def _start_day(self, table: str, date: str) -> DayReport:
        # the directory too: two tables with the same id (logs from two floors or casinos)
        # are two days, never one merged one
        key = (table, date, self.header_dir)
        day = self.days.get(key)
        if day is None:
            day = DayReport(table, date, directory=self.header_dir)
            self.days[key] = day
            self.order.append(day)
        session = self.replayer.session
        if session is not None:
            p = session.profile
            day.profile, day.game, day.rule = p.name, p.game, p.rule("")
            day.window = p.cut_card.window()
            k = session.settings.get("sabot_rotation_k")
            day.sabot_k = k if type(k) is int and k >= 1 else DEFAULT_K
        return day

    def _current_day(self, rec: LogRecord) -> DayReport:
        if self.day is None:
            # before the table opens, records name no table: the header's (a runtime's log
            # has device records first) if there is one
            table = rec.record.get("table") or self.header_table or "?"
            self.day = self._start_day(str(table), _date_of(self.time))
        return self.day

    def _timeline(self, day: DayReport, shoe: int | None, state: str | None) -> list[Entry]:
        if state == "closed" and day.opened:
            return day.closing
        if not shoe:
            return day.opening
        return day.shoe(shoe).entries

    # ------------------------------------------------------------------ records

    def feed(self, rec: LogRecord) -> None:
        kind = rec.kind
        r = rec.record
        if kind == "input":
            event = _dict_at(r, "event")
            self.time = _time_of(r, event)
            before = r.get("state")
            self.replayer.feed(rec)
            self._input(rec, event, before)
        elif kind == "output":
            self.replayer.feed(rec)
            out = _dict_at(r, "output")
            self._output(rec, out)
        else:
            self.replayer.feed(rec)
            if kind == "header":
                self.time = _time_of(r)
                self.header_table = r.get("table") if isinstance(r.get("table"), str) else None
                directory = os.path.dirname(os.path.realpath(rec.file))
                if directory != self.header_dir:
                    self.header_dir = directory
                    self.day = None  # another directory: another table, even with this id
            elif kind == "recovery":
                day = self._current_day(rec)
                cut = r.get("cut")
                what = "nothing cut" if not cut else f"torn line cut ({cut.get('bytes')} bytes)"
                self._timeline(day, r.get("shoe"), r.get("state")).append(
                    Entry(_time_of(r), r.get("seq"), "recovery",
                          f"{what}; {r.get('restored_outputs', 0)} output(s) restored"))

    def _engine(self) -> Any:
        session = self.replayer.session
        return None if session is None else session.engine

    def _input(self, rec: LogRecord, event: dict[str, Any], before: Any) -> None:
        engine = self._engine()
        etype = event.get("type")
        seq = rec.seq
        if etype == "table_open" and engine is not None:
            self.day = self._start_day(str(event.get("table")), _date_of(self.time))
            day = self.day
            day.decks = event.get("decks") if isinstance(event.get("decks"), int) else None
            day.sabot = event.get("sabot") if isinstance(event.get("sabot"), str) else None
            day.opened = day.opened or self.time
            day.openings.append((self.time, day.sabot, seq))
            if rec.file not in day.files:
                day.files.append(rec.file)
            sabot = f"sabot {day.sabot}, " if day.sabot else ""
            day.opening.append(Entry(self.time, seq, "open", f"{sabot}{day.decks} deck(s)"))
            return
        day = self._current_day(rec)
        if rec.file not in day.files:
            day.files.append(rec.file)
        shoe = engine.shoe if engine is not None else rec.record.get("shoe")
        state = engine.state if engine is not None else None
        timeline = self._timeline(day, shoe, state)
        info = day.shoe(shoe) if shoe else None
        if info is not None:
            info.start = info.start or self.time
            info.end = self.time
        if etype == "deck_check":
            cards = event.get("cards")
            n = len(cards) if isinstance(cards, list) else 0
            what = "closing check" if state == "closing_check" else "check"
            timeline.append(Entry(self.time, seq, what, f"{n} card(s) counted"))
        elif etype == "shuffle":
            timeline.append(Entry(self.time, seq, "reshuffle" if shoe and shoe > 1 else "shuffle"))
        elif etype == "cut":
            if info is not None:
                info.cut_offset = event.get("offset")
            timeline.append(Entry(self.time, seq, "cut", f"offset {event.get('offset')}"))
        elif etype == "cut_card_placed":
            behind = event.get("behind")
            if info is not None:
                info.cut_card_placed = behind
            timeline.append(Entry(self.time, seq, "cut card placed",
                                  f"{behind} card(s) behind it{self._window(day)}"
                                  if behind is not None else "position not declared"))
        elif etype == "shoe_loaded":
            timeline.append(Entry(self.time, seq, "loaded"))
        elif etype == "card":
            self._card(day, info, timeline, event, before, seq)
        elif etype == "cut_card":
            measured = None
            if engine is not None and engine.cut_card_out:
                measured = engine.accounting().in_shoe
            if info is not None and measured is not None:
                info.cut_card_measured = measured
            timeline.append(Entry(self.time, seq, "cut card out",
                                  f"{measured} card(s) behind it (measured){self._window(day)}"
                                  if measured is not None else ""))
        elif etype == "bets_closed":
            rnd = engine.round if engine is not None else rec.record.get("round")
            bets = {k: v for k, v in event.items() if k in ("boxes", "players")}
            self.round = RoundInfo(int(rnd or 0), int(shoe or 0), seq, self.time, bets=bets)
            day.rounds.append(self.round)
            if info is not None:
                info.rounds += 1
            last = timeline[-1] if timeline else None
            if last is not None and last.label == "rounds":
                last.count += 1
                last.last = self.round.round
                last.end = self.time
            else:
                last = Entry(self.time, seq, "rounds", count=1, first=self.round.round,
                             last=self.round.round, end=self.time)
                timeline.append(last)
            self.rounds_entry = last
            if self.early:  # dealt into this round before its bets closed
                self.round.early, self.early = self.early, []
                self.round.deviations += self.early_devs
                self.early_devs = []
                last.cards += len(self.round.early)
        elif etype == "action":
            if self.round is not None:
                self.round.actions.append((self.time, str(event.get("action"))))
        elif etype == "round_end":
            if self.round is not None:
                self.round.end = self.time
            if self.rounds_entry is not None:
                self.rounds_entry.end = self.time
        elif etype == "table_close":
            day.closed = self.time
            day.closing.append(Entry(self.time, seq, "close"))
        elif etype == "players_left":
            timeline.append(Entry(self.time, seq, "players left", "cards withdrawn"))

    def flush_early(self) -> None:
        """Cards dealt before bets closed that no round followed: still on the timeline."""
        if self.early and self.day is not None:
            for row in self.early:
                self.day.closing.append(Entry(row.time, row.seq, "card",
                                              f"{row.card} (before bets closed, no round "
                                              "followed)"))
            self.early = []

    def _window(self, day: DayReport) -> str:
        if day.window is None:
            return ""
        lo, hi = day.window
        return f" (rule {lo})" if lo == hi else f" (rule {lo}–{hi})"

    def _card(self, day: DayReport, info: ShoeInfo | None, timeline: list[Entry],
              event: dict[str, Any], before: Any, seq: int | None) -> None:
        day.cards += 1
        if info is not None:
            info.cards += 1
        if before == "burn":
            day.burns += 1
            if info is not None:
                info.burns += 1
            last = timeline[-1] if timeline else None
            if last is not None and last.label == "burn":
                last.count += 1
                last.end = self.time
            else:
                timeline.append(Entry(self.time, seq, "burn", count=1, end=self.time))
            return
        row = CardRow(seq, self.time, str(event.get("card")))
        if before in ("round", "last_round") and self.round is not None:
            self.round.inputs.append(row)
            if self.rounds_entry is not None:
                self.rounds_entry.cards += 1
        elif before == "ready":
            self.early.append(row)  # before bets closed: it belongs to the next round
        else:  # a card where none is dealt (a mistake): on the timeline, never uncounted
            timeline.append(Entry(self.time, seq, "card", f"{row.card} (outside a round)"))

    def _output(self, rec: LogRecord, out: dict[str, Any]) -> None:
        day = self._current_day(rec)
        r = rec.record
        otype = out.get("type")
        shoe, rnd, state = r.get("shoe"), r.get("round"), r.get("state")
        timeline = self._timeline(day, shoe, state)
        if otype == "deviation":
            row = DevRow(rec.seq, self.time, str(out.get("code")), str(out.get("severity")),
                         str(out.get("message")), str(out.get("rule")), shoe, rnd,
                         evidence=dict(out.get("evidence") or {}))
            day.deviations.append(row)
            if row.code == "CARD_BEFORE_BETS_CLOSED" and self.early:
                self.early_devs.append(row)  # laid out with the round the card went into
            elif self.round is not None and rnd == self.round.round and \
                    state in ("round", "last_round", "ready", "shoe_complete", "burn",
                              "return_discards"):
                self.round.deviations.append(row)
            timeline.append(Entry(self.time, rec.seq, row.code, row.message,
                                  severity=row.severity))
        elif otype == "note":
            self._note(day, timeline, rec, out)
        elif otype == "transition" and out.get("to") == "shoe_complete":
            timeline.append(Entry(self.time, rec.seq, "shoe complete", "reshuffle due"))

    def _note(self, day: DayReport, timeline: list[Entry], rec: LogRecord,
              out: dict[str, Any]) -> None:
        kind = out.get("kind")
        data = _dict_at(out, "data")
        text = str(out.get("text", ""))
        if kind == "round":
            n = data.get("round")
            for info in reversed(day.rounds):
                if info.round == n:
                    info.data, info.note_text, info.note_seq = data, text, rec.seq
                    break
        elif kind == "last_hand":
            timeline.append(Entry(self.time, rec.seq, "last hand", text))
        elif kind == "dealer_change":
            day.dealer_changes.append({"time": self.time, "seq": rec.seq,
                                       "dealer": data.get("dealer"),
                                       "previous": data.get("previous"),
                                       "burn": data.get("burn")})
            timeline.append(Entry(self.time, rec.seq, "dealer change", text))
        elif kind == "device_fault":
            day.faults.append({"time": self.time, "seq": rec.seq, "device": data.get("device"),
                               "code": data.get("code"), "text": text, "cleared": None})
            timeline.append(Entry(self.time, rec.seq, "device fault", text))
        elif kind == "device_ok":
            for fault in day.faults:
                if fault["cleared"] is None and (fault["device"], fault["code"]) == (
                        data.get("device"), data.get("code")):
                    fault["cleared"] = self.time
                    break
            timeline.append(Entry(self.time, rec.seq, "device ok", text))
        elif kind == "players_left":
            pass  # the input already made the entry
        elif kind == "burn_by_value" and timeline and timeline[-1].label == "burn":
            timeline[-1].detail = f"by value, {data.get('card')} drawn: {data.get('burn')}"
        elif kind in ("burn_by_value", "load_implied", "card_replaced", "lots_not_judged",
                      "consequence"):
            timeline.append(Entry(self.time, rec.seq, kind.replace("_", " "), text))


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


def _sabot_rotation(days: list[DayReport], openings: list[Opening]) -> None:
    for day in days:
        for time, sabot, seq in day.openings:
            if sabot is None or not day.table:
                continue
            earlier = [o for o in openings if o.table == day.table and o.date < day.date]
            same_day = [o for o in openings if o.table == day.table and o.date == day.date
                        and o.seq < (seq or 0)]
            history = history_for(earlier, day.table, day.date, day.sabot_k)
            history += [o.to_history() for o in sorted(same_day)]
            last = history[-day.sabot_k:]
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
    builder = _Builder()
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
    return Report(builder.order, files, notes, checked.ok, verdict)


# --------------------------------------------------------------------------- text


def entry_text(e: Entry) -> str:
    if e.label == "rounds":
        span = f"round {e.first}" if e.first == e.last else f"rounds {e.first}–{e.last}"
        return f"{span}: {e.count} round(s), {e.cards} card(s) dealt, until {clock(e.end)}"
    if e.label == "burn":
        return f"burn: {e.count} card(s)" + (f" ({e.detail})" if e.detail else "")
    if e.severity is not None:
        return f"! {e.label} [{e.severity}] {e.detail}"
    return f"{e.label}: {e.detail}" if e.detail else e.label


def day_summary(day: DayReport) -> list[str]:
    out = [f"== {day.title} (profile {day.profile}, {day.decks or '?'} deck(s)"
           + (f", sabot {day.sabot}" if day.sabot else "") + ")",
           f"  files: {', '.join(os.path.basename(f) for f in day.files)}"
           + (f" in {day.directory}" if day.directory else ""),
           f"  opened {clock(day.opened)}, closed {clock(day.closed) if day.closed else '-'}",
           f"  shoes {len(day.shoes)}, rounds {len(day.rounds)}, cards {day.cards} "
           f"(burned {day.burns}"
           + (f", {day.cards_outside_rounds} outside a round" if day.cards_outside_rounds
              else "") + ")"]
    if day.window is not None:
        lo, hi = day.window
        rule = f"{lo}" if lo == hi else f"{lo}–{hi}"
        rows = []
        for n, s in sorted(day.shoes.items()):
            placed = "-" if s.cut_card_placed is None else str(s.cut_card_placed)
            measured = "-" if s.cut_card_measured is None else str(s.cut_card_measured)
            flag = ""
            for value in (s.cut_card_placed, s.cut_card_measured):
                if value is not None and not lo <= value <= hi:
                    flag = "  OUTSIDE"
            rows.append(f"    shoe {n}: placed {placed}, came out {measured}{flag}")
        out.append(f"  cut card positions (cards behind it; rule {rule}):")
        out += rows or ["    none"]
    sev = day.by_severity()
    if day.deviations:
        out.append(f"  deviations: {len(day.deviations)} ("
                   + ", ".join(f"{s} {n}" for s, n in sev.items()) + ")")
        for code, severity, n in day.by_code():
            out.append(f"    {code} [{severity}]: {n}")
    else:
        out.append("  deviations: none")
    if day.faults:
        out.append(f"  device faults: {len(day.faults)}")
        for f in day.faults:
            cleared = f"cleared {clock(f['cleared'])}" if f["cleared"] else "NOT cleared"
            out.append(f"    {clock(f['time'])} {f['device']}: {f['code']} ({cleared})")
    else:
        out.append("  device faults: none")
    if day.dealer_changes:
        out.append(f"  dealer changes: {len(day.dealer_changes)}")
        for c in day.dealer_changes:
            prev = f" (after {c['previous']})" if c["previous"] else ""
            out.append(f"    {clock(c['time'])} dealer {c['dealer']}{prev}")
    else:
        out.append("  dealer changes: none")
    return out


def timeline_lines(day: DayReport) -> list[str]:
    out = ["  timeline:"]

    def section(name: str, entries: list[Entry]) -> None:
        if not entries:
            return
        out.append(f"    {name}")
        for e in entries:
            out.append(f"      {clock(e.time)}  {entry_text(e)}")

    section("opening", day.opening)
    for n, s in sorted(day.shoes.items()):
        head = (f"shoe {n}: {s.rounds} round(s), {s.cards} card(s), {s.burns} burned"
                + (f", cut at {s.cut_offset}" if s.cut_offset is not None else ""))
        section(head, s.entries)
    section("closing", day.closing)
    return out


def render_text(report: Report) -> str:
    out: list[str] = [*report.verdict, ""] if report.verdict else []
    for day in report.days:
        out += day_summary(day)
        out += timeline_lines(day)
        out.append("")
    for note in report.notes:
        out.append(f"note: {note}")
    if not report.days:
        out.append("no table day in the log(s)")
    return "\n".join(out).rstrip() + "\n"


# --------------------------------------------------------------------------- one round


def round_lines(day: DayReport, r: RoundInfo) -> list[str]:
    """The hand reconstruction of one round, from its round note and its inputs."""
    data = r.data or {}
    out = [f"== round {r.round}: {day.title}, shoe {r.shoe} (profile {day.profile}, "
           f"game {day.game})",
           f"  bets closed {clock(r.start)} (seq {r.seq})"
           + "".join(f", {k} {v}" for k, v in r.bets.items())
           + (f"; round ended {clock(r.end)}" if r.end else "; the round did not end")]
    cards = _list_at(data, "cards")
    times = r.inputs if len(r.inputs) == len(cards) else []
    if r.early:
        out.append("  dealt before bets closed (CARD_BEFORE_BETS_CLOSED):")
        for c in r.early:
            out.append(f"     -  {c.card:4}  {'':8}  {'early':9}  {clock(c.time):20}  {c.seq}")
    out.append("  cards in dealing order:")
    out.append("     #  card  to        why        time                  seq")
    for i, c in enumerate(cards, start=1):
        t = times[i - 1] if times else None
        out.append(f"    {i:2d}  {c.get('card', '?')!s:4}  {c.get('to', '')!s:8}  "
                   f"{c.get('why', '')!s:9}  {clock(t.time) if t else '':20}  "
                   f"{t.seq if t else ''}")
    if not cards and r.inputs:
        for i, c in enumerate(r.inputs, start=1):
            out.append(f"    {i:2d}  {c.card:4}  {'?':8}  {'':9}  {clock(c.time):20}  {c.seq}")
    elif cards and not times and r.inputs:
        out.append(f"  cards read (their times; {len(r.inputs)} read, {len(cards)} in the "
                   "round note):")
        for i, c in enumerate(r.inputs, start=1):
            out.append(f"    {i:2d}  {c.card:4}  {'':8}  {'':9}  {clock(c.time):20}  {c.seq}")
    if r.actions:
        out.append("  actions: " + ", ".join(f"{a} ({clock(t)})" for t, a in r.actions))
    out += _result_lines(data)
    if r.note_text:
        out.append(f"  result: {r.note_text} (round note, seq {r.note_seq})")
    else:
        out.append("  result: no round note (the round did not end in this log)")
    if r.deviations:
        out.append("  deviations in this round:")
        for d in r.deviations:
            out.append(f"    seq {d.seq}: {d.code} [{d.severity}] {d.message}")
    return out


def _hand_text(cards: Any, total: Any, soft: Any = False) -> str:
    shown = " ".join(cards) if isinstance(cards, list) else "?"
    total_text = "" if total is None else f" = {total}" + (" soft" if soft else "")
    return shown + total_text


def _result_lines(data: dict[str, Any]) -> list[str]:
    out: list[str] = []
    hands = data.get("hands")
    if isinstance(hands, list):  # blackjack
        out.append("  hands:")
        for h in hands:
            flags = [k for k in ("blackjack", "bust", "doubled", "split", "surrendered")
                     if h.get(k)]
            pays = f", pays {h['pays']}" if h.get("pays") else ""
            hand = _hand_text(h.get("cards"), h.get("total"), h.get("soft"))
            out.append(f"    {h.get('hand')}: {hand}" + (f" ({', '.join(flags)})" if flags else "")
                       + f" -> {h.get('outcome')}{pays}")
        dealer = data.get("dealer")
        if isinstance(dealer, dict):
            flags = [k for k in ("blackjack", "bust", "peeked") if dealer.get(k)]
            hand = _hand_text(dealer.get("cards"), dealer.get("total"), dealer.get("soft"))
            out.append(f"    dealer: {hand}" + (f" ({', '.join(flags)})" if flags else ""))
        if data.get("insurance"):
            out.append(f"    insurance: {data['insurance']}")
    elif isinstance(hands, dict):  # stud poker
        out.append("  hands:")
        for name, h in hands.items():
            extra = " VOID" if h.get("void") else ""
            out.append(f"    {name}: {_hand_text(h.get('cards'), None)} ({h.get('rank')}){extra}")
        results = data.get("results")
        if isinstance(results, dict):
            for name, res in results.items():
                out.append(f"    {name}: {res.get('outcome')}"
                           + "".join(f", {k} {v:+d}" for k, v in res.items()
                                     if k in ("ante", "raise") and isinstance(v, int)))
        if "dealer_qualifies" in data:
            out.append(f"    dealer qualifies: {data.get('dealer_qualifies')}")
    elif "winner" in data or "punto" in data:  # baccarat family
        cards = _list_at(data, "cards")
        for side in ("punto", "banco"):
            side_cards = [c.get("card") for c in cards if c.get("to") == side]
            if side_cards or data.get(side) is not None:
                out.append(f"  {side}: {_hand_text(side_cards, data.get(side))}")
        if data.get("naturals"):
            out.append(f"  naturals: {', '.join(data['naturals'])}")
        out.append(f"  winner: {data.get('winner') or '-'}"
                   + (" (dummy hand: bets not accepted)" if data.get("dummy") else ""))
    return out


def render_round(report: Report, n: int, table: str | None = None) -> str | None:
    found = report.find_round(n, table)
    if not found:
        return None
    out: list[str] = [*report.verdict, ""] if report.verdict else []
    for day, r in found:
        out += round_lines(day, r)
        out.append("")
    return "\n".join(out).rstrip() + "\n"
