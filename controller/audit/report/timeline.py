"""Log records → a day's report: its timeline per shoe, its rounds, deviations, faults.

:class:`DayBuilder` reads the records in order and re-runs the engine beside them (as
a replay does), so that figures the log implies but does not spell out — the measured
position of the cut card, which shoe a step belongs to — come from the same engine that
made the decisions. Everything else comes from the logged records.
"""

from __future__ import annotations

import os
from typing import Any

from controller.audit.history import DEFAULT_K
from controller.audit.records import LogRecord
from controller.audit.replay import Replayer
from controller.audit.report.model import (
    CardRow,
    DayReport,
    DevRow,
    Entry,
    RoundInfo,
    ShoeInfo,
    calendar_date,
    date_of,
    dict_at,
    time_of,
)
from controller.audit.seeds import reveal_problem
from controller.screening.evidence import run_text


class DayBuilder:
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
        #: the cut card out between rounds, and its last-hand note: the next round's
        self.cut_pending: tuple[str, int | None] | None = None
        self.last_pending: str | None = None
        #: the bench seed the last header commits to, and each reveal read: (file, line,
        #: why it does not match, None when it does)
        self.seed_committed: Any = None
        self.seed_reveals: list[tuple[str, int, str | None]] = []

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
            self.day = self._start_day(str(table), date_of(self.time))
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
            event = dict_at(r, "event")
            self.time = time_of(r, event)
            engine = self._engine()
            if engine is None or event.get("type") != "card":
                before = r.get("state")
                self.replayer.feed(rec)
            else:  # where the engine put the card (the record's state says device_fault
                # during a fault, load where the card implied the load)
                before = engine.procedure_state
                burned = engine.accounting().burned
                self.replayer.feed(rec)
                if self._engine() is engine:
                    if engine.accounting().burned > burned:
                        before = "burn"
                    elif before == "load":
                        before = "ready"  # the load implied, no burn due: a card before bets
            self._input(rec, event, before)
        elif kind == "output":
            self.replayer.feed(rec)
            out = dict_at(r, "output")
            self._output(rec, out)
        else:
            self.replayer.feed(rec)
            if kind == "header":
                self.time = time_of(r)
                self.header_table = r.get("table") if isinstance(r.get("table"), str) else None
                directory = os.path.dirname(os.path.realpath(rec.file))
                if directory != self.header_dir:
                    self.header_dir = directory
                    self.day = None  # another directory: another table, even with this id
                settings = r.get("settings")
                self.seed_committed = settings.get("seed_commitment") \
                    if isinstance(settings, dict) else None
            elif kind == "seed_reveal":
                self.seed_reveals.append((rec.file, rec.line,
                                          reveal_problem(self.seed_committed, r)))
            elif kind == "recovery":
                day = self._current_day(rec)
                cut = r.get("cut")
                what = "nothing cut" if not cut else f"torn line cut ({cut.get('bytes')} bytes)"
                self._timeline(day, r.get("shoe"), r.get("state")).append(
                    Entry(time_of(r), r.get("seq"), "recovery",
                          f"{what}; {r.get('restored_outputs', 0)} output(s) restored"))

    def _engine(self) -> Any:
        session = self.replayer.session
        return None if session is None else session.engine

    def _input(self, rec: LogRecord, event: dict[str, Any], before: Any) -> None:
        engine = self._engine()
        etype = event.get("type")
        seq = rec.seq
        if etype == "table_open" and engine is not None:
            self.day = self._start_day(str(event.get("table")), date_of(self.time))
            day = self.day
            if day.calendar is None:
                day.calendar = calendar_date(event.get("t"), day.date)
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
            self.cut_pending = self.last_pending = None  # (a shoe ended with no round after)
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
            if self.round is not None and self.round.end is None:
                self.round.cut_card = (self.time, seq)  # in the round: its last hand
            else:
                self.cut_pending = (self.time, seq)  # between rounds: the next is
            timeline.append(Entry(self.time, seq, "cut card out",
                                  f"{measured} card(s) behind it (measured){self._window(day)}"
                                  if measured is not None else ""))
        elif etype == "bets_closed":
            rnd = engine.round if engine is not None else rec.record.get("round")
            bets = {k: v for k, v in event.items() if k in ("boxes", "players")}
            dealer = day.dealer_changes[-1] if day.dealer_changes else None
            self.round = RoundInfo(int(rnd or 0), int(shoe or 0), seq, self.time, bets=bets,
                                   file=rec.file,
                                   dealer=(str(dealer["dealer"]), str(dealer["time"]))
                                   if dealer else None)
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
            if self.cut_pending is not None or self.last_pending is not None:
                self.round.cut_card, self.round.last_hand = self.cut_pending, self.last_pending
                self.cut_pending = self.last_pending = None
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
        elif etype == "discards_returned":  # (a shuffler: held against the rounds' cards,
            # and against a DISCARDS_NOT_RETURNED; counted on the rounds' line, not a line each)
            raw = event.get("count")
            count = raw if isinstance(raw, int) else 0
            if self.rounds_entry is not None:
                self.rounds_entry.returned += count
            if self.round is not None:
                self.round.returned.append((self.time, seq, count))
        elif etype == "device_connected":
            day.devices.append({"time": self.time, "seq": seq, **{
                k: event.get(k) for k in ("device", "driver", "port", "kind", "model",
                                          "serial", "firmware")}})

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
        to = event.get("to")
        row = CardRow(seq, self.time, str(event.get("card")), to if isinstance(to, str) else None)
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
                              "return_discards", "device_fault"):
                self.round.deviations.append(row)
            timeline.append(Entry(self.time, rec.seq, row.code, f"{row.message} ({row.rule})",
                                  severity=row.severity, note=run_text(row.evidence)))
        elif otype == "note":
            self._note(day, timeline, rec, out)
        elif otype == "transition" and out.get("to") == "shoe_complete":
            timeline.append(Entry(self.time, rec.seq, "shoe complete", "reshuffle due"))

    def _note(self, day: DayReport, timeline: list[Entry], rec: LogRecord,
              out: dict[str, Any]) -> None:
        kind = out.get("kind")
        data = dict_at(out, "data")
        text = str(out.get("text", ""))
        if kind == "round":
            n = data.get("round")
            for info in reversed(day.rounds):
                if info.round == n:
                    info.data, info.note_text, info.note_seq = data, text, rec.seq
                    break
        elif kind == "last_hand":
            timeline.append(Entry(self.time, rec.seq, "last hand", text))
            if self.round is not None and data.get("round") == self.round.round:
                self.round.last_hand = text
            elif "round" not in data:
                self.last_pending = text  # the next round is the last hand
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
                      "consequence", "round_not_dealt", "screen_off"):
            timeline.append(Entry(self.time, rec.seq, kind.replace("_", " "), text))

