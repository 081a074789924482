"""The two sequential tests and their thresholds.

Under a fair shuffle, whatever came before, the next card is equally likely to be any
card still in the shoe. So the chance that it *continues* the reference from the last
card(s) is exactly ``k / n``: ``k`` the cards still to come whose face is related, ``n``
the cards still to come (:mod:`controller.screening.faces`). Each test turns that exact
chance into a likelihood ratio against an alternative, and multiplies card by card.
Under the fair shuffle each product is a non-negative martingale of mean 1, so by Ville's
inequality it ever reaches ``1/α`` with chance at most ``α`` — at any card, checked at
every card, with no correction for looking often. That is what lets a test fire after
eight cards of an unshuffled pack and still keep its false-alarm rate for the whole shoe.

- **run** (successor runs: an unshuffled or cut pack, a slug): Page's CUSUM of the
  log-likelihood ratio of "the next card continues the last one with chance
  :data:`RUN_Q`" against the exact chance. It forgets what went before whenever the
  evidence falls to zero, so a slug anywhere in the shoe counts from its first card. An
  alarm means some stretch ``s..t`` of the shoe has a likelihood ratio of at least
  ``e^h``; a union bound over the ``n`` possible starts gives ``P ≤ n e^{-h}``, so
  ``h = ln(n / α)``.
- **continuation** (riffles, weak shuffles): the next card continues *one of the last
  w cards* (a riffle deals interleaved rising sequences, Bayer & Diaconis 1992: the next
  card is the successor of the last card of its packet, which is among the last few
  cards). The alternative's chance ``q`` is unknown, so the ratio is mixed over a uniform
  prior on ``q`` (a mixture of martingales is a martingale): the statistic after ``H``
  continuations and ``M`` breaks is ``ln B(1+H, 1+M) − Σ ln(chance of what happened)``,
  and the threshold is ``ln(1/α)``.

All logarithms are of integers and come from a table built once, so a step is a few
additions; the same inputs give the same decisions on replay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

RUN_Q = 0.9
"""The run test's alternative: the next card continues the reference 9 times in 10."""

PRIOR_A = 1.0
PRIOR_B = 1.0
"""The continuation test's prior on ``q``: Beta(1, 1), uniform."""

MAX_WINDOW = 8


@cache
def log_table(n: int) -> list[float]:
    """``ln k`` for k = 0..n (``ln 0`` is never used: a step with chance 0 or 1 is skipped).
    Built once per pack size per process (a table day's engine must not pay for it)."""
    return [-math.inf] + [math.log(k) for k in range(1, n + 1)]


@cache
def beta_tables(n: int, a: float = PRIOR_A, b: float = PRIOR_B
                ) -> tuple[list[float], list[float], list[float], float]:
    """``lgamma(a+i)``, ``lgamma(b+j)``, ``lgamma(a+b+m)`` for 0..n and ``ln B(a, b)``."""
    ga = [math.lgamma(a + i) for i in range(n + 1)]
    gb = [math.lgamma(b + i) for i in range(n + 1)]
    gab = [math.lgamma(a + b + i) for i in range(n + 1)]
    return ga, gb, gab, math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


@dataclass(frozen=True)
class Thresholds:
    """The false-alarm budget of one shoe, split evenly over the tests that run."""

    alpha: float  # per shoe, whole screen
    tests: int  # (test, reference) pairs that may run in a shoe
    pack: int  # cards in the pack: the most steps a shoe can have

    @property
    def each(self) -> float:
        return self.alpha / self.tests

    @property
    def run(self) -> float:
        """CUSUM threshold ``h = ln(n / α_i)``: n possible starts of the run."""
        return math.log(self.pack / self.each)

    @property
    def continuation(self) -> float:
        """Mixture-SPRT threshold ``ln(1 / α_i)`` (Ville's inequality); the shelf test's
        too."""
        return math.log(1 / self.each)


def window_for(lag_one_chance: float, most: int = MAX_WINDOW, target: float = 0.2) -> int:
    """How many of the last cards the continuation test looks back over for a reference
    whose lag-one chance is ``lag_one_chance``: as many as keep the chance of a
    continuation by luck near ``target`` (a sparse relation, the new-deck order, looks
    back far; the piles of a blackjack shoe, dense already, only one card)."""
    if lag_one_chance <= 0:
        return most
    return max(1, min(most, int(target / lag_one_chance)))


SHELF_STATES = 17
"""The shelf test's filter: the chance that the current stream runs up (new-deck order
forwards), in 17 steps of 1/16."""
SHELF_ELSEWHERE = 0.15
"""The shelf test's alternative: a card leaves its stream (a new stream, a new shelf, the
cut) 15 times in 100, to a face anywhere."""


@cache
def shelf_tables(shelves: int = 10) -> tuple[tuple[tuple[float, ...], ...],
                                             tuple[tuple[int, ...], ...], int]:
    """The shelf test's predictor (Diaconis, Fulman & Holmes 2013: one pass of a shelf
    shuffler leaves the pack as ``2 × shelves`` streams of the input, each taken down or up
    a shelf's pile, consecutive cards of a stream a geometric gap of mean ``2 × shelves``
    apart in the input). As faces: the next card of an up stream is ``gap mod 52`` faces on
    from the last, of a down stream ``gap mod 52`` back.

    Per filter state ``k`` (the chance the stream runs up is ``k / 16``) and face
    difference ``d`` (0…51, the next face less the last, mod 52): ``ln q_k(d)``, the
    log-chance of that difference under the alternative — the two directions mixed by the
    state, and a share :data:`SHELF_ELSEWHERE` anywhere — and the next state (Bayes's rule
    on the direction, then a stream's end every ``2 × shelves`` cards or so, rounded to the
    nearest step). For every ``k`` the chances ``q_k`` over the 52 faces sum to 1: that is
    all the test's false-alarm bound needs (docs/shuffle-screening.md)."""
    mean = 2.0 * shelves
    lam = 1.0 / mean
    gaps = [0.0] * 52
    for gap in range(1, 52 * 12):
        gaps[gap % 52] += lam * (1 - lam) ** (gap - 1)
    total = sum(gaps)
    up = [g / total for g in gaps]
    switch = 1.0 / (mean + 1.0)
    steps = SHELF_STATES - 1
    lq: list[tuple[float, ...]] = []
    nxt: list[tuple[int, ...]] = []
    for k in range(SHELF_STATES):
        u = k / steps
        row_q: list[float] = []
        row_n: list[int] = []
        for d in range(52):
            eu, ed = up[d], up[(-d) % 52]
            mix = u * eu + (1 - u) * ed
            row_q.append(math.log((1 - SHELF_ELSEWHERE) * mix + SHELF_ELSEWHERE / 52))
            post = switch + (u * eu / mix) * (1 - 2 * switch)
            row_n.append(round(post * steps))
        lq.append(tuple(row_q))
        nxt.append(tuple(row_n))
    return tuple(lq), tuple(nxt), steps // 2
