"""A table's live state, folded from its audit records alone (no engine).

Everything the floor and the dealer display show about a table comes from the records the
table wrote: the header (profile, game), the context every record carries (state, shoe,
round), the inputs (cards, cut card, bets closed), the outputs (prompts, deviations, the
round referee's round notes, device faults). The floor never asks the table's engine: a
floor on another machine (issue 12) sees exactly the same records.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

#: how many of the day's deviations and rounds a table keeps in memory for its pages
KEEP_DEVIATIONS = 50
KEEP_ROUNDS = 400

DEAL_STATES = frozenset({"round", "last_round"})


@dataclass
class CardSeen:
    seq: int
    card: str
    ts: str
    burn: bool = False


@dataclass
class RoundSeen:
    """A round as the log tells it: its cards as they came, then the referee's note."""

    round: int
    shoe: int
    seq: int
    ts: str
    cards: list[CardSeen] = field(default_factory=list)
    ended: bool = False
    text: str | None = None
    data: dict[str, Any] | None = None
    end_seq: int | None = None  # the round note's seq
    file: str | None = None  # the log file it was dealt in


@dataclass
class DeviceSeen:
    device: str
    model: str | None = None
    serial: str | None = None
    port: str | None = None
    faults: dict[str, str] = field(default_factory=dict)  # code -> text, open faults


@dataclass
class TableState:
    """What a table is doing, as of its last record."""

    table: str
    profile: str | None = None
    game: str | None = None
    continuous: bool = False
    card_source: str | None = None
    decks: int | None = None
    sabot: str | None = None
    state: str | None = None
    shoe: int = 0
    round: int = 0
    file: str | None = None
    last_seq: int = 0
    last_ts: str | None = None
    prompt: str | None = None
    shoe_cards: int = 0  # cards out of the current shoe (burns included)
    burned: int = 0
    cut_card_behind: int | None = None
    cut_card_out: bool = False
    last_hand: int | None = None
    day_cards: int = 0
    current: RoundSeen | None = None
    rounds: deque[RoundSeen] = field(default_factory=lambda: deque(maxlen=KEEP_ROUNDS))
    previous_shoe_rounds: list[RoundSeen] = field(default_factory=list)
    deviations: deque[dict[str, Any]] = field(
        default_factory=lambda: deque(maxlen=KEEP_DEVIATIONS))
    devices: dict[str, DeviceSeen] = field(default_factory=dict)
    records: int = 0
    #: the seq of the round note before the last one: deviations after it are the dealer
    #: display's banner (they stay up through this round and the next)
    deviation_mark: int = 0
    _last_note: int = 0

    @property
    def cards_left(self) -> int | None:
        """Cards still in the shoe: the pack less what came out of it since the shoe was
        loaded; None where there is no shoe to count (continuous shuffler, hand-dealt)."""
        if self.continuous or self.decks is None or self.card_source != "shoe" or not self.shoe:
            return None
        return max(self.decks * 52 - self.shoe_cards, 0)

    @property
    def open_faults(self) -> list[dict[str, str]]:
        return [{"device": d.device, "code": code, "text": text}
                for d in self.devices.values() for code, text in d.faults.items()]

    @property
    def is_open(self) -> bool:
        return self.state not in (None, "closed")

    # ------------------------------------------------------------------ the fold

    def feed(self, record: dict[str, Any], file: str) -> dict[str, Any] | None:
        """Take one record; return the deviation it carries (output dict), if any."""
        self.records += 1
        self.file = file
        seq = record.get("seq")
        if type(seq) is int:
            self.last_seq = seq
        ts = record.get("ts")
        if isinstance(ts, str):
            self.last_ts = ts
        kind = record.get("kind")
        shoe = record.get("shoe")
        if type(shoe) is int and shoe != self.shoe:
            self._new_shoe(shoe)
        rnd = record.get("round")
        if type(rnd) is int:
            self.round = rnd
        state = record.get("state")
        if isinstance(state, str):
            self.state = state
        if kind == "input":
            event = record.get("event")
            if isinstance(event, dict):
                self._input(event, state, self.last_seq, self.last_ts or "")
        elif kind == "output":
            out = record.get("output")
            if isinstance(out, dict):
                return self._output(out, record)
        elif kind == "header":
            self._header(record)
        return None

    def _header(self, record: dict[str, Any]) -> None:
        profile = record.get("profile")
        if isinstance(profile, dict):
            self.profile = _text(profile.get("name"))
            self.game = _text(profile.get("game"))
            self.card_source = _text(profile.get("card_source"))
            shuffler = profile.get("shuffler")
            self.continuous = isinstance(shuffler, dict) and shuffler.get("continuous") is True

    def _new_shoe(self, shoe: int) -> None:
        if self.rounds:
            self.previous_shoe_rounds = list(self.rounds)
        self.rounds.clear()
        self.shoe = shoe
        self.shoe_cards = self.burned = 0
        self.cut_card_behind = None
        self.cut_card_out = False
        self.last_hand = None

    def _input(self, event: dict[str, Any], before: Any, seq: int, ts: str) -> None:
        etype = event.get("type")
        if etype == "card":
            card = str(event.get("card"))
            self.shoe_cards += 1
            self.day_cards += 1
            burn = before == "burn"
            if burn:
                self.burned += 1
            seen = CardSeen(seq, card, ts, burn)
            if before in DEAL_STATES and self.current is not None and not self.current.ended:
                self.current.cards.append(seen)
            elif before == "ready":  # before bets closed: shown with the next round
                if self.current is None or self.current.ended:
                    self.current = RoundSeen(self.round + 1, self.shoe, seq, ts,
                                             file=self.file)
                self.current.cards.append(seen)
        elif etype == "bets_closed":
            early = self.current.cards if (self.current is not None
                                           and not self.current.ended
                                           and self.current.round == self.round + 1) else []
            self.current = RoundSeen(self.round + 1, self.shoe, seq, ts, cards=list(early),
                                     file=self.file)
        elif etype == "round_end":
            if self.current is not None:
                self.current.ended = True
        elif etype == "table_open":
            decks = event.get("decks")
            self.decks = decks if type(decks) is int else self.decks
            self.sabot = _text(event.get("sabot"))
        elif etype == "cut_card_placed":
            behind = event.get("behind")
            self.cut_card_behind = behind if type(behind) is int else None
        elif etype == "cut_card":
            self.cut_card_out = True

    def _output(self, out: dict[str, Any], record: dict[str, Any]) -> dict[str, Any] | None:
        otype = out.get("type")
        if otype == "prompt":
            self.prompt = _text(out.get("text"))
        elif otype == "deviation":
            row = {"seq": self.last_seq, "ts": self.last_ts, "code": out.get("code"),
                   "severity": out.get("severity"), "message": out.get("message"),
                   "rule": out.get("rule"), "shoe": record.get("shoe"),
                   "round": record.get("round"), "file": self.file}
            self.deviations.append(row)
            return row
        elif otype == "note":
            self._note(out)
        return None

    def _note(self, out: dict[str, Any]) -> None:
        kind = out.get("kind")
        data = out.get("data") if isinstance(out.get("data"), dict) else {}
        assert isinstance(data, dict)
        text = _text(out.get("text"))
        if kind == "round":
            n = data.get("round")
            rnd = self.current if (self.current is not None and
                                   self.current.round == n) else None
            if rnd is None:
                rnd = RoundSeen(n if type(n) is int else self.round, self.shoe,
                                self.last_seq, self.last_ts or "", file=self.file)
            rnd.ended, rnd.text, rnd.data, rnd.end_seq = True, text, data, self.last_seq
            self.deviation_mark, self._last_note = self._last_note, self.last_seq
            self.rounds.append(rnd)
            self.current = rnd
        elif kind == "last_hand":
            n = data.get("round")
            self.last_hand = n if type(n) is int else None
        elif kind == "device_connected":
            name = str(data.get("device"))
            dev = self.devices.setdefault(name, DeviceSeen(name))
            dev.model, dev.serial = _text(data.get("model")), _text(data.get("serial"))
            dev.port = _text(data.get("port"))
        elif kind == "device_fault":
            name = str(data.get("device"))
            dev = self.devices.setdefault(name, DeviceSeen(name))
            dev.faults[str(data.get("code"))] = text or ""
        elif kind == "device_ok":
            name = str(data.get("device"))
            dev = self.devices.setdefault(name, DeviceSeen(name))
            dev.faults.pop(str(data.get("code")), None)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
