"""Deviations: every departure from the procedure, with a stable code and the rule it breaks.

A :class:`Deviation` is an output of the engine. Its ``code`` is stable (logs,
dashboards and tests key on it), its ``severity`` says who must act
(``info``: recorded; ``warning``: the pit boss looks; ``critical``: the
inspector stops the game), ``message`` is written for a pit boss, ``rule``
names the profile and the seed paragraph, and ``evidence`` carries the counts,
cards and positions involved. docs/deviations.md lists them all; a test checks
that it matches :data:`CATALOG`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, get_args


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


DeviationCode = Literal[
    "CHECK_MISSING",
    "DECK_INCOMPLETE",
    "DECK_EXTRA_CARD",
    "DECK_FOREIGN_CARD",
    "DECK_COUNT",
    "DECK_EXPIRED",
    "SHUFFLE_MISSING",
    "SHUFFLE_SUSPECT",
    "CUT_MISSING",
    "CUT_TOO_SHALLOW",
    "CUT_CARD_MISSING",
    "CUT_CARD_POSITION",
    "CUT_CARD_UNEXPECTED",
    "BURN_COUNT",
    "CARD_BEFORE_BETS_CLOSED",
    "PLAY_AFTER_LAST_HAND",
    "CARD_DUPLICATE",
    "DISCARDS_NOT_RETURNED",
    "DEVICE_FAULT",
    "UNEXPECTED_EVENT",
    "PROTOCOL_ERROR",
    "ANCHOR_WRITE_FAILED",
    "DEVICE_IDENTITY",
    "SABOT_ROTATION",
    "DRAW_RULE",
    "DEALER_DRAW_RULE",
    "CARD_TO_FINISHED_HAND",
    "ACTION_NOT_ALLOWED",
    "HAND_CARD_MISSING",
    "DEAL_COUNT",
    "DEAL_ORDER",
    "BOX_COUNT",
    "EXPOSED_CARD",
    "EXPOSED_CARD_KEPT",
    "DUMMY_HAND",
]
"""Every deviation code, as a type: the engine and the referees raise codes by name, and the
type checker refuses a code that is not one of these (the catalog below has one row each)."""


@dataclass(frozen=True, slots=True)
class DeviationSpec:
    code: DeviationCode
    severity: Severity
    #: profile section whose ``source`` is the rule broken ("" = the profile's source;
    #: "game" = the section of the profile's game, for a code more than one game raises)
    section: str
    when: str


_SPECS = [
    DeviationSpec("CHECK_MISSING", Severity.CRITICAL, "inspection",
                  "shuffle or play without an opening composition check; table_close "
                  "without a check after the last shoe"),
    DeviationSpec("DECK_INCOMPLETE", Severity.CRITICAL, "inspection",
                  "a deck_check is missing cards (every missing card named)"),
    DeviationSpec("DECK_EXTRA_CARD", Severity.CRITICAL, "inspection",
                  "a deck_check has a card more often than the decks hold"),
    DeviationSpec("DECK_FOREIGN_CARD", Severity.CRITICAL, "inspection",
                  "a deck_check has a card that is not one of the 52 (a joker, a blank)"),
    DeviationSpec("DECK_COUNT", Severity.CRITICAL, "decks",
                  "the number of decks is outside the profile's range"),
    DeviationSpec("DECK_EXPIRED", Severity.CRITICAL, "deck_lifecycle",
                  "a plastic lot past its days, a paper lot used on a later day, a lot reused "
                  "in a second sequence where every sequence needs new cards"),
    DeviationSpec("SHUFFLE_MISSING", Severity.CRITICAL, "shuffle",
                  "cards loaded (or a stud round dealt) without a shuffle since the last shoe "
                  "or since players left"),
    DeviationSpec("SHUFFLE_SUSPECT", Severity.CRITICAL, "shuffle_screen",
                  "the dealt order follows the order the pack was in before the shuffle "
                  "(new-deck order, the last shoe's discards) far beyond chance: an "
                  "unshuffled, cut-only, barely riffled or falsely shuffled pack, or a slug"),
    DeviationSpec("CUT_MISSING", Severity.WARNING, "cut",
                  "cards loaded or dealt without a cut where the profile requires one"),
    DeviationSpec("CUT_TOO_SHALLOW", Severity.WARNING, "cut",
                  "a cut leaving fewer cards on either side than the profile demands"),
    DeviationSpec("CUT_CARD_MISSING", Severity.WARNING, "cut_card",
                  "the shoe was loaded without placing the cut card"),
    DeviationSpec("CUT_CARD_POSITION", Severity.WARNING, "cut_card",
                  "the cut card's declared or measured position is outside the window"),
    DeviationSpec("CUT_CARD_UNEXPECTED", Severity.WARNING, "cut_card",
                  "a cut card in a profile that has none"),
    DeviationSpec("BURN_COUNT", Severity.WARNING, "burn",
                  "too few or too many cards burned (five, by value, dealer change)"),
    DeviationSpec("CARD_BEFORE_BETS_CLOSED", Severity.CRITICAL, "dealing",
                  "a card drawn (other than a burn) before bets_closed"),
    DeviationSpec("PLAY_AFTER_LAST_HAND", Severity.CRITICAL, "cut_card",
                  "a round started (or a card drawn) after the last hand, before a reshuffle"),
    DeviationSpec("CARD_DUPLICATE", Severity.CRITICAL, "inspection",
                  "a card seen more times in one shoe than the decks hold"),
    DeviationSpec("DISCARDS_NOT_RETURNED", Severity.WARNING, "shuffler",
                  "shuffler mode: next round before the discards went back, or a wrong count"),
    DeviationSpec("DEVICE_FAULT", Severity.CRITICAL, "",
                  "play goes on while a device fault is open"),
    DeviationSpec("UNEXPECTED_EVENT", Severity.WARNING, "",
                  "an event that is not valid in the current state"),
    DeviationSpec("PROTOCOL_ERROR", Severity.WARNING, "",
                  "a device sent malformed traffic (bad CRC, noise, a gap, a duplicate, a bad "
                  "payload …): the driver's diagnostic, with its counts"),
    DeviationSpec("ANCHOR_WRITE_FAILED", Severity.CRITICAL, "",
                  "the audit log's head could not be written to its anchor file (a full disk, "
                  "permissions): the log goes on, but a cut of its tail since the last anchor "
                  "would go unnoticed until anchors are written again"),
    DeviationSpec("DEVICE_IDENTITY", Severity.CRITICAL, "",
                  "a device was refused: its identity is not on the table's allowlist, or it "
                  "came back from a reconnect as another device"),
    DeviationSpec("SABOT_ROTATION", Severity.WARNING, "",
                  "table_open with the sabot that was placed on the same table at its last K "
                  "openings (001 §3; K a setting, default 3)"),
    # Dealing rules, checked by the game referees (controller/games/).
    DeviationSpec("DRAW_RULE", Severity.WARNING, "baccarat",
                  "baccarat / chemin de fer: a card the tableau requires was not drawn, or a "
                  "card it forbids was drawn"),
    DeviationSpec("DEALER_DRAW_RULE", Severity.WARNING, "blackjack",
                  "blackjack: the dealer drew on 17 or more, or stood on 16 or less"),
    DeviationSpec("CARD_TO_FINISHED_HAND", Severity.WARNING, "blackjack",
                  "blackjack: a card to a hand that is finished (bust, 21, after a double, a "
                  "split ace)"),
    DeviationSpec("ACTION_NOT_ALLOWED", Severity.WARNING, "blackjack",
                  "blackjack: a double, split or surrender the profile does not allow there"),
    DeviationSpec("HAND_CARD_MISSING", Severity.WARNING, "blackjack",
                  "blackjack: a doubled hand ended without its one card, or a split hand "
                  "without its second card"),
    DeviationSpec("DEAL_COUNT", Severity.CRITICAL, "stud",
                  "stud poker: the stub count or a hand's card count is wrong (hands void)"),
    DeviationSpec("DEAL_ORDER", Severity.WARNING, "game",
                  "cards dealt out of the rules' order, judged where cards name their hand "
                  "(`to`): stud poker one at a time to every hand; Banco Punto and live "
                  "baccarat Punto, Banco, Punto, Banco (the `[baccarat]` rule)"),
    DeviationSpec("BOX_COUNT", Severity.WARNING, "dealing",
                  "blackjack: bets on a box the table does not have (the layout's boxes: "
                  "seven, 004 §3.4, §3.10; 002 §3 1.2.1)"),
    DeviationSpec("EXPOSED_CARD", Severity.INFO, "exposed_card",
                  "a card came out face up; burned or used as the profile says"),
    DeviationSpec("EXPOSED_CARD_KEPT", Severity.WARNING, "exposed_card",
                  "blackjack: a card that came out face up stayed in the hand it was meant "
                  "for (the next card went to the next place), where the rules burn it"),
    DeviationSpec("DUMMY_HAND", Severity.INFO, "exposed_card",
                  "the first card of a round was exposed: the round is a dummy, bets not "
                  "accepted"),
]

CATALOG: dict[str, DeviationSpec] = {s.code: s for s in _SPECS}
if set(CATALOG) != set(get_args(DeviationCode)) or len(CATALOG) != len(_SPECS):
    raise AssertionError("the catalog and DeviationCode must list the same codes, once each")


@dataclass(frozen=True, slots=True)
class Deviation:
    code: str
    severity: Severity
    message: str
    rule: str
    evidence: Mapping[str, Any] = field(default_factory=dict)

    kind = "deviation"

    def to_record(self) -> dict[str, Any]:
        return {
            "type": "deviation",
            "code": self.code,
            "severity": str(self.severity),
            "message": self.message,
            "rule": self.rule,
            "evidence": dict(self.evidence),
        }
