"""Casino stud poker rounds (003 §4): five cards each to every player and the dealer,
then the dealer counts the stub: 52 − 5 × (players + 1)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from simulators.dealer import Step
from simulators.games import RoundDealer, register


class StudRounds(RoundDealer):
    def bets(self) -> dict[str, Any]:
        self.players = self.rng.randint(1, 7)
        return {"type": "bets_closed", "players": self.players}

    def deal(self) -> Iterator[Step]:
        for _ in range(5 * (self.players + 1)):
            yield from self.day.draw("deal")
        yield self.day.step("stub_count", {"type": "stub_count", "count": self.day.remaining})


register("stud-poker", StudRounds)
