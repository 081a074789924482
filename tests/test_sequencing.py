"""The bench's sequencer keeps a driver's event typed: the console's attached fields are
merged with ``dataclasses.replace``, checked as the parser checks them (issue 9)."""

from __future__ import annotations

import datetime as dt

from controller.app.sequencing import BenchSequencer
from controller.cards import parse_card
from controller.events import CardDrawn, DeckCheck, DeckLot, parse_event

T0 = "2026-11-21T10:00:00Z"


def test_attached_fields_reach_the_very_event_the_driver_made() -> None:
    seq = BenchSequencer()
    card = CardDrawn(card=parse_card("AS"), t="2026-11-21T17:00:01.000Z")
    seq.console_line({"n": 0, "after": {"shoe": 1}, "device": "shoe",
                      "attach": {"t": T0, "to": "P3"}})
    seq.device_event("shoe", card)
    ((ev, line),) = seq.ready()
    assert line == 1 and ev == CardDrawn(card=card.card, to="P3", t=T0)
    assert ev == parse_event({"type": "card", "card": "AS", "to": "P3", "t": T0})
    assert seq.last_t == T0


def test_a_new_packs_lots_are_parsed_when_attached() -> None:
    seq = BenchSequencer()
    seq.console_line({"n": 0, "after": {"scanner": 1}, "device": "scanner",
                      "attach": {"deck_lots": [{"id": 7, "kind": "paper",
                                                "first_use": "2026-11-21"}]}})
    seq.device_event("scanner", DeckCheck(cards=(parse_card("2C"),)))
    ((ev, _),) = seq.ready()
    assert isinstance(ev, DeckCheck)
    assert ev.deck_lots == (DeckLot("7", "paper", dt.date(2026, 11, 21)),)


def test_a_bad_attached_value_is_handed_on_as_json_for_the_runtime_to_refuse() -> None:
    seq = BenchSequencer(start_t=T0)
    seq.console_line({"n": 0, "after": {"shoe": 1}, "device": "shoe",
                      "attach": {"to": 3}})
    seq.device_event("shoe", CardDrawn(card=parse_card("AS")))
    ((ev, _),) = seq.ready()
    assert ev == {"type": "card", "card": "AS", "to": 3, "t": T0}
