"""The current shoe's card accounting: a new shoe is a new :class:`Shoe`.

Everything the engine knows about one shoe (its preparation steps, where its cards
are, its burn, its cut card, its round referee) lives in one object, so a shoe that
ends (finished, withdrawn, the table closed) is replaced, not reset field by field.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from controller.cards import Card
from controller.events import CardDrawn, Shuffle
from controller.rounds import CardLedger


@dataclass(frozen=True, slots=True)
class Accounting:
    """Where every card of the pack is, as far as the engine can know (for display and logs)."""

    pack: int
    in_shoe: int
    dealt: int
    burned: int
    behind_cut_card: int | None
    cut_card_out: bool

    def to_record(self) -> dict[str, Any]:
        return {
            "pack": self.pack, "in_shoe": self.in_shoe, "dealt": self.dealt,
            "burned": self.burned, "behind_cut_card": self.behind_cut_card,
            "cut_card_out": self.cut_card_out,
        }


@dataclass(slots=True, eq=False)
class Shoe:
    """One shoe cycle, from its shuffle to its last card. Mutable: the engine updates it per
    event (a card taken out is a counter bumped, not a new object)."""

    pack_size: int
    referee: CardLedger
    # the steps that prepare it (a later step flags a missing one)
    active: bool = False
    shuffled: bool = False
    cut_done: bool = False
    cut_card_set: bool = False
    loaded: bool = False
    #: CUT_MISSING raised for this shoe: a cut read before its first card is that one, late
    cut_flagged: bool = False
    #: SHUFFLE_MISSING raised for this shoe: a shuffle read before its first card is that
    #: one, late (Preparation.late_shuffle)
    shuffle_flagged: bool = False
    #: dealt with no shuffle after players left (SHUFFLE_MISSING; 000 §9, 001 BP §17: the
    #: restart skipped): the cards are what was left of the last shoe, their count unknown
    unshuffled: bool = False
    #: a continuous shuffler's own shuffle read between rounds (001 BP §20γ): a cut right
    #: after it begins a new cycle, that shuffle its own
    machine_shuffle: bool = False
    #: a shuffle read during the start burn, not yet judged: the next step says what it
    #: was (Preparation._machine_shuffle; a shoe's: TableEngine._reshuffled_in_burn)
    shuffle_in_burn: Shuffle | None = None
    # its cards
    in_shoe: int = 0
    dealt: int = 0
    burned: int = 0
    rounds: int = 0
    round_cards: int = 0
    seen: Counter[Card] = field(default_factory=Counter)
    #: copies read beyond the pack's (CARD_DUPLICATE): not counted out of the shoe
    foreign_copies: int = 0
    #: the last round card's ``deck_index``, and the round and card where the same card
    #: was read twice in a row (Dealing._read_twice: with a card too many for the rules,
    #: one card read twice; None: two such pairs in the round)
    last_index: int = -2
    twin: tuple[int, Card | None] | None = None
    #: per face, the cards maybe read twice (Dealing._read_twice): slack in the count
    read_twice: Counter[Card] = field(default_factory=Counter)
    #: rounds the referee found short of a card (a draw the rule wanted, a hand's card): it
    #: may have left the shoe unread (DayState._make)
    short_rounds: set[int] = field(default_factory=set)
    #: since the discards last went back: a round short of a card, a round with a card too
    #: many (a draw where the rule stands, a card to a finished hand) — DayState._make
    unsure_since_return: tuple[bool, bool] = (False, False)
    #: the last return held a card more than was read (return_count): read before the next
    #: bets, that card is the last round's, late (TableEngine._on_card)
    returned_unread: int = 0
    out_since_return: int = 0
    burned_since_return: int = 0  # of those, burned (a profile may keep them out)
    #: of those, drawn after the burn was complete (BURN_COUNT): a burn too many, or the
    #: round's first card too early — the holder may keep them with the burns, or not
    extra_since_return: int = 0
    in_holder: int = 0  # burned cards the discard holder keeps until the withdrawal
    #: the last round's discards, still out when the next round's bets closed
    #: (DISCARDS_NOT_RETURNED then): their count as it would have gone back, and the cards,
    #: burns and extra burns out then — a return of that count during the round is theirs,
    #: late (TableEngine.late_return)
    return_owed: tuple[int, int, int, int] | None = None
    #: cards a return left out (DISCARDS_NOT_RETURNED then): they may go back with the next
    return_short: int = 0
    # its cut card and last hand
    declared_behind: int | None = None
    #: a card read with this many left (or fewer) and no cut card read came from behind
    #: the cut card's place (-1: none placed)
    implied_at: int = -1
    cut_card_out: bool = False
    next_round_last: bool = False
    after_last: bool = False
    void_round: bool = False
    # its burn (``burn_due`` None: by value, not yet drawn)
    burn_due: int | None = 0
    burn_done: int = 0
    burn_reason: str = ""
    burn_pending: bool = False
    burn_just_finished: bool = False
    change_burn_pending: int = 0
    #: cards a dealer change from the shuffle to the shoe's first round may add to its
    #: start burn: 004 §3.8 burns one card as play *continues*, and before the first round
    #: no play has begun (the start burn is still to come, under way or just done) — read
    #: either way, the start burn alone, or with the change's card after it (a review's
    #: independent dealer burned 5 after a change at the load, where 6 were required)
    change_burn_optional: int = 0
    #: cards read before this round's bets closed (``CARD_BEFORE_BETS_CLOSED``, flagged
    #: then): the first cards of the round the next ``bets_closed`` opens, given to its
    #: referee there — or that round is judged short of them (a review found a draw rule,
    #: a dealer's total or a stub count flagged after the slip). Dropped at any other step.
    early_cards: list[CardDrawn] = field(default_factory=list)
    #: of those, the ones no burn too many counted (CARD_BEFORE_BETS_CLOSED: its
    #: ``extra_since_return`` is the burn's), and as many of the round judged both ways:
    #: set aside, the holder may keep them (Dealing._round_ended)
    early_unburned: int = 0
    early_count: int = 0
    #: since the discards last went back, such cards whose round read as well with them
    #: as without: taken as the round's, they may yet have been kept aside (a return
    #: without them is accepted)
    early_tied: int = 0
    #: the round those cards opened, as if they were not its own (drawn and set aside, the
    #: round dealt afresh): judged beside ``referee`` to the round's end, which takes the
    #: reading with fewer deviations (TableEngine._round_ended); until then the round's
    #: own outputs wait in ``held`` (``referee``'s) and ``held_aside`` (this one's)
    aside: CardLedger | None = None
    held: list[Any] = field(default_factory=list)
    held_aside: list[Any] = field(default_factory=list)

    def finish(self) -> None:
        """The last hand is over: the next shoe needs every step again; counts stay on view."""
        self.active = False
        self.shuffled = self.cut_done = self.cut_card_set = self.loaded = False
        self.burn_pending = self.burn_just_finished = self.next_round_last = False
        self.void_round = False

    def kept_out(self, burns_returned: bool) -> int:
        """Cards out since the discards last went back that do not go back with them: the
        burns, where the profile keeps them in the discard holder (001 BP §20δ(3))."""
        return 0 if burns_returned else self.burned_since_return

    def to_return(self, burns_returned: bool) -> int:
        """Cards out since the discards last went back that go back with them."""
        return self.out_since_return - self.kept_out(burns_returned)

    def accounting(self) -> Accounting:
        behind: int | None = None
        if self.cut_card_out:
            behind = self.in_shoe
        elif self.declared_behind is not None:
            behind = min(self.declared_behind, self.in_shoe)
        return Accounting(self.pack_size, self.in_shoe, self.dealt, self.burned, behind,
                          self.cut_card_out)
