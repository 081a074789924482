"""A simulated dealer that follows a profile's procedure, as a stream of input events.

It plays a whole table day by the book — open, count, shuffle, cut, cut card,
load, burn, rounds until the cut card, last hand, reshuffle, closing count,
close — and emits the input events a card-reading shoe and the dealer console
would produce. The bench drives simulated devices with it; the tests use its
streams as "a correct procedure" and mutate them to make each mistake.

Every event is tagged with its ``phase`` (a test-only key the engine ignores is
*not* added to the event; tags live beside it in :class:`Step`), so a test can
find "the first shuffle" or "the third burn card" and change just that.

How a round is dealt is a per-game module in :mod:`simulators.games`; a game
without one gets plausible card counts only.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from controller.cards import Card, burn_value, pack, parse_card
from controller.profiles import Profile
from simulators.games import round_dealer_for


@dataclass(frozen=True)
class Step:
    """One input event and the procedure phase it belongs to (for tests and the bench)."""

    phase: str
    event: dict[str, Any]
    shoe: int = 0
    round: int = 0
    #: on a ``round_end`` step, where the game knows them: the hand each card of the round
    #: lies in as the round ends, in the order dealt (0, 1, … in the order the hands were
    #: first dealt to) — how the dealer collects them (``shuffles.collected``); not part
    #: of the event, which the table never sees
    hands: tuple[int, ...] | None = None


@dataclass
class DayPlan:
    """What kind of day to play. Defaults give a short but complete day."""

    shoes: int = 2
    rounds_per_block: int = 20  # shuffler and stud profiles: rounds per "shoe" block
    decks: int | None = None  # default: the profile's maximum
    table: str = "T1"
    start: dt.datetime = field(
        default_factory=lambda: dt.datetime(2026, 11, 21, 10, 0, tzinfo=dt.UTC))
    dealer_changes: bool = True  # change dealer mid-shoe where the profile burns for it


class TableDay:
    """Generates a correct table day for ``profile`` with a seeded shuffle."""

    def __init__(self, profile: Profile, seed: int = 0, plan: DayPlan | None = None) -> None:
        self.profile = profile
        self.rng = random.Random(seed)
        self.plan = plan or DayPlan()
        self.decks = self.plan.decks or profile.decks.max
        self._clock = self.plan.start
        self.stack: list[Card] = []
        self.shoe = 0
        self.round = 0
        # a shuffler's burns: since the discards last went back, and those the discard
        # holder keeps until the cards are withdrawn (001 BP §20δ(3), δ(6))
        self.burned_since_return: list[Card] = []
        self.in_holder: list[Card] = []

    # ------------------------------------------------------------------ helpers

    def _t(self) -> str:
        self._clock += dt.timedelta(seconds=self.rng.randint(2, 9))
        return self._clock.strftime("%Y-%m-%dT%H:%M:%SZ")

    def _step(self, phase: str, event: dict[str, Any]) -> Step:
        event = {**event, "t": self._t()}
        return Step(phase, event, self.shoe, self.round)

    def _pack_cards(self) -> list[str]:
        cards = [str(c) for c in pack(self.decks)]
        self.rng.shuffle(cards)
        return cards

    @property
    def remaining(self) -> int:
        """Cards still in the shoe (behind and in front of the cut card)."""
        return len(self.stack) - self.pos

    def peek(self) -> Card:
        return self.stack[self.pos]

    # ------------------------------------------------------------------ the day

    def steps(self) -> Iterator[Step]:
        p = self.profile
        lots = [{"id": "LOT-A", "kind": "plastic",
                 "first_use": (self.plan.start.date() - dt.timedelta(days=3)).isoformat()}]
        yield self._step("table_open", {"type": "table_open", "table": self.plan.table,
                                        "decks": self.decks, "sabot": "S-07",
                                        "deck_lots": lots})
        yield self._step("opening_check", {"type": "deck_check",
                                           "cards": self._pack_cards()})
        for shoe in range(1, self.plan.shoes + 1):
            if p.shuffle.every_round:
                for _ in range(self.plan.rounds_per_block):
                    self.shoe += 1
                    yield from self._prepare(shoe_no=self.shoe, lots_serial=shoe)
                    yield from self._round()
            else:
                self.shoe += 1
                yield from self._prepare(shoe_no=self.shoe, lots_serial=shoe)
                if p.shuffler_mode:
                    yield from self._shuffler_block()
                else:
                    yield from self._shoe_rounds()
        yield self._step("closing_check", {"type": "deck_check", "cards": self._pack_cards()})
        yield self._step("table_close", {"type": "table_close"})

    def _prepare(self, shoe_no: int, lots_serial: int) -> Iterator[Step]:
        p = self.profile
        if p.deck_lifecycle.new_cards_every_shoe and shoe_no > 1:
            lot = {"id": f"LOT-{chr(ord('A') + lots_serial - 1)}", "kind": "paper",
                   "first_use": self.plan.start.date().isoformat()}
            yield self._step("new_pack_check", {"type": "deck_check",
                                                "cards": self._pack_cards(), "deck_lots": [lot]})
        self.stack = list(map(parse_card, self._pack_cards()))
        yield self._step("shuffle", {"type": "shuffle"})
        size = len(self.stack)
        need = max(1, p.cut.min_each_side)
        offset = self.rng.randint(need, size - need)
        self.stack = self.stack[offset:] + self.stack[:offset]
        yield self._step("cut", {"type": "cut", "offset": offset})
        self.behind: int | None = None
        if p.has_cut_card:
            lo, hi = p.cut_card.window()  # type: ignore[misc]
            self.behind = self.rng.randint(lo, hi)
            yield self._step("cut_card_placed", {"type": "cut_card_placed",
                                                 "behind": self.behind})
        self.pos = 0
        self.cut_card_out = False
        if p.card_source != "hand":
            yield self._step("shoe_loaded", {"type": "shoe_loaded"})
            self.burned_since_return, self.in_holder = [], []
            yield from self._burn()

    def draw(self, phase: str = "deal", **extra: Any) -> Iterator[Step]:
        """Draw the next card, emitting the cut card first when it is next in the shoe."""
        remaining = len(self.stack) - self.pos
        if self.behind is not None and not self.cut_card_out and remaining == self.behind:
            self.cut_card_out = True
            yield self._step("cut_card", {"type": "cut_card"})
        card = self.stack[self.pos]
        self.pos += 1
        self.last_card = card
        yield self._step(phase, {"type": "card", "card": str(card), **extra})

    def _burn(self, count: int | None = None, phase: str = "burn") -> Iterator[Step]:
        mode = self.profile.burn.mode if count is None else "count"
        if mode == "none":
            return
        if mode == "by-value":
            first = self.stack[self.pos]
            count = burn_value(first, self.profile.burn.ten_value)
        elif mode == "five":
            count = 5
        for _ in range(count or 0):
            yield from self.draw(phase)
            self.burned_since_return.append(self.last_card)

    def step(self, phase: str, event: dict[str, Any]) -> Step:
        """A non-card event of a round (``action``, ``stub_count``) for the round dealers."""
        return self._step(phase, event)

    def _round(self) -> Iterator[Step]:
        self.round += 1
        dealer = round_dealer_for(self)
        yield self._step("bets_closed", dealer.bets())
        if (self.behind is not None and not self.cut_card_out and self.remaining == self.behind
                and self.profile.cut_card.first_card_of_round == "no-round"):
            # the end card is the next thing out: no further round may be dealt (001 §2)
            self.cut_card_out = True
            yield self._step("cut_card", {"type": "cut_card"})
        else:
            yield from dealer.deal()
        end = self._step("round_end", {"type": "round_end"})
        hands = dealer.hands()
        yield dataclasses.replace(end, hands=tuple(hands)) if hands is not None else end

    def _shoe_rounds(self) -> Iterator[Step]:
        p = self.profile
        changed = False
        while True:
            yield from self._round()
            if self.cut_card_out:
                return
            if (self.plan.dealer_changes and p.burn.on_dealer_change and not changed
                    and self.round % 5 == 0):
                changed = True
                yield self._step("dealer_change", {"type": "dealer_change",
                                                   "dealer": f"D{self.round}"})
                yield from self._burn(p.burn.on_dealer_change, phase="dealer_change_burn")

    def _shuffler_block(self) -> Iterator[Step]:
        p = self.profile
        for i in range(self.plan.rounds_per_block):
            yield from self._round()
            # the burns go back with the round's cards (000 §10), or stay in the discard
            # holder (the profile's [shuffler] burns_returned)
            kept = [] if p.shuffler.burns_returned else self.burned_since_return
            out = self.pos - len(kept)
            yield self._step("discards_returned", {"type": "discards_returned", "count": out})
            self.in_holder += kept
            self.burned_since_return = []
            # the returned cards go back in: deal on from a fresh permutation of the pack,
            # less the burns the discard holder keeps
            cards = self._pack_cards()
            for card in self.in_holder:
                cards.remove(str(card))
            self.stack = list(map(parse_card, cards))
            self.pos = 0
            if self.plan.dealer_changes and p.burn.on_dealer_change and i == 4:
                yield self._step("dealer_change", {"type": "dealer_change", "dealer": "D2"})
                yield from self._burn(p.burn.on_dealer_change, phase="dealer_change_burn")


def table_day(profile: Profile, seed: int = 0, plan: DayPlan | None = None) -> list[Step]:
    """A whole correct table day as a list of steps."""
    return list(TableDay(profile, seed, plan).steps())


def events_of(steps: list[Step]) -> list[dict[str, Any]]:
    return [s.event for s in steps]
