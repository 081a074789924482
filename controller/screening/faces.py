"""Faces and the packed counters the screen counts with.

A multi-deck pack has twins: the 7♥ of deck 1 cannot be told from the 7♥ of deck 5. The
screen therefore works on the 52 **faces**, indexed in new-deck order (♠A…♠K, ♥A…♥K,
♦A…♦K, ♣A…♣K, as :func:`controller.cards.deck`), and counts how many cards of each face
are still to come.

The live screen keeps them as a list of 52 counts. :class:`Remaining` also keeps them in
one Python integer, a 16-bit field per face holding its count in **unary** (count ``c``
= the low ``c`` bits of the field set): a set of faces is then a mask with whole fields
set, and "how many of the cards still to come have a face in this set" is
``(remaining & mask).bit_count()`` — what the evidence replay of a finding and the
tests use to recount a shoe exactly.
"""

from __future__ import annotations

from typing import Final

from controller.cards import NEW_DECK, RANKS, SUITS, Card

FACES: Final = 52
WIDTH = 16  # bits per face field: room for up to 16 copies of a face (12 decks at most)

#: every bit of face ``i``'s field
FIELD: tuple[int, ...] = tuple(((1 << WIDTH) - 1) << (WIDTH * i) for i in range(FACES))
#: the lowest bit of face ``i``'s field: set in a mask exactly when face ``i`` is in it
LOW: tuple[int, ...] = tuple(1 << (WIDTH * i) for i in range(FACES))

RANK_INDEX = {r: i for i, r in enumerate(RANKS)}
SUIT_OFFSET = {s: 13 * i for i, s in enumerate(SUITS)}


def face_index(card: Card) -> int:
    """The card's face in new-deck order, 0 (AS) … 51 (KC). (Two string-keyed lookups: a
    ``Card`` is a dataclass whose hash is computed in Python, several times slower.)"""
    return SUIT_OFFSET[card.suit] + RANK_INDEX[card.rank]


def face_card(index: int) -> Card:
    return NEW_DECK[index]


def mask_of(faces: object) -> int:
    """The mask of a collection of face indices."""
    out = 0
    for f in faces:  # type: ignore[attr-defined]
        out |= FIELD[f]
    return out


class Remaining:
    """How many cards of each face are still to come in the shoe, as unary fields."""

    __slots__ = ("bits", "counts", "total")

    def __init__(self, decks: int) -> None:
        if not 1 <= decks < (1 << WIDTH):
            raise ValueError(f"decks must be 1..{(1 << WIDTH) - 1}, got {decks}")
        self.counts = [decks] * FACES
        self.total = decks * FACES
        unary = (1 << decks) - 1
        bits = 0
        for i in range(FACES):
            bits |= unary << (WIDTH * i)
        self.bits = bits

    def take(self, face: int) -> bool:
        """One card of ``face`` left the shoe. False (nothing changed) when no card of that
        face was left to come: a duplicate or foreign card, which the composition checks
        report; the screen does not count it."""
        c = self.counts[face]
        if c == 0:
            return False
        c -= 1
        self.counts[face] = c
        self.bits ^= 1 << (WIDTH * face + c)
        self.total -= 1
        return True

    def among(self, mask: int) -> int:
        """Cards still to come whose face is in ``mask``."""
        return (self.bits & mask).bit_count()
