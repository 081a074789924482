"""How the simulated dealer deals one round, per game.

A *round dealer* turns "bets are closed" into the input events of one correct
round: the ``bets_closed`` event, then cards (drawn through
:meth:`simulators.dealer.TableDay.draw`, which also emits the cut card when it
is next in the shoe) and the dealer's ``action`` records. ``round_end`` is
added by the table day. Each game registers its dealer here; a game without
one gets :class:`SimpleRounds`, which only deals a plausible number of cards.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulators.dealer import Step, TableDay


class RoundDealer(ABC):
    """Base: override :meth:`bets` and :meth:`deal`."""

    def __init__(self, day: TableDay) -> None:
        self.day = day
        self.rng = day.rng

    def bets(self) -> dict[str, Any]:
        return {"type": "bets_closed"}

    @abstractmethod
    def deal(self) -> Iterator[Step]:
        """The round's cards (through ``self.day.draw``) and the dealer's action records."""

    def hands(self) -> list[int] | None:
        """After :meth:`deal`: the hand each card it dealt lies in (``Step.hands``), or
        None where the game does not tell its hands apart."""
        return None


class SimpleRounds(RoundDealer):
    """Deals 4–6 cards a round (no game rules): the fallback for games without a dealer."""

    def deal(self) -> Iterator[Step]:
        n = min(self.rng.choice((4, 4, 5, 5, 6)), self.day.remaining)
        for _ in range(n):
            yield from self.day.draw("deal")


ROUND_DEALERS: dict[str, Callable[[TableDay], RoundDealer]] = {}


def register(game: str, factory: Callable[[TableDay], RoundDealer]) -> None:
    ROUND_DEALERS[game] = factory


def round_dealer_for(day: TableDay) -> RoundDealer:
    _load_builtin()
    return ROUND_DEALERS.get(day.profile.game, SimpleRounds)(day)


@functools.cache
def _load_builtin() -> None:
    """Import the bundled game modules (each registers itself), once: listing the package's
    directory at every round's dealer took 7 s of the test suite's CPU (277,000 calls)."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
