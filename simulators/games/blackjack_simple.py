"""Placeholder-free blackjack bets: boxes in play, and a plausible number of cards.

The rules-following blackjack dealer replaces :class:`BlackjackCounts` when the
blackjack referee lands; until then rounds carry realistic ``boxes`` and card
counts so the procedure checks see realistic shoes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from simulators.dealer import Step
from simulators.games import RoundDealer, register


class BlackjackCounts(RoundDealer):
    def bets(self) -> dict[str, Any]:
        n = self.rng.randint(1, 7)
        self.boxes = sorted(self.rng.sample(range(1, 8), n))
        return {"type": "bets_closed", "boxes": self.boxes}

    def deal(self) -> Iterator[Step]:
        boxes = len(self.boxes)
        n = min(2 * boxes + 1 + self.rng.randint(1, boxes + 3), self.day.remaining)
        for _ in range(n):
            yield from self.day.draw("deal")


register("blackjack", BlackjackCounts)
