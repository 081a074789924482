"""Reference orders: the order the pack was in before the shuffle, as a relation on faces.

The screen asks of each dealt card "does it *continue* the reference order from the card
(or cards) just dealt?". With twins that question is about faces: face ``g`` continues
face ``f`` when some card of face ``g`` lies next to some card of face ``f`` in the
reference. A :class:`Reference` holds, for each face, the mask of the faces related to it
(:mod:`controller.screening.faces`); the statistics count, exactly, how many of the cards
still to come are related, so the chance of a continuation under a fair shuffle is known
card by card whatever the twins.

Two references exist:

- **new-deck order** — after a composition check the decks lie in suit and rank order
  (the live guide has every deck spread "by suit and sequence", 002 §2 3.1.2; new decks
  come so). Face ``f``'s neighbours are the faces before and after it (either direction:
  a pack can be turned over), cyclically (the last card of one deck touches the first of
  the next). The audit log keeps a check's cards sorted, so this order is the
  composition's, never the read order.
- **previous shoe's discards** — the cards dealt in the last shoe, collected round by
  round (002 §2 3.6, §3 3.6: right to left, one on top of the other, so hands can be laid
  out again). How a round's cards lie in its pile depends on the dealer's hand and the
  direction of collection, so a round is a **pile**: any two of its cards are neighbours,
  in either order. Burned cards join the pile of the round they precede. The cards
  never read (behind the cut card) can be anywhere: they relate to nothing.

  With twins, "the piles holding a 7♥" are up to eight; once a run has gone on, the
  piles it can be in narrow to those holding every card of it (the screen tracks that
  set), so a run through one pile is judged against that pile's faces only.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Literal

from mypy_extensions import mypyc_attr

from controller.screening.faces import FACES, FIELD, face_card, mask_of

NEW_DECK = "new-deck"
PREVIOUS_SHOE = "previous-shoe"


@mypyc_attr(native_class=False)  # (compiled: a frozen dataclass pickles as Python's)
@dataclass(frozen=True)
class Reference:
    """One reference order: its kind, what it is (for the evidence), and its relation.

    New-deck order: ``related`` holds, per face, the count mask of its two neighbours.
    Previous shoe: ``piles_of`` holds, per face, the bitmask of the piles (rounds) with a
    card of it, and ``piles`` the faces of each pile as dealt (``pile_faces52``: per pile
    its faces as a plain 52-bit set, bit f = face f, built when first asked for); a card
    continues a run through piles P if its face is in one of them. The set may hold the
    card's own face (a twin in the same round): any set fixed before the card is read is
    a valid test, so nothing is excluded."""

    kind: str
    description: str
    related: tuple[int, ...]
    details: dict[str, object] = field(default_factory=dict)
    piles_of: tuple[int, ...] = ()
    piles: tuple[Sequence[int], ...] = ()
    #: per pile, its faces as a 52-bit set (made with ``piles``, by :func:`pile_reference`)
    pile_faces52: tuple[int, ...] = ()

    @property
    def has_piles(self) -> bool:
        return bool(self.piles)

    def faces52_of(self, piles: int) -> int:
        """The faces (52-bit set) of a set of piles (a bitmask over pile numbers)."""
        out = 0
        pile_faces = self.pile_faces52
        piles &= (1 << len(pile_faces)) - 1  # "the pile after the last" is none
        while piles:
            low = piles & -piles
            out |= pile_faces[low.bit_length() - 1]
            piles ^= low
        return out

    def faces_of(self, piles: int) -> int:
        """The same as a count mask (:mod:`controller.screening.faces`)."""
        return mask_of(members(self.faces52_of(piles)))

    def lag_one_chance(self) -> float:
        """The chance, under a fair shuffle, that a card continues the card before it once
        the run has found its place (one pile; for new-deck order, the two neighbours):
        how sparse the relation is."""
        if self.pile_faces52:
            sizes = [m.bit_count() for m in self.pile_faces52]
        else:
            sizes = [sum(1 for g in range(FACES) if m & FIELD[g]) for m in self.related]
        return sum(sizes) / len(sizes) / FACES if sizes else 0.0


@cache
def new_deck_reference(source: str = "composition check") -> Reference:
    related = tuple(FIELD[(f - 1) % FACES] | FIELD[(f + 1) % FACES] for f in range(FACES))
    return Reference(NEW_DECK, f"new-deck order ({source})", related,
                     {"order": "new-deck", "after": source})


def pile_reference(piles: Sequence[Sequence[int]], pack: int, shoe: int,
                   unit: str = "round") -> Reference:
    """The previous shoe's discards: ``piles`` are the faces of each pile (a round's, burns
    included, or a hand's: ``unit``), in the order collected; ``pack`` the pack's size
    (the rest were never read)."""
    listed: list[list[int]] = []  # (lists: compiled, read without iterators)
    for p in piles:
        if p:
            listed.append(p if isinstance(p, list) else list(p))
    piles_of, pile_faces, read = _relation(listed)
    rounds = len(listed)
    description = (f"shoe {shoe}'s discards: {rounds} {unit} pile(s), {read} card(s) read, "
                   f"{max(0, pack - read)} never read")
    details: dict[str, object] = {"order": "previous-shoe", "shoe": shoe, "piles": rounds,
                                  "read": read, "unread": max(0, pack - read)}
    if unit != "round":  # (a log written before hand piles replays with its evidence)
        details["pile"] = unit
    return Reference(PREVIOUS_SHOE, description, (), details, piles_of, tuple(listed),
                     pile_faces)


def _relation(kept: list[list[int]]) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """The one pass over the cards (a shoe's start pays it) of non-empty piles: per face
    the bitmask of the piles holding it, per pile its faces (a 52-bit set), and the cards
    read."""
    # per face the piles holding it, listed, then as one bitmask (a long integer: set
    # once, not once a card); per pile its faces (a 52-bit set)
    at: list[list[int]] = [[] for _ in range(FACES)]
    pile_faces: list[int] = []
    read = 0
    for i in range(len(kept)):
        pile = kept[i]
        faces = 0
        for j in range(len(pile)):
            f = pile[j]
            if not faces >> f & 1:  # (a twin in the same pile: the pile once)
                faces |= 1 << f
                at[f].append(i)
        pile_faces.append(faces)
        read += len(pile)
    piles_of: list[int] = []
    for f in range(FACES):
        mask = 0  # (a long integer: built a machine word at a time, not a pile at a time)
        word = base = 0
        for i in at[f]:
            if i - base >= 60:
                mask |= word << base
                base = i - i % 60
                word = 0
            word |= 1 << (i - base)
        piles_of.append(mask | word << base)
    return tuple(piles_of), tuple(pile_faces), read


HandOrder = Literal["pile", "dealt", "reversed", "either", "all"]
"""A profile's ``[shuffle_screen] hand_order``: one of :data:`HAND_ORDERS`' keys."""

HAND_ORDERS: dict[HandOrder, tuple[str, ...]] = {
    "pile": ("pile",), "dealt": ("dealt",), "reversed": ("reversed",),
    "either": ("dealt", "reversed"), "all": ("pile", "dealt", "reversed"),
}
"""``[shuffle_screen] hand_order``: the orders in which the packet test holds each hand's
cards in the last shoe's discards (``pile``: in no known order, the hand a pile)."""


def ordered_reference(piles: Sequence[Sequence[int]], hand_piles: Collection[int],
                      order: str, pack: int, shoe: int) -> Reference:
    """The previous shoe's discards with each hand's cards in order: the hand piles
    (``hand_piles``: their numbers in ``piles``) as one pile a card, in the order dealt
    (``order`` "dealt") or its reverse ("reversed"); the other piles (burns, a round the
    referee did not split) as they are. A hand is collected so that it can be laid out
    again (002 §3 3.6): its cards keep their order, but which way up the guide does not
    say, so a profile names one or both (:data:`HAND_ORDERS`)."""
    out: list[list[int]] = []
    dealt = order == "dealt"
    for i in range(len(piles)):
        pile = piles[i]
        if not pile:
            continue
        if i in hand_piles:
            n = len(pile)
            for j in range(n):
                out.append([pile[j if dealt else n - 1 - j]])
        else:
            out.append(pile if isinstance(pile, list) else list(pile))
    piles_of, pile_faces, read = _relation(out)
    unread = max(0, pack - read)
    description = (f"shoe {shoe}'s discards: {read} card(s) read, each hand's in the order "
                   f"{order}, {unread} never read")
    details: dict[str, object] = {"order": "previous-shoe", "shoe": shoe, "piles": len(out),
                                  "read": read, "unread": unread, "pile": "hand",
                                  "hand_order": order}
    return Reference(PREVIOUS_SHOE, description, (), details, piles_of, tuple(out),
                     pile_faces)


def piles_beside(piles: int) -> int:
    """The piles next to a set of piles (either direction), not the set itself."""
    return ((piles << 1) | (piles >> 1)) & ~piles


def members(face_set: int) -> list[int]:
    """The faces of a 52-bit face set."""
    return [f for f in range(FACES) if face_set >> f & 1] if face_set.bit_count() > 12 else \
        _few(face_set)


def _few(face_set: int) -> list[int]:
    out = []
    while face_set:
        low = face_set & -face_set
        out.append(low.bit_length() - 1)
        face_set ^= low
    return out


def related_mask(ref: Reference, face: int) -> int:
    """The count mask of the faces a card of ``face`` continues from (new-deck order: its
    neighbours; piles: every face of the piles holding it)."""
    if ref.related:
        return ref.related[face]
    return ref.faces_of(ref.piles_of[face])


def faces_text(faces: Sequence[int]) -> list[str]:
    return [str(face_card(f)) for f in faces]
