"""Casino stud poker rounds (003 §4): five cards each, one at a time, to every player
(P1 … Pn from the dealer's left) and then the dealer, whose fifth card is dealt face up;
then the dealer counts the stub: 52 − 5 × (players + 1).

Every card carries ``to`` (the hand it went to), as a table that knows where cards land
reports it. The dealer's fifth card is face up *by the rule*, so it is not marked
``exposed`` (that flag is for a card shown by mistake).
"""

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
        order = [f"P{i}" for i in range(1, self.players + 1)] + ["dealer"]
        for _ in range(5):
            for hand in order:
                yield from self.day.draw("deal", to=hand)
        yield self.day.step("stub_count", {"type": "stub_count", "count": self.day.remaining})


register("stud-poker", StudRounds)
