"""What an audit report holds: days, shoes, timeline entries, rounds, deviation rows.

Plain dataclasses filled by :mod:`controller.audit.report.timeline` and read by the
renderers (text, round, HTML), so each renderer depends on the figures, not on how they
were found; and the small readers every part uses for records and times.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from controller.audit.history import DEFAULT_K, utc_date
from controller.audit.replay import Difference
from controller.events import EventError, parse_time, written_date

SEVERITIES = ("critical", "warning", "info")

def dict_at(obj: Any, key: str) -> dict[str, Any]:
    """``obj[key]`` when it is an object, else an empty one (a record read from a log)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def list_at(obj: Any, key: str) -> list[Any]:
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
    #: a second line under a deviation: the run of cards its evidence names (run_text)
    note: str | None = None
    cards: int = 0
    returned: int = 0  # (rounds, with a shuffler) cards returned to it after them


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
    to: str | None = None  #: the place the card event named, as recorded


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
    file: str = ""  # the log file its bets_closed is in (a day's second chain restarts its seq)
    deviations: list[DevRow] = field(default_factory=list)
    #: the dealer on duty when its bets closed (the last dealer_change before it), and since
    dealer: tuple[str, str] | None = None
    #: the cut card coming out in the round (time, seq) and the last-hand note's text
    cut_card: tuple[str, int | None] | None = None
    last_hand: str | None = None
    #: (a shuffler) the discards returned after it: (time, seq, count)
    returned: list[tuple[str, int | None, int]] = field(default_factory=list)


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
    #: the devices identified at the table (``device_connected``): time, seq and identity
    devices: list[dict[str, Any]] = field(default_factory=list)
    cards: int = 0
    burns: int = 0
    sabot_k: int = DEFAULT_K
    rule: str = ""  # the profile's own citation (rule of SABOT_ROTATION)
    openings: list[tuple[str, str | None, int | None]] = field(default_factory=list)
    #: the date ``table_open`` was written with, at the table's own UTC offset, where it is
    #: not the UTC date the day is filed under: the day deck lots were judged by (events.md)
    calendar: str | None = None

    @property
    def title(self) -> str:
        local = f" (the table's calendar: {self.calendar})" if self.calendar else ""
        return f"table {self.table}, {self.date}{local}"

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
    #: where a replay of the log disagrees with it (``audit replay``'s differences): the
    #: view of one round names those inside it
    differences: list[Difference] = field(default_factory=list)

    def find_round(self, n: int, table: str | None = None) -> list[tuple[DayReport, RoundInfo]]:
        return [(d, r) for d in self.days for r in d.rounds
                if r.round == n and (table is None or d.table == table)]


def time_of(record: dict[str, Any], event: dict[str, Any] | None = None) -> str:
    if event is not None and isinstance(event.get("t"), str):
        return str(event["t"])
    return str(record.get("ts", ""))


def date_of(time: str) -> str:
    return utc_date(time) or time[:10]


def calendar_date(t: object, filed: str) -> str | None:
    """The date an event's ``t`` was written with (its own UTC offset), where it is not
    ``filed`` (the UTC date a day is filed under); None where they agree or ``t`` is no
    time. A table at +03:00 opening at 01:30 on the 15th is filed under the 14th."""
    if not isinstance(t, str):
        return None
    try:
        local = written_date(t).isoformat()
    except EventError:
        return None
    return None if local == filed else local


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
