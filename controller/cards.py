"""Playing cards: notation, packs of N decks and the value tables the rules need.

Notation is ``<rank><suit>``: ranks ``A 2 3 4 5 6 7 8 9 T J Q K`` (``10`` is
accepted for ``T``), suits ``S H D C``. Parsing is case-insensitive and the
canonical form is always upper case with ``T``, so ``"10h"`` and ``"TH"`` are
the same card.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

RANKS = "A23456789TJQK"
SUITS = "SHDC"
CARDS_PER_DECK = 52


class CardError(ValueError):
    """A token that is not a card in ``<rank><suit>`` notation; names the token."""

    def __init__(self, token: object, why: str) -> None:
        self.token = token
        self.why = why
        super().__init__(f"bad card {token!r}: {why}")


@dataclass(frozen=True, order=True, slots=True)
class Card:
    """One card. Ordering is by rank then suit, only to make listings stable.

    ``deck_index`` is its place in new-deck order (♠A…♠K, ♥A…♥K, ♦A…♦K, ♣A…♣K: 0…51; -1
    for a rank or suit outside the notation), worked out once when the card is made: the
    shuffle screen reads it for every card dealt (controller/screening). It takes no part
    in equality, ordering or hashing."""

    rank: str
    suit: str
    deck_index: int = field(init=False, repr=False, compare=False, hash=False)
    #: :attr:`pip`, worked out once (0: a rank outside the notation, whose ``pip`` raises)
    _pip: int = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        r, s = RANKS.find(self.rank), SUITS.find(self.suit)
        object.__setattr__(self, "deck_index",
                           13 * s + r if r >= 0 and s >= 0 and len(self.rank) == 1
                           and len(self.suit) == 1 else -1)
        object.__setattr__(self, "_pip", 10 if self.rank in "TJQK" else r + 1)

    def __str__(self) -> str:
        return self.rank + self.suit

    @property
    def is_ten_or_face(self) -> bool:
        return self.rank in "TJQK"

    @property
    def pip(self) -> int:
        """A=1, 2–9 face value, T/J/Q/K=10 (the common base of every value table). Read
        several times a card by the referees: worked out when the card is made."""
        return self._pip or RANKS.index(self.rank) + 1  # (0: not a rank: raises, as ever)


#: the 52 cards in new-deck order (index = ``deck_index``)
NEW_DECK: tuple[Card, ...] = tuple(Card(r, s) for s in SUITS for r in RANKS)

_PARSED: dict[str, Card] = {}  # token -> card: a shoe reads the same 52 tokens all day


def parse_card(token: object) -> Card:
    """Parse one card token; raise :class:`CardError` naming the token otherwise."""
    if type(token) is str:
        card = _PARSED.get(token)
        if card is not None:
            return card
    card = _parse_card(token)
    if type(token) is str and len(_PARSED) < 1024:  # bounded: tokens are written many ways
        _PARSED[token] = card
    return card


def _parse_card(token: object) -> Card:
    if not isinstance(token, str):
        raise CardError(token, "a card is a string such as 'AS' or '10H'")
    if not token.isascii():  # ('aſ' upper-cased to 'AS', a no-break space was stripped:
        # a card is read from ASCII letters and digits only — a review)
        raise CardError(token, "a card is written in ASCII, e.g. 'AS', 'TD', '10H'")
    text = token.strip().upper()
    if len(text) == 3 and text.startswith("10"):
        text = "T" + text[2]
    if len(text) != 2:
        raise CardError(token, "expected <rank><suit>, e.g. 'AS', 'TD', '10H'")
    rank, suit = text[0], text[1]
    if rank not in RANKS:
        raise CardError(token, f"unknown rank {rank!r} (ranks: A 2-9 T/10 J Q K)")
    if suit not in SUITS:
        raise CardError(token, f"unknown suit {suit!r} (suits: S H D C)")
    return Card(rank, suit)


def deck() -> list[Card]:
    """One standard 52-card deck, no jokers, in new-deck order (the same 52 cards every
    time: a card is a value, and making a pack's cards anew cost a simulated day a
    dataclass ``__init__`` a card)."""
    return list(NEW_DECK)


def pack(decks: int) -> list[Card]:
    """A pack of ``decks`` standard decks (52 × decks cards)."""
    if decks < 1:
        raise ValueError(f"a pack needs at least one deck, not {decks}")
    return deck() * decks


def composition(cards: Iterable[Card]) -> Counter[Card]:
    return Counter(cards)


def baccarat_value(card: Card) -> int:
    """Baccarat / chemin de fer: A=1, 2–9 face value, T/J/Q/K=0 (001 BP §10)."""
    return card.pip % 10


def blackjack_value(card: Card) -> int:
    """Blackjack hard value: A=1 (counted 11 by the hand total when it helps), T/J/Q/K=10."""
    return card.pip


def blackjack_total(cards: Iterable[Card]) -> tuple[int, bool]:
    """Best blackjack total and whether it is soft (an ace counted as 11)."""
    total = 0
    aces = 0
    for card in cards:
        total += card.pip
        aces += card.rank == "A"
    if aces and total + 10 <= 21:
        return total + 10, True
    return total, False


def burn_value(card: Card, ten_value: int = 10) -> int:
    """Cards to burn when burning by value (001 BP §9): A=1, 2–9 face, T/J/Q/K=``ten_value``.

    The value of 10 and the faces is a profile setting because §9 does not say it
    (PROCEDURES.md §2.8, interpretation).
    """
    return ten_value if card.is_ten_or_face else card.pip
