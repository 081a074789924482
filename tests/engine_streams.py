"""Shared helpers for the procedure-engine tests (tests/test_engine_*.py and the game
tests): a plain module, imported by name (``from engine_streams import …``), not a
conftest, so that what a test uses is visible in its imports.

* :func:`day` — a correct table day from the reference dealer, as a fresh (mutable) list
  of steps, so a test can drop, move or edit one step and replay.
* :class:`Run` — feeds event dicts through ``parse_event`` into a :class:`TableEngine` and,
  for *every* event, checks the output contract: deviations and notes first, then the
  transition, then the prompt; a prompt after every state change; every deviation carries
  the catalog severity, a message and a ``"<profile> <seed citation>"`` rule.
* :class:`Table` — builds a short stream by hand (open, count, shuffle, cut, cut card, load,
  burn, rounds) from a known pack order, for cases a mutated day cannot express cleanly.

The expected facts in the tests come from PROCEDURES.md and the profile files, not from
the engine.
"""

from __future__ import annotations

import functools
import os
import pickle
import random
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from controller.cards import pack
from controller.deviations import CATALOG, Deviation, Severity
from controller.engine import DEVICE_FAULT, TableEngine
from controller.events import parse_event
from controller.outputs import Note, Prompt, Transition
from controller.profiles import Profile, Section, load_profile, profile_names
from simulators.dealer import DayPlan, Step, table_day

PROFILES: list[str] = profile_names()
T_OPEN = "2026-11-21T10:00:00Z"
SERIOUS = (Severity.WARNING, Severity.CRITICAL)

# The procedure engine's own codes (PROCEDURES.md §2–3). The dealing-rule codes the game
# referees register (DRAW_RULE, DEALER_DRAW_RULE, ...) are not the procedure engine's and are
# left to the referees' tests: hand-built rounds here deal arbitrary cards, so the procedure
# assertions look at these codes only.
PROCEDURE_CODES = frozenset({
    "CHECK_MISSING", "DECK_INCOMPLETE", "DECK_EXTRA_CARD", "DECK_FOREIGN_CARD", "DECK_COUNT",
    "DECK_EXPIRED", "SHUFFLE_MISSING", "SHUFFLE_SUSPECT", "CUT_MISSING", "CUT_TOO_SHALLOW",
    "CUT_CARD_MISSING",
    "CUT_CARD_POSITION", "CUT_CARD_UNEXPECTED", "BURN_COUNT", "CARD_BEFORE_BETS_CLOSED",
    "PLAY_AFTER_LAST_HAND", "CARD_DUPLICATE", "DISCARDS_NOT_RETURNED", "DEVICE_FAULT",
    "UNEXPECTED_EVENT", "SABOT_ROTATION", "PROTOCOL_ERROR", "DEVICE_IDENTITY",
    "ANCHOR_WRITE_FAILED",
})

# Which profile has what, written out from PROCEDURES.md §1 (not read from the code).
CUT_CARD_PROFILES = [
    "gr-blackjack", "gr-chemin-de-fer", "gr-baccarat-two-tableaux", "gr-banco-punto",
    "live-baccarat", "live-blackjack", "ru-blackjack",
]
NO_CUT_CARD_PROFILES = ["gr-blackjack-shuffler", "gr-banco-punto-shuffler", "gr-stud-poker"]
SHUFFLER_PROFILES = ["gr-blackjack-shuffler", "gr-banco-punto-shuffler"]
FIVE_BURN_PROFILES = ["gr-blackjack", "gr-blackjack-shuffler", "ru-blackjack"]
BY_VALUE_PROFILES = ["gr-banco-punto", "gr-banco-punto-shuffler"]
NO_BURN_PROFILES = [
    "gr-chemin-de-fer", "gr-baccarat-two-tableaux", "gr-stud-poker", "live-baccarat",
    "live-blackjack",
]
NO_ROUND_PROFILES = ["gr-chemin-de-fer", "gr-baccarat-two-tableaux"]  # end card: no more hands
ROUND_IS_LAST_PROFILES = [p for p in CUT_CARD_PROFILES if p not in NO_ROUND_PROFILES]
SHOE_PROFILES = [p for p in PROFILES if p not in SHUFFLER_PROFILES and p != "gr-stud-poker"]


@functools.cache
def prof(name: str) -> Profile:
    return load_profile(name)


@functools.cache
def _day(name: str, seed: int, plan: tuple[tuple[str, Any], ...]) -> tuple[Step, ...]:
    return tuple(table_day(prof(name), seed, DayPlan(**dict(plan))))


def day(name: str, seed: int = 0, **plan: Any) -> list[Step]:
    """A correct table day (cached), returned as fresh steps whose events may be edited.

    The events are copied by a round trip through pickle: a deep copy of plain dicts
    and lists, done in C (a Python walk over a day's events cost a test 5 ms); the day is
    pickled once (:func:`_day_pickled`), unpickled for each test."""
    key = tuple(sorted(plan.items()))
    steps = _day(name, seed, key)
    _days_of.setdefault(name, {})[(seed, key)] = None
    fresh = pickle.loads(_day_pickled(name, seed, key))
    return [Step(s.phase, ev, s.shoe, s.round) for s, ev in zip(steps, fresh, strict=True)]


@functools.cache
def _day_pickled(name: str, seed: int, plan: tuple[tuple[str, Any], ...]) -> bytes:
    return pickle.dumps([s.event for s in _day(name, seed, plan)], pickle.HIGHEST_PROTOCOL)


def events(steps: Iterable[Step]) -> list[dict[str, Any]]:
    return [s.event for s in steps]


def where(steps: list[Step], phase: str, *, shoe: int | None = None,
          rnd: int | None = None) -> list[int]:
    """Indices of the steps of ``phase`` (optionally in one shoe / round)."""
    return [i for i, s in enumerate(steps) if s.phase == phase
            and (shoe is None or s.shoe == shoe) and (rnd is None or s.round == rnd)]


def first(steps: list[Step], phase: str, **kw: Any) -> int:
    found = where(steps, phase, **kw)
    assert found, f"no {phase} step {kw or ''}"
    return found[0]


BURN_PHASES = ("burn", "dealer_change_burn")


def round_cards(steps: list[Step], rnd: int) -> list[int]:
    """Indices of the cards dealt in round ``rnd`` (burn cards left out)."""
    return [i for i, s in enumerate(steps) if s.event["type"] == "card" and s.round == rnd
            and s.phase not in BURN_PHASES]


def drop(steps: list[Step], *idx: int) -> list[Step]:
    gone = set(idx)
    return [s for i, s in enumerate(steps) if i not in gone]


def move(steps: list[Step], i: int, before: int) -> list[Step]:
    """Move step ``i`` so that it comes just before step ``before`` (original indices)."""
    out = list(steps)
    step = out.pop(i)
    out.insert(before if before < i else before - 1, step)
    return out


def insert(steps: list[Step], at: int, *evs: dict[str, Any], phase: str = "inserted") -> list[Step]:
    """Insert events before step ``at`` (tagged with the shoe and round of the step there)."""
    ref = steps[min(at, len(steps) - 1)]
    new = [Step(phase, ev, ref.shoe, ref.round) for ev in evs]
    return steps[:at] + new + steps[at:]


def citations(profile: Profile) -> set[str]:
    out = {profile.source}
    for f in fields(profile):
        value = getattr(profile, f.name)
        if isinstance(value, Section):
            out.add(value.source)
    if profile.shuffle.restart_source:
        out.add(profile.shuffle.restart_source)
    return out


def check_deviation(profile: Profile, dev: Deviation) -> None:
    spec = CATALOG[dev.code]
    assert dev.severity == spec.severity, dev
    assert isinstance(dev.message, str) and dev.message.strip(), dev
    assert re.match(rf"^{re.escape(profile.name)} 00[0-4] (BP )?§", dev.rule), dev.rule
    assert dev.rule[len(profile.name) + 1:] in citations(profile), dev.rule
    if dev.code == "SHUFFLE_MISSING" and "skipped" in dev.evidence:  # the restart skipped
        assert dev.rule == f"{profile.name} " + (profile.shuffle.restart_source
                                                 or profile.shuffle.source), dev.rule
        return
    assert dev.rule == profile.rule(spec.section), (dev.code, dev.rule)


def check_outputs(engine: TableEngine, before: str, outs: list[Any]) -> None:
    """The output contract of one ``handle`` call."""
    after = engine.state
    if not outs:  # most events (a card) answer nothing: then nothing may have moved
        assert after == before, (before, after, outs)
        return
    for o in outs:
        assert isinstance(o, Transition | Prompt | Note | Deviation), o
    kinds = ["t" if isinstance(o, Transition | Prompt) else "d" for o in outs]
    if "t" in kinds:
        assert "d" not in kinds[kinds.index("t"):], f"deviation/note after a transition: {outs}"
    moves = [o for o in outs if isinstance(o, Transition) and not o.under_fault]
    prompts = [o for o in outs if isinstance(o, Prompt)]
    if after != before:
        assert len(moves) == 1 and len(prompts) == 1, (before, after, outs)
        assert outs[-2] is moves[0] and outs[-1] is prompts[0], outs
        assert (moves[0].source, moves[0].dest) == (before, after), moves[0]
        assert prompts[0].state == after and prompts[0].text, prompts[0]
        assert prompts[0] == engine.prompt()
    elif moves:  # a self-transition (a reshuffle while waiting for the cut): then the prompt
        assert len(moves) == 1 and (moves[0].source, moves[0].dest) == (before, after), outs
        assert len(prompts) == 1 and outs[-2] is moves[0] and outs[-1] is prompts[0], outs
    else:  # no state change: a prompt, if any, is last and current
        assert len(prompts) <= 1 and all(o is outs[-1] and o.state == after for o in prompts)
    if any(isinstance(o, Transition) and o.under_fault for o in outs):
        assert before == after == DEVICE_FAULT
        assert isinstance(outs[-1], Transition), outs


@dataclass
class Run:
    """One engine and everything it answered; every event goes through the contract checks."""

    profile: Profile
    engine: TableEngine
    sent: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[list[Any]] = field(default_factory=list)
    states: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, name: str | Profile) -> Run:
        profile = prof(name) if isinstance(name, str) else name
        return cls(profile, TableEngine(profile))

    def feed(self, event: dict[str, Any]) -> list[Any]:
        before = self.engine.state
        outs = self.engine.handle(parse_event(event))
        check_outputs(self.engine, before, outs)
        for o in outs:
            if isinstance(o, Deviation):
                check_deviation(self.profile, o)
        self.sent.append(event)
        self.outputs.append(outs)
        self.states.append(self.engine.state)
        return outs

    def feed_all(self, evs: Iterable[dict[str, Any]]) -> Run:
        for ev in evs:
            self.feed(ev)
        return self

    @property
    def state(self) -> str:
        return self.engine.state

    def devs(self, code: str | None = None) -> list[Deviation]:
        return [o for outs in self.outputs for o in outs
                if isinstance(o, Deviation) and (code is None or o.code == code)]

    def codes(self) -> Counter[str]:
        return Counter(d.code for d in self.devs())

    def serious(self) -> Counter[str]:
        return Counter(d.code for d in self.devs() if d.severity in SERIOUS)

    def proc(self) -> Counter[str]:
        """The procedure codes raised (dealing-rule codes left out, see PROCEDURE_CODES)."""
        return Counter(d.code for d in self.devs() if d.code in PROCEDURE_CODES)

    def notes(self, kind: str) -> list[Note]:
        return [o for outs in self.outputs for o in outs
                if isinstance(o, Note) and o.kind == kind]

    def at(self, code: str) -> list[int]:
        """Indices of the events whose outputs hold ``code``."""
        return [i for i, outs in enumerate(self.outputs)
                if any(isinstance(o, Deviation) and o.code == code for o in outs)]


# ------------------------------------------------------------- a correct day's prefix, once

SNAPSHOT_EVERY = 48
"""A correct day's engine is kept (pickled) every this many events (see :func:`run`)."""
FULL_RUNS = bool(os.environ.get("SHOEWARDEN_TESTS_FULL_RUNS"))
"""Set: every :func:`run` feeds its stream from the first event (no prefix reused)."""

#: per profile name, the correct days :func:`day` handed out in this process
_days_of: dict[str, dict[tuple[int, tuple[tuple[str, Any], ...]], None]] = {}


@dataclass(frozen=True)
class _Prefixes:
    """A correct day run once through a checked :class:`Run`: its events, and at every
    :data:`SNAPSHOT_EVERY`-th event the engine as it stood before it (pickled) with what
    the run had answered up to there."""

    events: tuple[dict[str, Any], ...]
    engines: dict[int, bytes]
    outputs: tuple[list[Any], ...]
    states: tuple[str, ...]


@functools.cache
def _prefixes(name: str, seed: int, plan: tuple[tuple[str, Any], ...]) -> _Prefixes:
    evs = _day_events(name, seed, plan)
    r = Run.of(name)
    engines = {}
    for i, ev in enumerate(evs):
        if i and i % SNAPSHOT_EVERY == 0:
            engines[i] = pickle.dumps(r.engine, pickle.HIGHEST_PROTOCOL)
        r.feed(ev)
    return _Prefixes(evs, engines, tuple(r.outputs), tuple(r.states))


def _common(a: list[dict[str, Any]], b: tuple[dict[str, Any], ...]) -> int:
    n = 0
    for x, y in zip(a, b):  # noqa: B905 (a prefix: the shorter decides)
        if x != y:
            break
        n += 1
    return n


def _resumed(name: str, evs: list[dict[str, Any]]) -> tuple[Run, int]:
    """A run of ``evs`` that has taken their longest prefix shared with a correct day of
    ``name`` handed out by :func:`day` (to the last kept engine within it), and how many
    events that is — the engine is deterministic (docs/architecture.md), so the same
    events leave it in the same state; tests/test_engine_streams.py holds a resumed run
    against a full one, event by event."""
    best, where = 0, None
    for seed, plan in _days_of.get(name, ()):
        n = _common(evs, _day_events(name, seed, plan))
        if n > best:
            best, where = n, (seed, plan)
    at = best - best % SNAPSHOT_EVERY
    if FULL_RUNS or where is None or not at:
        return Run.of(name), 0
    pre = _prefixes(name, *where)
    if at not in pre.engines:  # (the whole day: nothing kept after its last event)
        at -= SNAPSHOT_EVERY
        if not at:
            return Run.of(name), 0
    engine = pickle.loads(pre.engines[at])
    return Run(prof(name), engine, list(evs[:at]), list(pre.outputs[:at]),
               list(pre.states[:at])), at


@functools.cache
def _day_events(name: str, seed: int, plan: tuple[tuple[str, Any], ...]
                ) -> tuple[dict[str, Any], ...]:
    return tuple(s.event for s in _day(name, seed, plan))


def run(name: str | Profile, evs: Iterable[dict[str, Any]]) -> Run:
    """``evs`` fed through a checked :class:`Run` from a fresh engine. A stream that begins
    as a correct day from :func:`day` does (a mistake planted in it), has that day's
    engine at its last kept point before the first change taken over instead of the
    events before it fed again: a third of the engine tests' events."""
    if not isinstance(name, str):
        return Run.of(name).feed_all(evs)
    evs = list(evs)
    r, at = _resumed(name, evs)
    return r.feed_all(evs[at:])


def only(r: Run, code: str, count: int = 1) -> list[Deviation]:
    """``code`` appears ``count`` times and no other procedure code appears."""
    assert r.proc() == Counter({code: count}), r.codes()
    return r.devs(code)


def codes_of(outs: Iterable[Any]) -> list[str]:
    """The procedure codes in one event's outputs, in order."""
    return [o.code for o in outs if isinstance(o, Deviation) and o.code in PROCEDURE_CODES]


class Table:
    """A hand-built stream for one table, from a seeded pack order."""

    def __init__(self, name: str, decks: int | None = None, seed: int = 1) -> None:
        self.profile = prof(name)
        self.decks = decks or self.profile.decks.max
        self.run = Run.of(self.profile)
        self.stack = [str(c) for c in pack(self.decks)]
        random.Random(seed).shuffle(self.stack)
        self.pos = 0
        self.out = 0  # cards out since the discards last went back (shuffler profiles)

    @property
    def engine(self) -> TableEngine:
        return self.run.engine

    @property
    def state(self) -> str:
        return self.run.engine.state

    @property
    def in_shoe(self) -> int:
        return self.engine.accounting().in_shoe

    def send(self, type_: str, **fields_: Any) -> list[Any]:
        return self.run.feed({"type": type_, **fields_})

    def open(self, **kw: Any) -> list[Any]:
        kw.setdefault("t", T_OPEN)
        kw.setdefault("decks", self.decks)
        return self.send("table_open", table="T9", **kw)

    def check(self, cards: list[str] | None = None, **kw: Any) -> list[Any]:
        return self.send("deck_check", cards=cards if cards is not None
                         else [str(c) for c in pack(self.decks)], **kw)

    def shuffle(self) -> list[Any]:
        return self.send("shuffle")

    def cut(self, offset: int | None = None) -> list[Any]:
        return self.send("cut", offset=self.decks * 26 if offset is None else offset)

    def place(self, behind: int | None = None) -> list[Any]:
        return self.send("cut_card_placed",
                         behind=self.profile.cut_card.behind if behind is None else behind)

    def load(self) -> list[Any]:
        return self.send("shoe_loaded")

    def new_pack(self, seed: int = 2) -> None:
        """The cards were withdrawn and re-stacked: deal on from a fresh order."""
        self.stack = [str(c) for c in pack(self.decks)]
        random.Random(seed).shuffle(self.stack)
        self.pos = 0
        self.out = 0

    def put_next(self, card: str) -> None:
        """Make ``card`` the next card out of the shoe (taken from further down the stack)."""
        i = self.stack.index(card, self.pos)
        self.stack.insert(self.pos, self.stack.pop(i))

    def card(self, card: str | None = None) -> list[Any]:
        if card is not None:
            self.put_next(card)
        out = self.send("card", card=self.stack[self.pos])
        self.pos += 1
        self.out += 1
        return out

    def cards(self, n: int) -> list[Any]:
        out: list[Any] = []
        for _ in range(n):
            out += self.card()
        return out

    def burn(self) -> list[Any]:
        burn = self.profile.burn
        if burn.mode == "five":
            return self.cards(5)
        if burn.mode == "by-value":
            first = self.stack[self.pos]
            n = burn.ten_value if first[0] in "TJQK" else "A23456789".index(first[0]) + 1
            return self.cards(n)
        return []

    def up_to_the_burn(self) -> Table:
        """Open, count, shuffle, cut, place the cut card and load: the burn is next."""
        self.open()
        self.check()
        self.shuffle()
        self.cut()
        if self.profile.has_cut_card:
            self.place()
        self.load()
        return self

    def prepare(self) -> Table:
        """Open, count, shuffle, cut, place the cut card, load and burn: bets are open."""
        self.open()
        if self.profile.inspection.opening_check:
            self.check()
        self.shuffle()
        self.cut()
        if self.profile.has_cut_card:
            self.place()
        if self.profile.card_source != "hand":
            self.load()
            self.burn()
        return self

    def bets(self, **kw: Any) -> list[Any]:
        return self.send("bets_closed", **kw)

    def round(self, n: int) -> list[Any]:
        out = self.bets()
        out += self.cards(n)
        out += self.send("round_end")
        if self.state == "return_discards":
            out += self.send("discards_returned", count=self.out)
            self.out = 0
        return out

    def play_until(self, in_shoe: int, per_round: int = 6) -> None:
        """Play whole rounds (bets are open before and after) until ``in_shoe`` cards are left."""
        assert self.in_shoe >= in_shoe
        while self.in_shoe > in_shoe:
            self.round(min(per_round, self.in_shoe - in_shoe))
