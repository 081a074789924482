"""Blackjack rounds played by the profile's ``[blackjack]`` rules (000 §12–15, 002 §3, 004 §3).

1–7 boxes in play (dealt left to right), the initial deal (with the dealer's hole card
and the peek on an ace where the profile has them), then every hand is played with
random but legal decisions — hit, stand, double, split, surrender where the profile
allows them — each decision the dealer records as an ``action`` event (a hand that
busts, reaches 21, doubles or is a split ace needs none), and finally the dealer draws
to 16 and stands on 17 (soft 17 as the profile says), unless every hand is already
settled. The rules here are written from the profile, independently of the referee.

Step phases: ``deal`` for the cards to the boxes and the initial deal, ``dealer_draw``
for the dealer's draws after the boxes, ``action`` for the dealer's records.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from controller.cards import Card, blackjack_total
from simulators.dealer import Step
from simulators.games import RoundDealer, register


@dataclass
class _SimHand:
    box: int
    cards: list[Card] = field(default_factory=list)
    split: bool = False
    aces: bool = False  # a split ace: one card only


class BlackjackRounds(RoundDealer):
    def bets(self) -> dict[str, Any]:
        n = self.rng.randint(1, 7)
        self.boxes = sorted(self.rng.sample(range(1, 8), n))
        return {"type": "bets_closed", "boxes": self.boxes}

    # ------------------------------------------------------------------ drawing

    def _draw(self, phase: str = "deal") -> Iterator[Step]:
        yield from self.day.draw(phase)
        self.card = self.day.last_card

    def _give(self, hand: _SimHand | None) -> Iterator[Step]:
        if self.day.remaining == 0:
            raise _ShoeEmpty
        yield from self._draw("deal" if hand is not None or self.initial else "dealer_draw")
        (self.dealer if hand is None else hand.cards).append(self.card)
        self._held.append(self._dealer_hand if hand is None else hand)

    def hands(self) -> list[int] | None:
        """Each card's hand as the round ends (a split moves a card to the new hand),
        numbered in the order the hands were first dealt to."""
        number: dict[int, int] = {}
        return [number.setdefault(id(h), len(number)) for h in self._held]

    def _act(self, action: str) -> Step:
        return self.day.step("action", {"type": "action", "action": action})

    # ------------------------------------------------------------------ the round

    def deal(self) -> Iterator[Step]:
        try:
            yield from self._round()
        except _ShoeEmpty:  # pragma: no cover - a shoe always holds more than a round
            return

    def _round(self) -> Iterator[Step]:
        rules = self.day.profile.blackjack
        assert rules is not None
        self.rules = rules
        self.dealer: list[Card] = []
        self._dealer_hand = _SimHand(0)
        self._held: list[_SimHand] = []  # per card dealt, the hand holding it
        self.initial = True
        hands = [_SimHand(b) for b in self.boxes]
        self.splits = dict.fromkeys(self.boxes, 0)
        self.ace_splits = dict.fromkeys(self.boxes, 0)
        for h in hands:
            yield from self._give(h)
        yield from self._give(None)
        for h in hands:
            yield from self._give(h)
        if rules.dealer_hole_card:
            yield from self._give(None)
        self.initial = False
        if (rules.dealer_hole_card and rules.peek == "ace" and self.dealer[0].rank == "A"
                and blackjack_total(self.dealer)[0] == 21):
            return  # the dealer peeked: blackjack, the round is over
        i = 0
        while i < len(hands):
            yield from self._play(hands, i)
            i += 1
        if not self._settled(hands):
            while self._dealer_draws():
                yield from self._give(None)

    def _dealer_draws(self) -> bool:
        total, soft = blackjack_total(self.dealer)
        return total < 17 or (total == 17 and soft and not self.rules.dealer_stands_soft_17)

    def _settled(self, hands: list[_SimHand]) -> bool:
        """Every hand bust or surrendered, or a blackjack the dealer can no longer tie."""
        for h in hands:
            total = blackjack_total(h.cards)[0]
            if h.cards == [] or total > 21:
                continue  # surrendered (cards cleared) or bust
            if len(h.cards) == 2 and total == 21 and not h.split:
                if len(self.dealer) == 1 and self.dealer[0].pip in (1, 10):
                    return False
                continue
            return False
        return True

    # ------------------------------------------------------------------ one hand

    def _pair_splittable(self, h: _SimHand) -> bool:
        r = self.rules
        if len(h.cards) != 2 or h.cards[0].pip != h.cards[1].pip:
            return False
        if self.splits[h.box] >= r.max_splits:
            return False
        return h.cards[0].rank != "A" or self.ace_splits[h.box] < r.split_aces_max

    def _may_double(self, h: _SimHand) -> bool:
        r = self.rules
        if r.double == "none" or len(h.cards) != 2 or h.aces:
            return False
        if h.split and not r.double_after_split:
            return False
        return r.double != "total-11-or-less" or blackjack_total(h.cards)[0] <= 11

    def _may_surrender(self, h: _SimHand) -> bool:
        return (self.rules.surrender == "before-third-card-not-vs-ace" and not h.split
                and len(h.cards) == 2 and self.dealer[0].rank != "A")

    def _split(self, hands: list[_SimHand], i: int) -> Iterator[Step]:
        h = hands[i]
        yield self._act("split")
        self.splits[h.box] += 1
        aces = h.cards[0].rank == "A"
        self.ace_splits[h.box] += aces
        new = _SimHand(h.box, [h.cards.pop()], split=True, aces=aces)
        h.split, h.aces = True, aces
        moved = max(i for i, held in enumerate(self._held) if held is h)
        self._held[moved] = new  # (the hand's second card starts the new hand)
        hands.insert(i + 1, new)
        if self.rules.split_second_cards == "both-first":
            yield from self._give(h)
            yield from self._give(new)

    def _play(self, hands: list[_SimHand], i: int) -> Iterator[Step]:
        rng = self.rng
        while True:
            h = hands[i]
            if len(h.cards) == 1:
                yield from self._give(h)  # a split hand's second card
            total, _soft = blackjack_total(h.cards)
            if total >= 21:
                return
            if h.aces:  # one card on a split ace; another ace may be split again
                if self._pair_splittable(h):
                    if rng.random() < 0.6:
                        yield from self._split(hands, i)
                        continue
                    # the table's decision is recorded either way (docs/dealing-blackjack.md)
                    yield self._act("stand")
                return
            if len(h.cards) == 2:
                if self._pair_splittable(h) and rng.random() < 0.5:
                    yield from self._split(hands, i)
                    continue
                if self._may_surrender(h) and total in (15, 16) and rng.random() < 0.4:
                    yield self._act("surrender")
                    h.cards.clear()
                    return
                if self._may_double(h) and rng.random() < (0.6 if total in (9, 10, 11)
                                                             else 0.1):
                    yield self._act("double")
                    yield from self._give(h)
                    return
            break
        while True:
            total, soft = blackjack_total(h.cards)
            if total >= 21:
                return
            hit = total < 12 or (total < 17 and rng.random() < 0.55) or (
                total < 19 and soft and rng.random() < 0.4) or rng.random() < 0.03
            if not hit:
                yield self._act("stand")
                return
            yield from self._give(h)


class _ShoeEmpty(Exception):
    pass


register("blackjack", BlackjackRounds)
