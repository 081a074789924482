"""Input-event parsing: every field checked, errors name the field, canonical round trip."""

from __future__ import annotations

import pytest

from controller.events import EVENT_TYPES, EventError, parse_event

GOOD = [
    {"type": "table_open", "table": "BJ1", "decks": 6, "sabot": "S1",
     "deck_lots": [{"id": "L1", "kind": "plastic", "first_use": "2026-11-01"}],
     "t": "2026-11-21T10:00:00Z"},
    {"type": "deck_check", "cards": ["AS", "KD"]},
    {"type": "shuffle"}, {"type": "cut", "offset": 100},
    {"type": "cut_card_placed", "behind": 52}, {"type": "cut_card_placed"},
    {"type": "shoe_loaded"}, {"type": "bets_closed", "boxes": [1, 3]},
    {"type": "bets_closed", "players": 4}, {"type": "card", "card": "TH", "exposed": True},
    {"type": "cut_card"}, {"type": "action", "action": "double"},
    {"type": "stub_count", "count": 27}, {"type": "round_end"},
    {"type": "discards_returned", "count": 9}, {"type": "dealer_change", "dealer": "D2"},
    {"type": "players_left"}, {"type": "card_replaced", "card": "7C"},
    {"type": "device_fault", "device": "shoe", "code": "JAM", "detail": "card stuck"},
    {"type": "device_ok", "device": "shoe", "code": "JAM"}, {"type": "table_close"},
    {"type": "device_connected", "device": "shoe", "driver": "swp-shoe", "port": "/dev/pts/3",
     "kind": "shoe", "model": "SW-SHOE-1", "serial": "SH000001", "firmware": "2.4.1",
     "firmware_hash": "sha256:00"},
    {"type": "device_diagnostic", "device": "shoe", "code": "PROTOCOL_ERROR",
     "kind": "bad_crc", "count": 1, "total": 3, "detail": "CRC mismatch"},
    {"type": "witness_checkpoint", "table": "BJ-01", "file": "BJ-01-2026-11-21.jsonl",
     "chain_seq": 57, "chain_hash": "ab" * 32, "signed_at": "2026-11-21T10:05:00.000Z",
     "key": "3f2a9c1d0b7e4a55", "sig": "c2lnbmF0dXJl"},
]


def test_every_type_has_a_good_example() -> None:
    assert {e["type"] for e in GOOD} == set(EVENT_TYPES)


@pytest.mark.parametrize("obj", GOOD, ids=lambda o: o["type"])
def test_round_trip(obj: dict) -> None:
    event = parse_event(obj)
    record = event.to_record()
    assert parse_event(record) == event
    assert record["type"] == obj["type"]


@pytest.mark.parametrize(("obj", "field"), [
    ([], ""), ({"decks": 6}, "type"), ({"type": "nope"}, "type"),
    ({"type": "table_open", "decks": 6}, "table"),
    ({"type": "table_open", "table": "T", "decks": "6"}, "decks"),
    ({"type": "table_open", "table": "T", "decks": 0}, "decks"),
    ({"type": "table_open", "table": "T", "decks": True}, "decks"),
    ({"type": "table_open", "table": "T", "decks": 6,
      "deck_lots": [{"id": "L", "kind": "wood", "first_use": "2026-01-01"}]}, "deck_lots[0].kind"),
    ({"type": "table_open", "table": "T", "decks": 6,
      "deck_lots": [{"id": "L", "kind": "paper", "first_use": "1/1/26"}]},
     "deck_lots[0].first_use"),
    ({"type": "deck_check", "cards": "AS KD"}, "cards"),
    ({"type": "cut"}, "offset"), ({"type": "cut", "offset": -1}, "offset"),
    ({"type": "card"}, "card"), ({"type": "card", "card": "1Z"}, "card"),
    ({"type": "card", "card": "AS", "exposed": "yes"}, "exposed"),
    ({"type": "action", "action": "hit"}, "action"),
    ({"type": "bets_closed", "boxes": [0]}, "boxes"),
    ({"type": "bets_closed", "players": 0}, "players"),
    ({"type": "stub_count", "count": 1.5}, "count"),
    ({"type": "discards_returned"}, "count"),
    ({"type": "device_fault", "device": "shoe"}, "code"),
    ({"type": "shuffle", "t": "yesterday"}, "t"),
    ({"type": "shuffle", "t": 12}, "t"),
])
def test_bad_events_name_the_field(obj: object, field: str) -> None:
    with pytest.raises(EventError) as info:
        parse_event(obj)
    assert info.value.field == field
    if field:
        assert str(info.value).startswith(field + ":")


def test_foreign_tokens_in_a_deck_check_are_kept_not_rejected() -> None:
    event = parse_event({"type": "deck_check", "cards": ["KD", "JK", "AS", "XX"]})
    assert [str(c) for c in event.cards] == ["AS", "KD"]
    assert event.foreign == ("JK", "XX")


def test_a_scanned_token_too_long_for_the_log_is_kept_cut_short_and_the_check_with_it() -> None:
    # a scanner's token of 1,001 characters made the typed path's screen refuse the whole
    # deck check (52 cards read, nothing in the log); it is a foreign card, shown cut short
    from controller.events import deck_check, screen

    tokens = [*(f"{r}{s}" for s in "SHDC" for r in "A23456789TJQK"), "Z" * 1001]
    event = deck_check(tokens, None)
    screen(event)  # (raised EventError: foreign item too long)
    assert len(event.cards) == 52
    (shown,) = event.foreign
    assert shown.startswith("'ZZZ") and shown.endswith("...") and len(shown) <= 60


@pytest.mark.parametrize(("tokens", "field"), [
    (["AS", 7, "KD"], None),  # a number: a foreign card, no error (the list is walked)
    (["AS", "KD", "\ud800"], "cards[2]"),  # a lone surrogate, named by its place
    (["AS", "x" * 1001, "KD"], "cards[1]"),  # too long for the log
    (["AS", ["KD"], "KD"], None),  # a list in the list: foreign, shown
])
def test_a_pack_whose_tokens_are_not_all_short_ascii_text_is_walked_item_by_item(
        tokens: list[object], field: str | None) -> None:
    """The walk passes a list of short ASCII texts whole (a count's 416 tokens); any other
    list is walked item by item, which names the item at fault, as before."""
    event = {"type": "deck_check", "cards": tokens}
    if field is None:
        parsed = parse_event(event)
        assert [str(c) for c in parsed.cards] == ["AS", "KD"]
        assert len(parsed.foreign) == len(tokens) - 2 == 1
    else:
        with pytest.raises(EventError) as info:
            parse_event(event)
        assert str(info.value).startswith(field + ":")


def test_a_deck_check_from_a_one_shot_iterator_keeps_cards_and_foreign_tokens() -> None:
    from controller.events import deck_check

    event = deck_check(iter(["KD", "JK", "AS", "10h"]), None)  # (read twice: no card lost)
    assert [str(c) for c in event.cards] == ["AS", "KD", "TH"]
    assert event.foreign == ("JK",)


def test_deck_check_record_is_sorted_so_no_order_leaks() -> None:
    shuffled = ["9C", "2H", "AS", "KD", "TS"]
    record = parse_event({"type": "deck_check", "cards": shuffled}).to_record()
    assert record["cards"] == sorted(record["cards"])
    assert record["cards"] != shuffled


def test_time_is_normalised_to_utc() -> None:
    event = parse_event({"type": "shuffle", "t": "2026-11-21T12:00:00+02:00"})
    assert event.time is not None and event.time.hour == 10


# --------------------------------------------------------------------------- the card fast path

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from controller import events as _events  # noqa: E402

_TOKENS = st.one_of(st.sampled_from(["7H", "10h", " as ", "TD", "1H", "ZZ", "", "7H7", "Qs"]),
                    st.text(max_size=6), st.integers(), st.none(), st.booleans())
_TIMES = st.one_of(st.sampled_from(["2026-11-21T10:00:00Z", "2026-11-21T10:00:00.123+01:00",
                                    "0001-01-01T00:00:00+01:00", "x", "", "2026-13-01T00:00Z"]),
                   st.text(max_size=30), st.none(), st.integers())
_EXTRA = st.dictionaries(st.sampled_from(["to", "exposed", "unrequested", "foo"]),
                         st.one_of(st.text(max_size=4), st.booleans(), st.none()), max_size=2)


def _outcome(parse, obj):  # type: ignore[no-untyped-def]
    try:
        return parse(obj)
    except EventError as e:
        return ("error", e.field, str(e))


@given(token=_TOKENS, t=_TIMES, extra=_EXTRA, with_t=st.booleans())
def test_the_card_fast_path_decides_as_the_general_path(token, t, extra, with_t) -> None:  # type: ignore[no-untyped-def]
    """parse_event takes a shortcut for the plain card event; on any input it must give
    the same event, or the same error, as the general path."""
    obj = {"type": "card", "card": token, **extra}
    if with_t:
        obj["t"] = t
    assert _outcome(parse_event, obj) == _outcome(_events._parse_event, obj)


@pytest.mark.parametrize("obj", [
    {"type": "card", "card": "7H", "t": "x"},
    {"type": "card", "card": "7H", "t": ""},
    {"type": "card", "card": "7H", "t": "0001-01-01T00:00:00+01:00"},
    {"type": "card", "card": "7H", "t": "2026-11-21T10:00:00Z" + " " * 1000},
    {"type": "card", "card": "7H", "t": "2026-11-21T10:00:00\u00e9"},
    {"type": "card", "card": "7H", "t": "\ud800"},
    {"type": "card", "card": "7H", "t": None},
    {"type": "card", "card": "7H", "t": 5},
    {"type": "card", "card": "7\u00e9"},
    {"type": "card", "card": "X" * 2000},
    {"type": "card", "card": "ZZ", "t": "2026-11-21T10:00:00Z"},
    {"type": "card", "card": 7},
    {"type": "card", "card": "10h", "t": "2026-11-21T10:00:00+02:00"},
    {"type": "card", "card": "7H", "foo": "bar"},
])
def test_the_card_fast_path_on_the_edges(obj: dict) -> None:
    assert _outcome(parse_event, obj) == _outcome(_events._parse_event, obj)


def test_the_card_fast_path_is_taken_for_the_plain_card(mocker) -> None:  # type: ignore[no-untyped-def]
    general = mocker.spy(_events, "_parse_event")
    parse_event({"type": "card", "card": "7H", "t": "2026-11-21T10:00:00Z"})
    assert general.call_count == 0
    parse_event({"type": "card", "card": "7H", "to": "P3"})
    assert general.call_count == 1


def test_an_optional_field_given_null_is_absent_a_required_one_still_refused() -> None:
    # a producer that writes every optional field: `"exposed": null` was bad input, and
    # every card of its stream was lost (a review)
    e = parse_event({"type": "card", "card": "7h", "exposed": None, "unrequested": None,
                     "to": None, "t": None})
    assert e == parse_event({"type": "card", "card": "7H"})
    assert e.exposed is False and e.unrequested is False  # type: ignore[attr-defined]
    with pytest.raises(EventError) as exc:
        parse_event({"type": "card", "card": None})
    assert exc.value.field == "card"
