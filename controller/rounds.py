"""The round referee: the seam where game-specific dealing rules plug into the engine.

The procedure engine decides *when* cards may leave the shoe; a referee decides
*where each card goes* inside a round (baccarat tableau, blackjack hands, stud
poker counts). The engine calls the referee between ``bets_closed`` and
``round_end``; the referee returns outputs (notes, deviations) and never
changes the procedure state. Referees are pure, like the engine.

:class:`CardLedger` is the base referee: it records every card of a round in
dealing order and writes them out at ``round_end`` so a round can be laid out
again in a dispute (002 §2 3.6). Game referees extend it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from mypy_extensions import mypyc_attr

from controller.deviations import Deviation, DeviationCode
from controller.events import BetsClosed, CardDrawn
from controller.outputs import Note, Output
from controller.profiles import Profile


class DeviationFactory(Protocol):
    """``make(code, message, **evidence) -> Deviation``, bound to the table's profile;
    ``code`` is one of :data:`~controller.deviations.DeviationCode`, its rule the profile's
    section the catalog names for it."""

    def __call__(self, code: DeviationCode, message: str, **evidence: Any) -> Deviation: ...


class DealtCard(NamedTuple):
    """One card of a round as the referee laid it (a named tuple: one is made for every
    card dealt, at a third of a frozen dataclass's cost)."""

    card: str
    to: str  # "round" for the base ledger; hand names in game referees
    why: str  # "deal", "exposed", "burn", ...


# compiled (controller/native.py): pickled and copied as in Python (engine snapshots);
# allow_interpreted_subclasses works round mypyc 2.4, whose serializable classes skip
# their __init__ when made from Python code
@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class CardLedger:
    """Records the cards of one round in order; knows nothing of the game's hands."""

    def __init__(self, profile: Profile, make: DeviationFactory) -> None:
        self.profile = profile
        self.make = make
        self.round_no = 0
        self.cards: list[DealtCard] = []
        self.bets: BetsClosed | None = None
        #: cards in the pack in play: the table's decks (``table_open``) as the engine sets
        #: them (:func:`referee_for`), even where the profile wants another number
        #: (``DECK_COUNT``, flagged once at the opening: the rounds are judged on the pack
        #: the table really deals from)
        self.pack = 52 * profile.decks.max

    def begin(self, round_no: int, bets: BetsClosed) -> list[Output]:
        self.round_no = round_no
        self.bets = bets
        self.cards = []
        return []

    def card(self, event: CardDrawn) -> list[Output]:
        """A card of this round left the shoe (``event.card``, ``.exposed``, ``.unrequested``,
        ``.to``)."""
        why = "exposed" if event.exposed else "deal"
        self.cards.append(DealtCard(str(event.card), event.to or "round", why))
        return []

    def action(self, action: str) -> list[Output]:
        return []

    def stub_count(self, count: int) -> list[Output]:
        return []

    def complete(self) -> bool:
        """Is every card of the round dealt — none is due under the game's rules, whatever
        the players do? False where the game cannot say (a ledger knows no hands): the
        engine then takes the round as still being dealt."""
        return False

    def dealing(self) -> bool:
        """Is the round's first deal certainly not over (fewer cards than any round of the
        game holds)? False where the game cannot say: a ``round_end`` now is then taken as
        this round's."""
        return False

    def end(self) -> list[Output]:
        data: dict[str, Any] = {
            "round": self.round_no,
            "cards": [{"card": c.card, "to": c.to, "why": c.why} for c in self.cards],
        }
        if self.bets is not None:
            if self.bets.boxes is not None:
                data["boxes"] = list(self.bets.boxes)
            if self.bets.players is not None:
                data["players"] = self.bets.players
        return [Note("round", f"round {self.round_no}: {len(self.cards)} cards", data)]


RefereeFactory = Callable[[Profile, DeviationFactory], CardLedger]

_REFEREES: dict[str, RefereeFactory] = {}


def register_referee(game: str, factory: RefereeFactory) -> None:
    _REFEREES[game] = factory


def referee_for(profile: Profile, make: DeviationFactory, pack: int | None = None
                ) -> CardLedger:
    """The profile's game's referee; ``pack``: the cards in the pack in play (``None``: the
    profile's most decks)."""
    import controller.games  # noqa: F401  (each game module registers its referee)

    referee = _REFEREES.get(profile.game, CardLedger)(profile, make)
    if pack is not None:
        referee.pack = pack
    return referee
