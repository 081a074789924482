"""The shuffle screen's settings at one table (a profile's ``[shuffle_screen]``) and the
pace at which it judges the cards.

A module of its own, not compiled (controller/native.py): a frozen dataclass pickles and
copies as Python's own, and the screen reads its settings once a batch, not once a card.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from controller.screening.reference import HandOrder

FIRST_BATCH: Final = 8  # a shoe's first batch: an unshuffled pack is caught at its 8th card
BATCH: Final = 16  # then every 16 cards …
WARM_BATCH: Final = 2  # … or every 2 while a statistic is at least half way to its threshold …
EARLY_CARDS: Final = 40
"""… or, within a shoe's first 40 cards, every ``early_batch`` cards (a profile's
``[shuffle_screen] early_batch``): a pack only cut, or riffled once, crosses its threshold
within its first 10–20 cards, and a batch of 16 raised it up to 15 cards later (a round or
two of play), where a batch of 4 raises it within 3 (measured: a cut-only pack of the
discards, 90 % / 99 % raised by card 24 / 24 → 14 / 20; docs/shuffle-screening.md). Each
batch costs a few µs, so later in the shoe the batches are long again."""


@dataclass(frozen=True)
class ScreenSettings:
    """What the screen does at one table (the profile's ``[shuffle_screen]``)."""

    enabled: bool = True
    false_alarm_one_in: int = 1_000_000  # shoes
    run_test: bool = True
    continuation_test: bool = True
    previous_shoe: bool = True  # also hold a shoe against the previous shoe's discards
    shelf_test: bool = False  # the shelf test against new-deck order (a profile's choice)
    #: the discards' piles are the hands, not the rounds: each hand collected whole, hand
    #: after hand (002 §2 3.6, §3 3.6: so that the hands can be laid out again)
    hand_piles: bool = False
    #: the packet test against the previous shoe's discards (riffles of the discards)
    packet_test: bool = False
    #: its predictor (controller.screening.packets.PREDICTORS)
    packet_predictor: int = 1
    #: with hand_piles, how the packet test holds each hand's cards (HAND_ORDERS)
    hand_order: HandOrder = "pile"
    #: cards a batch holds within a shoe's first EARLY_CARDS cards (after the first batch)
    early_batch: int = BATCH
    #: the packet test's futility bound in nats (0: it follows the whole shoe)
    packet_stop: int = 0

    @property
    def tests(self) -> int:
        """(test, reference) pairs that may run in a shoe: the false-alarm budget's shares."""
        return (self.run_test + self.continuation_test
                + (self.run_test and self.previous_shoe) + self.shelf_test
                + (self.packet_test and self.previous_shoe))
