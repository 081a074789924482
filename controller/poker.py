"""Five-card poker hands for casino stud poker (003 §6–7): rank, compare, qualify, pay.

Pure functions, no I/O. A hand is five cards (:class:`~controller.cards.Card` or card
strings). :func:`evaluate` gives its :class:`HandValue`: a :class:`Category` (high card
… royal flush) and a tiebreak key, so two values compare with ``<`` / ``==`` exactly as
the hands rank. Suits never break a tie (003 §6α(3): equal value is a tie).

Ranks run 2 … K, A (ace high); the ace also plays low in the wheel A-2-3-4-5, the lowest
straight (high card 5). K-A-2-3-4 is not a straight.

Raise payouts (003 §7), in multiples of the raise: one pair *or less* 1, two pair 2,
three of a kind 3, straight 4, flush 5, full house 7, four of a kind 20, straight
flush 50, royal flush 100. "1 ζεύγος άσσων ή λιγότερο" (a pair of aces or less) covers a
winning high-card hand too, so high card pays 1.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from controller.cards import Card, parse_card

RANK_VALUES = {r: v for v, r in enumerate("23456789TJQKA", start=2)}
"""Card rank → poker value, ace high (14)."""

ACE, KING = 14, 13


class Category(IntEnum):
    """Hand categories, weakest first."""

    HIGH_CARD = 0
    ONE_PAIR = 1
    TWO_PAIR = 2
    THREE_OF_A_KIND = 3
    STRAIGHT = 4
    FLUSH = 5
    FULL_HOUSE = 6
    FOUR_OF_A_KIND = 7
    STRAIGHT_FLUSH = 8
    ROYAL_FLUSH = 9

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", " ")


PAYOUTS: dict[Category, int] = {
    Category.HIGH_CARD: 1,  # 003 §7α "one pair of aces or less"
    Category.ONE_PAIR: 1,  # §7α
    Category.TWO_PAIR: 2,  # §7β
    Category.THREE_OF_A_KIND: 3,  # §7γ
    Category.STRAIGHT: 4,  # §7δ
    Category.FLUSH: 5,  # §7ε
    Category.FULL_HOUSE: 7,  # §7στ
    Category.FOUR_OF_A_KIND: 20,  # §7ζ
    Category.STRAIGHT_FLUSH: 50,  # §7η
    Category.ROYAL_FLUSH: 100,  # §7θ
}
"""003 §7: a winning raise is paid this many times over."""


@dataclass(frozen=True, order=True, slots=True)
class HandValue:
    """What a five-card hand is worth. Compares as the hands rank (category, then key)."""

    category: Category
    key: tuple[int, ...]

    @property
    def name(self) -> str:
        return self.category.label

    @property
    def payout(self) -> int:
        return PAYOUTS[self.category]


def _card(c: Card | str) -> Card:
    return c if isinstance(c, Card) else parse_card(c)


def evaluate(cards: Iterable[Card | str]) -> HandValue:
    """The value of exactly five cards; ``ValueError`` for any other number."""
    hand = [_card(c) for c in cards]
    if len(hand) != 5:
        raise ValueError(f"a poker hand is five cards, not {len(hand)}")
    values = sorted((RANK_VALUES[c.rank] for c in hand), reverse=True)
    flush = len({c.suit for c in hand}) == 1
    high = _straight_high(values)
    if high is not None:
        if flush:
            cat = Category.ROYAL_FLUSH if high == ACE else Category.STRAIGHT_FLUSH
            return HandValue(cat, (high,))
        return HandValue(Category.STRAIGHT, (high,))
    counts = Counter(values)
    # ranks ordered by how many there are, then by rank: the tiebreak order of every
    # hand that is not a straight (quads before kicker, trips before pair, ...)
    order = sorted(counts, key=lambda v: (counts[v], v), reverse=True)
    shape = sorted(counts.values(), reverse=True)
    if shape[0] >= 4:  # five of a rank only with duplicate cards: read as four
        cat = Category.FOUR_OF_A_KIND
        key = (order[0], order[1] if len(order) > 1 else order[0])
        return HandValue(cat, key)
    if shape == [3, 2]:
        return HandValue(Category.FULL_HOUSE, tuple(order))
    if flush:
        return HandValue(Category.FLUSH, tuple(values))
    if shape[0] == 3:
        return HandValue(Category.THREE_OF_A_KIND, tuple(order))
    if shape == [2, 2, 1]:
        return HandValue(Category.TWO_PAIR, tuple(order))
    if shape[0] == 2:
        return HandValue(Category.ONE_PAIR, tuple(order))
    return HandValue(Category.HIGH_CARD, tuple(values))


def _straight_high(values: list[int]) -> int | None:
    """The top card of a straight (5 for the wheel), or None. ``values`` sorted high first."""
    if len(set(values)) != 5:
        return None
    if values[0] - values[4] == 4:
        return values[0]
    if values == [ACE, 5, 4, 3, 2]:
        return 5
    return None


def _value(hand: HandValue | Iterable[Card | str]) -> HandValue:
    return hand if isinstance(hand, HandValue) else evaluate(hand)


def compare(a: HandValue | Iterable[Card | str], b: HandValue | Iterable[Card | str]) -> int:
    """1 if ``a`` beats ``b``, -1 if ``b`` beats ``a``, 0 for a tie (suits never count)."""
    va, vb = _value(a), _value(b)
    return (va > vb) - (va < vb)


def dealer_qualifies(hand: HandValue | Iterable[Card | str], rule: str = "ace-king") -> bool:
    """003 §6α: the dealer plays with ace and king or better (any pair or better, or a
    high-card hand whose two top cards are an ace and a king)."""
    if rule != "ace-king":
        raise ValueError(f"unknown qualification rule {rule!r}")
    v = _value(hand)
    return v.category > Category.HIGH_CARD or v.key[:2] == (ACE, KING)


def payout(category: Category) -> int:
    """003 §7: how many times a winning raise is paid for ``category``."""
    return PAYOUTS[category]


@dataclass(frozen=True, slots=True)
class Settlement:
    """One player's result against the dealer, in units of the ante, assuming a raise.

    ``outcome``: ``win``, ``lose``, ``tie`` (both bets stand), or ``no-qualify`` (the dealer
    does not qualify: the ante is paid even money, the raise neither paid nor lost, §6β).
    ``payout`` is the §7 multiple applied to the raise (wins only).
    """

    outcome: str
    ante: int
    raise_: int
    payout: int | None = None

    def to_record(self) -> dict[str, object]:
        out: dict[str, object] = {"outcome": self.outcome, "ante": self.ante,
                                  "raise": self.raise_}
        if self.payout is not None:
            out["payout"] = self.payout
        return out


def settle(player: HandValue | Iterable[Card | str], dealer: HandValue | Iterable[Card | str],
           raise_multiple: int = 2, rule: str = "ace-king") -> Settlement:
    """003 §6: a player who raised (raise = ``raise_multiple`` × ante) against the dealer.

    Dealer qualifies: a win pays the ante 1:1 and the raise ``PAYOUTS[category]`` times; a
    loss loses both; a tie returns both. Dealer does not qualify: the ante is paid 1:1 and
    the raise is returned, whatever the player holds.
    """
    vp, vd = _value(player), _value(dealer)
    if not dealer_qualifies(vd, rule):
        return Settlement("no-qualify", 1, 0)
    result = compare(vp, vd)
    if result > 0:
        times = PAYOUTS[vp.category]
        return Settlement("win", 1, raise_multiple * times, times)
    if result < 0:
        return Settlement("lose", -1, -raise_multiple)
    return Settlement("tie", 0, 0)
