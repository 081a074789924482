"""Rising sequences after riffle shuffles: the exact law (Bayer & Diaconis 1992).

A *rising sequence* of an arrangement is a maximal run of consecutive card values
1, 2, 3, … appearing in increasing positions. A riffle shuffle of an ordered deck leaves
at most two, k riffles at most 2^k: the cards of each packet keep their order, so the
next card dealt tends to continue one of the few sequences in progress. That is the
pattern the screen's continuation test looks for (controller/screening/sequential.py).

Bayer and Diaconis proved that after k Gilbert–Shannon–Reeds riffles of n cards an
arrangement with r rising sequences has chance ``C(2^k + n − r, n) / 2^(k n)``, and the
number of arrangements with r rising sequences is the Eulerian number ``A(n, r)``. From
these the total variation distance to the uniform law is exact; for n = 52 it is their
Table 1 (1.000 1.000 1.000 1.000 0.924 0.614 0.334 0.167 0.085 0.043 for k = 1…10),
which tests/test_shuffle_screen.py checks. Pure integer and rational arithmetic.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache
from math import comb, factorial


@cache
def eulerian(n: int) -> tuple[int, ...]:
    """``A(n, r)`` for r = 1..n (index r − 1): arrangements of n cards with r rising
    sequences (r − 1 descents of the inverse)."""
    row = [1]
    for m in range(2, n + 1):
        prev = row
        row = [0] * m
        for d in range(m):  # d descents
            left = (d + 1) * prev[d] if d < m - 1 else 0
            right = (m - d) * prev[d - 1] if d >= 1 else 0
            row[d] = left + right
    return tuple(row)


def chance(n: int, k: int, r: int) -> Fraction:
    """Chance of one given arrangement with ``r`` rising sequences after ``k`` riffles."""
    a = 2 ** k
    return Fraction(comb(a + n - r, n), a ** n)


def rising_law(n: int, k: int) -> list[Fraction]:
    """Chance that ``k`` riffles of n ordered cards leave r rising sequences (index r−1)."""
    return [a * chance(n, k, r) for r, a in enumerate(eulerian(n), 1)]


def total_variation(n: int, k: int) -> Fraction:
    """Exact total variation distance between k riffles of n cards and the uniform law."""
    uniform = Fraction(1, factorial(n))
    return sum((a * (chance(n, k, r) - uniform) for r, a in enumerate(eulerian(n), 1)
                if chance(n, k, r) > uniform), Fraction(0))


def rising_sequences(order: list[int]) -> int:
    """Rising sequences of an arrangement of 0..n−1 (cards by their original position)."""
    where = {card: i for i, card in enumerate(order)}
    return 1 + sum(1 for c in range(1, len(order)) if where[c] < where[c - 1])
