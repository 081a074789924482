"""Shuffle models: how a pack comes out of a good, a weak or a false shuffle.

The simulated devices use them as faults (a batch shuffler that only riffles, that keeps
a slug of the last shoe, a single pass of a shelf shuffler) and the shuffle-screen
benchmark measures the screen's power against them. Each takes the pack's order before
the shuffle (first card first) and a random source, and returns the order after it; the
randomness lives here, never in the controller.

- :func:`riffle` — the Gilbert–Shannon–Reeds model (Gilbert 1955, Reeds 1981; Bayer &
  Diaconis 1992): cut binomially, then drop cards from each packet with chance
  proportional to its size.
- :func:`shelf_pass` — one pass of a shelf shuffler (Diaconis, Fulman & Holmes 2013): each
  card in turn goes to a uniformly chosen shelf, on its top or its bottom with chance 1/2;
  the shelves are then unloaded one after the other.
- :func:`with_slug` — a false shuffle: a fair shuffle except that ``length`` consecutive
  cards of the previous order stay together, in their order, somewhere in the pack.
- :func:`cut` — a cut (a rotation), which is all an "unshuffled" pack gets.
- :func:`collected` — a shoe's discards as a pile: each round's hands picked up whole,
  right to left, one on another (002 §2 3.6), rounds stacked in order, then the cards
  never read.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def cut(order: Sequence[T], rng: random.Random, offset: int | None = None) -> list[T]:
    n = len(order)
    k = rng.randrange(n) if offset is None else offset % max(1, n)
    return list(order[k:]) + list(order[:k])


def riffle(order: Sequence[T], rng: random.Random, times: int = 1) -> list[T]:
    """``times`` GSR riffle shuffles."""
    cards = list(order)
    n = len(cards)
    for _ in range(times):
        k = sum(rng.getrandbits(1) for _ in range(n))  # Binomial(n, 1/2)
        left, right = cards[:k], cards[k:]
        i = j = 0
        out: list[T] = []
        a, b = len(left), len(right)
        while a or b:
            if rng.random() * (a + b) < a:
                out.append(left[i])
                i += 1
                a -= 1
            else:
                out.append(right[j])
                j += 1
                b -= 1
        cards = out
    return cards


def shelf_pass(order: Sequence[T], rng: random.Random, shelves: int = 10) -> list[T]:
    """One pass of a ``shelves``-shelf shuffler (DFH 2013)."""
    tops: list[list[T]] = [[] for _ in range(shelves)]
    bottoms: list[list[T]] = [[] for _ in range(shelves)]
    for c in order:
        s = rng.randrange(shelves)
        (tops if rng.getrandbits(1) else bottoms)[s].append(c)
    out: list[T] = []
    for s in range(shelves):
        out.extend(reversed(tops[s]))  # each card put on top covers the ones before it
        out.extend(bottoms[s])
    return out


def with_slug(previous: Sequence[T], rng: random.Random, length: int,
              start: int | None = None, within: int | None = None) -> list[T]:
    """A fair shuffle of ``previous`` except a slug of ``length`` consecutive cards of it
    (from ``start``, default anywhere), kept in order, at a random place among the first
    ``within`` cards of the pack (default: anywhere) — a slug meant to be dealt lies in
    front of the cut card."""
    n = len(previous)
    length = max(0, min(length, n))
    s = rng.randrange(n - length + 1) if start is None else max(0, min(start, n - length))
    slug = list(previous[s:s + length])
    rest = list(previous[:s]) + list(previous[s + length:])
    rng.shuffle(rest)
    room = len(rest) if within is None else max(0, min(len(rest), within - length))
    at = rng.randrange(room + 1)
    return rest[:at] + slug + rest[at:]


def place_slug(order: Sequence[T], slug: Sequence[T], at: int) -> list[T]:
    """``order`` with ``slug`` from position ``at`` (0-based), each slug card swapped in
    from where that card was (a card of the same face), so every other card stays in
    place. Returns ``order`` unchanged if it does not hold the slug's cards."""
    out = list(order)
    at = max(0, min(at, len(out) - len(slug)))
    if Counter(slug) - Counter(out):
        return out
    for j, card in enumerate(slug):
        t = at + j
        if out[t] == card:
            continue
        i = next((i for i in range(len(out)) if out[i] == card and not at <= i < t + 1
                  and not (t < i < at + len(slug) and out[i] == slug[i - at])), None)
        if i is None:
            i = next(i for i in range(t + 1, len(out)) if out[i] == card)
        out[i], out[t] = out[t], out[i]
    return out


def collected(rounds: Sequence[Sequence[T]], hands: Sequence[Sequence[int]],
              unread: Sequence[T], within: str = "dealt",
              rng: random.Random | None = None) -> list[T]:
    """The discards of a shoe as one pack, collected as the live guide has it (002 §2 3.6,
    §3 3.6): per round, the cards no hand holds (burns) first, then the hands from right
    to left — the reverse of the order they were first dealt to — each hand whole, its
    cards in the order dealt (spread, so that it can be laid out again); the rounds in
    the order played, then the cards never read. ``hands[i][j]``: the hand of round i's
    card j (-1: none).

    ``within``: how each hand's cards lie — ``dealt``; ``reversed`` (the hand picked up
    the other way up: the guide does not say which); ``shuffled`` (in no order, with
    ``rng``: a dealer who does not keep the hand, against the guide)."""
    out: list[T] = []
    for cards, of in zip(rounds, hands, strict=True):
        by_hand: dict[int, list[T]] = {}
        for card, h in zip(cards, of, strict=True):
            by_hand.setdefault(h, []).append(card)
        out.extend(by_hand.pop(-1, []))
        for h in sorted(by_hand, reverse=True):
            hand = by_hand[h]
            if within == "reversed":
                hand.reverse()
            elif within == "shuffled":
                if rng is None:
                    raise ValueError("collected(within='shuffled') needs rng")
                rng.shuffle(hand)
            elif within != "dealt":
                raise ValueError(f"within: {within!r} (dealt, reversed or shuffled)")
            out.extend(hand)
    out.extend(unread)
    return out


def rest_of(pack: Sequence[T], dealt: Sequence[T]) -> list[T]:
    """The cards of ``pack`` not in ``dealt`` (as multisets), in pack order."""
    left = Counter(pack) - Counter(dealt)
    out = []
    for c in pack:
        if left[c] > 0:
            out.append(c)
            left[c] -= 1
    return out
