"""Every procedure deviation code, triggered in every profile where it applies.

Each test takes a correct table day from the reference dealer and makes one mistake
(drop, move or edit one step, found by its phase), or builds a short stream by hand, and
asserts the code appears — exactly once where that is the right answer — and that no other
procedure code appears. Where a code does not apply to a profile, the parametrization
says so and, where there is something to check, a test shows what happens instead.

Every event also goes through the output-contract checks of :class:`engine_streams.Run`: each
deviation has the catalog's severity, a message, and ``rule`` = "<profile> <seed §>".
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import json
import random
import re
import tomllib
from collections import Counter
from typing import Any

import pytest
from engine_streams import (
    BURN_PHASES,
    BY_VALUE_PROFILES,
    CUT_CARD_PROFILES,
    FIVE_BURN_PROFILES,
    NO_BURN_PROFILES,
    NO_CUT_CARD_PROFILES,
    PROCEDURE_CODES,
    PROFILES,
    SHOE_PROFILES,
    SHUFFLER_PROFILES,
    T_OPEN,
    Run,
    Table,
    citations,
    codes_of,
    day,
    drop,
    events,
    first,
    insert,
    move,
    only,
    prof,
    round_cards,
    run,
    where,
)

from controller.cards import Card, pack
from controller.deviations import CATALOG, Severity
from controller.engine import TableEngine
from controller.profiles import PROFILE_DIR, profile_from_dict
from simulators import shuffles
from simulators.dealer import DayPlan, TableDay

ANYWHERE_CUT = [p for p in PROFILES if prof(p).cut.min_each_side == 1]
DECK_CUT = ["gr-blackjack", "gr-blackjack-shuffler"]  # 000 §3: a deck each side


def _custom(name: str, **changes: dict[str, object]) -> object:
    """A bundled profile with some keys changed (for settings no bundled profile uses)."""
    raw = tomllib.loads((PROFILE_DIR / f"{name}.toml").read_text(encoding="utf-8"))
    for section, values in changes.items():
        raw[section].update(values)
    return profile_from_dict(raw, f"{name}-custom")


# --------------------------------------------------------------------------- the catalog


# the game referees' sections (controller/games/): their codes are dealing rules, not procedure
REFEREE_SECTIONS = {"baccarat", "blackjack", "stud", "game", "exposed_card"}
# ... and one that cites the [dealing] section, where the layout's boxes are set
REFEREE_CODES_IN_DEALING = {"BOX_COUNT"}


def test_catalog_procedure_codes_all_have_tests() -> None:
    """Every procedure code in CATALOG is one this module covers (see COVERAGE at the end)."""
    assert set(COVERAGE) == PROCEDURE_CODES
    procedure_in_catalog = {c for c, spec in CATALOG.items()
                            if spec.section not in REFEREE_SECTIONS
                            and c not in REFEREE_CODES_IN_DEALING}
    assert procedure_in_catalog == PROCEDURE_CODES
    for code in PROCEDURE_CODES:
        assert CATALOG[code].severity in (Severity.WARNING, Severity.CRITICAL)
        for test in COVERAGE[code]:
            assert callable(test) and test.__name__.startswith("test_")


# --------------------------------------------------------------------------- CHECK_MISSING
# applies everywhere: every profile has inspection.opening_check and closing_check


@pytest.mark.parametrize("name", PROFILES)
def test_check_missing_no_opening_count(name: str) -> None:
    steps = day(name)
    mutated = drop(steps, first(steps, "opening_check"))
    r = run(name, events(mutated))
    (dev,) = only(r, "CHECK_MISSING")
    assert r.at("CHECK_MISSING") == [first(mutated, "shuffle")]
    assert dev.evidence["step"] == "shuffle"
    assert r.state == "closed"


@pytest.mark.parametrize("name", PROFILES)
def test_check_missing_no_closing_count(name: str) -> None:
    steps = day(name)
    mutated = drop(steps, first(steps, "closing_check"))
    r = run(name, events(mutated))
    (dev,) = only(r, "CHECK_MISSING")
    assert r.at("CHECK_MISSING") == [len(mutated) - 1]  # at table_close
    assert dev.evidence["step"] == "table_close"
    assert r.state == "closed"


@pytest.mark.parametrize("upto", ["shuffle", "cut", "cut_card_placed"])
@pytest.mark.parametrize("name", [p for p in CUT_CARD_PROFILES
                                  if not prof(p).deck_lifecycle.new_cards_every_shoe])
def test_the_closing_count_may_follow_the_next_shoes_shuffle(name: str, upto: str) -> None:
    # 001 BP §16: after the last hand the cards are shuffled again (§6 …); a table that then
    # closes counts the pack (§6: mandatory at closing) before the shoe is loaded
    evs = events(day(name))
    closing, close = evs[-2:]
    assert (closing["type"], close["type"]) == ("deck_check", "table_close")
    extra: list[dict[str, Any]] = [{"type": "shuffle"}]
    if upto != "shuffle":
        extra.append({"type": "cut", "offset": 200})
    if upto == "cut_card_placed":
        lo, _ = prof(name).cut_card.window()  # type: ignore[misc]
        extra.append({"type": "cut_card_placed", "behind": lo})
    r = run(name, [*evs[:-2], *extra, closing, close])
    assert r.codes() == Counter(), r.codes()
    assert r.states[-2] == "closing_check" and r.state == "closed"


@pytest.mark.parametrize("name", PROFILES)
def test_check_missing_play_on_after_closing_count(name: str) -> None:
    """A closing count, then play again, then close: the last shoe was never counted."""
    t = Table(name).prepare()
    if t.profile.shuffle.every_round:
        t.round(10)
    else:
        t.round(5)
    t.check()
    assert t.state == "closing_check"
    t.new_pack()
    t.shuffle()
    t.cut()
    if t.profile.has_cut_card:
        t.place()
    if t.profile.card_source != "hand":
        t.load()
        t.burn()
    t.round(10)
    t.send("table_close")
    assert t.run.proc() == {"CHECK_MISSING": 1}
    assert t.run.at("CHECK_MISSING") == [len(t.run.sent) - 1]


# --------------------------------------------------------------------------- deck checks


@pytest.mark.parametrize("where_", ["opening_check", "closing_check"])
@pytest.mark.parametrize("name", PROFILES)
def test_deck_incomplete_names_the_missing_card(name: str, where_: str) -> None:
    steps = day(name)
    i = first(steps, where_)
    cards = steps[i].event["cards"]
    removed = cards.pop(17)
    r = run(name, events(steps))
    (dev,) = only(r, "DECK_INCOMPLETE")
    assert r.at("DECK_INCOMPLETE") == [i]
    assert dev.evidence["missing"] == [removed]
    assert dev.evidence["counted"] == len(cards) == dev.evidence["expected"] - 1
    assert removed in dev.message


@pytest.mark.parametrize("name", PROFILES)
def test_deck_incomplete_names_every_missing_card(name: str) -> None:
    steps = day(name)
    i = first(steps, "opening_check")
    cards = steps[i].event["cards"]
    target = cards[0]
    gone = [c for c in cards if c == target]
    steps[i].event["cards"] = [c for c in cards if c != target]
    r = run(name, events(steps))
    (dev,) = only(r, "DECK_INCOMPLETE")
    assert dev.evidence["missing"] == gone  # every copy of the card, one entry each
    assert len(gone) == steps[0].event["decks"]


@pytest.mark.parametrize("name", PROFILES)
def test_deck_extra_card(name: str) -> None:
    steps = day(name)
    i = first(steps, "opening_check")
    extra = steps[i].event["cards"][5]
    steps[i].event["cards"].append(extra)
    r = run(name, events(steps))
    (dev,) = only(r, "DECK_EXTRA_CARD")
    assert r.at("DECK_EXTRA_CARD") == [i]
    assert dev.evidence["extra"] == [extra]
    assert dev.evidence["decks"] == steps[0].event["decks"]


@pytest.mark.parametrize("name", ["live-baccarat", "gr-blackjack", "gr-banco-punto"])
def test_a_deck_too_many_dealt_on_is_one_deviation(name: str) -> None:
    """A review: a 9th deck at an 8-deck table, counted (DECK_EXTRA_CARD) and dealt on —
    the pack taken as 416 cards refused its cut, misplaced its cut card, and every 9th copy
    of a card was a critical CARD_DUPLICATE: 103 deviations. The count's whole decks are
    the pack; the extra copies are that slip's; the closing count finding them again is a
    consequence note."""
    d = prof(name).decks.max
    t = Table(name, decks=d + 1)
    t.open(decks=d)
    t.check()
    t.shuffle()
    need = t.profile.cut.min_each_side  # (a cut the declared decks could not hold, where
    t.cut(offset=min(d * 52 + 20, (d + 1) * 52 - need))  # the rule's depth allows it)
    t.place()
    t.load()
    t.burn()
    behind = t.profile.cut_card.behind
    while len(t.stack) - t.pos > behind:  # (the real stack's cards, not the engine's count)
        t.round(min(6, len(t.stack) - t.pos - behind))
    t.send("cut_card")
    t.round(4)
    assert t.state == "shoe_complete"
    t.check()
    t.send("table_close")
    assert t.run.proc() == Counter({"DECK_EXTRA_CARD": 1}), t.run.proc()
    assert any(n.data["code"] == "DECK_EXTRA_CARD" for n in t.run.notes("consequence"))


@pytest.mark.parametrize("foreign", [["JK"], ["ZZ"], ["JK", "ZZ"], ["joker"]])
@pytest.mark.parametrize("name", PROFILES)
def test_deck_foreign_card(name: str, foreign: list[str]) -> None:
    steps = day(name)
    i = first(steps, "opening_check")
    steps[i].event["cards"] += foreign
    r = run(name, events(steps))
    (dev,) = only(r, "DECK_FOREIGN_CARD")
    assert r.at("DECK_FOREIGN_CARD") == [i]
    assert dev.evidence["foreign"] == sorted(foreign)
    for token in foreign:
        assert token in dev.message


@pytest.mark.parametrize("name", PROFILES)
def test_foreign_card_in_place_of_a_real_one(name: str) -> None:
    steps = day(name)
    i = first(steps, "closing_check")
    replaced = steps[i].event["cards"][3]
    steps[i].event["cards"][3] = "JK"
    r = run(name, events(steps))
    assert r.proc() == {"DECK_FOREIGN_CARD": 1, "DECK_INCOMPLETE": 1}
    assert r.devs("DECK_INCOMPLETE")[0].evidence["missing"] == [replaced]
    assert r.devs("DECK_FOREIGN_CARD")[0].evidence["foreign"] == ["JK"]


@pytest.mark.parametrize("decks", [1, 6, 8])
def test_a_count_is_judged_the_same_in_any_order_and_from_any_card_objects(decks: int
                                                                           ) -> None:
    """A whole pack is passed by one comparison with the sorted pack; a count built in
    another order, of cards made apart from parsing, or one card off, is counted card by
    card (controller/engine/checks.py: check_composition)."""
    from controller.engine.checks import check_composition
    from controller.events import DeckCheck

    def judged(cards: list[Card]) -> dict[str, Any]:
        out: list[Any] = []
        check_composition(DeckCheck(cards=tuple(cards)), decks,
                          lambda code, message, **ev: (code, ev), out)
        return dict(out)

    whole = pack(decks)
    random.Random(decks).shuffle(whole)
    assert judged(whole) == {}
    assert judged(sorted(Card(c.rank, c.suit) for c in whole)) == {}
    swapped = [*whole[1:], Card("A", "S") if whole[0] != Card("A", "S") else Card("K", "D")]
    got = judged(sorted(swapped))
    assert got["DECK_INCOMPLETE"]["missing"] == [str(whole[0])]
    assert got["DECK_EXTRA_CARD"]["extra"] == [str(swapped[-1])]
    assert judged(sorted(whole[1:]))["DECK_INCOMPLETE"]["missing"] == [str(whole[0])]


def _bad_deck_counts(name: str) -> list[int]:
    d = prof(name).decks
    return [n for n in (d.min - 1, d.max + 1, d.max + 3) if n >= 1]


@pytest.mark.parametrize(("name", "decks"),
                         [(n, k) for n in PROFILES for k in _bad_deck_counts(n)])
def test_deck_count_outside_range(name: str, decks: int) -> None:
    r = Run.of(name)
    outs = r.feed({"type": "table_open", "table": "T1", "decks": decks, "t": T_OPEN})
    assert codes_of(outs) == ["DECK_COUNT"]
    dev = r.devs("DECK_COUNT")[0]
    d = prof(name).decks
    assert dev.evidence == {"decks": decks, "min": d.min, "max": d.max}
    assert r.state == "opening_check"


@pytest.mark.parametrize(("name", "decks"), [("gr-blackjack", 3), ("gr-blackjack", 9),
                                             ("gr-stud-poker", 2)])
def test_deck_count_named_cases(name: str, decks: int) -> None:
    r = Run.of(name)
    r.feed({"type": "table_open", "table": "T1", "decks": decks})
    only(r, "DECK_COUNT")


@pytest.mark.parametrize("name", PROFILES)
def test_deck_count_inside_range_is_fine(name: str) -> None:
    d = prof(name).decks
    for decks in range(d.min, d.max + 1):
        r = Run.of(name)
        r.feed({"type": "table_open", "table": "T1", "decks": decks})
        assert r.proc() == {}


@pytest.mark.parametrize(("name", "decks"), [("gr-blackjack", 3), ("gr-blackjack", 8),
                                             ("gr-stud-poker", 2), ("live-baccarat", 6),
                                             ("ru-blackjack", 5), ("gr-chemin-de-fer", 9)])
def test_deck_count_whole_day_flagged_once(name: str, decks: int) -> None:
    r = run(name, events(day(name, 1, decks=decks)))
    only(r, "DECK_COUNT")
    assert r.at("DECK_COUNT") == [0]


# --------------------------------------------------------------------------- DECK_EXPIRED
# every bundled profile: plastic 10 days, "elapsed" count, paper on its first day only


def _open_with_lot(name: str, kind: str, days_before: int, t: str | None = T_OPEN) -> Run:
    first_use = (dt.date(2026, 11, 21) - dt.timedelta(days=days_before)).isoformat()
    r = Run.of(name)
    ev = {"type": "table_open", "table": "T1", "decks": prof(name).decks.max,
          "deck_lots": [{"id": "L1", "kind": kind, "first_use": first_use}]}
    if t is not None:
        ev["t"] = t
    r.feed(ev)
    return r


@pytest.mark.parametrize(("kind", "days", "expired"), [
    ("plastic", 0, False), ("plastic", 9, False), ("plastic", 10, False),
    ("plastic", 11, True), ("plastic", 30, True),
    ("paper", 0, False), ("paper", 1, True), ("paper", 5, True),
    ("plastic", -1, True), ("paper", -1, True),  # first use after the opening date
])
@pytest.mark.parametrize("name", PROFILES)
def test_deck_expired_at_table_open(name: str, kind: str, days: int, expired: bool) -> None:
    r = _open_with_lot(name, kind, days)
    if expired:
        (dev,) = only(r, "DECK_EXPIRED")
        assert dev.evidence["lot"] == "L1" and dev.evidence["kind"] == kind
        if kind == "plastic" and days > 0:
            assert dev.evidence["days"] == days and dev.evidence["max_days"] == 10
    else:
        assert r.proc() == {}


@pytest.mark.parametrize(("t", "kind", "days", "expired"), [
    # 01:30 in Moscow on the 21st is 22:30 UTC on the 20th: the lots are judged on the 21st
    ("2026-11-21T01:30:00+03:00", "paper", 0, False),
    ("2026-11-21T01:30:00+03:00", "plastic", 11, True),
    ("2026-11-21T01:30:00+03:00", "plastic", 10, False),
    ("2026-11-20T23:30:00-02:00", "paper", 0, True),  # the 21st in UTC, the 20th here
    ("2026-11-21T10:00:00", "paper", 0, False),  # a naive time: its own date
])
def test_deck_lots_are_judged_on_the_day_the_tables_clock_names(
        t: str, kind: str, days: int, expired: bool) -> None:
    """A lot's first use is a calendar day where the table is (PROCEDURES §2.1): an opening
    time written with its UTC offset is judged on that offset's day, not the UTC day."""
    r = _open_with_lot("ru-blackjack", kind, days, t=t)
    assert r.proc() == ({"DECK_EXPIRED": 1} if expired else {})


def test_deck_expired_is_not_judged_without_a_time() -> None:
    r = _open_with_lot("gr-blackjack", "plastic", 40, t=None)
    assert r.proc() == {}
    assert [n.data for n in r.notes("lots_not_judged")] == [{"lots": ["L1"]}]


def test_deck_expired_calendar_day_count() -> None:
    """plastic_day_count = calendar: the day of first use is day 1 (no bundled profile)."""
    p = _custom("gr-blackjack", deck_lifecycle={"plastic_day_count": "calendar"})
    for days_before, expired in ((9, False), (10, True)):
        r = Run.of(p)  # type: ignore[arg-type]
        first_use = (dt.date(2026, 11, 21) - dt.timedelta(days=days_before)).isoformat()
        r.feed({"type": "table_open", "table": "T", "decks": 6, "t": T_OPEN,
                "deck_lots": [{"id": "L", "kind": "plastic", "first_use": first_use}]})
        assert r.proc() == ({"DECK_EXPIRED": 1} if expired else {})


@pytest.mark.parametrize("name", ["gr-blackjack", "gr-banco-punto", "gr-stud-poker"])
def test_a_paper_lot_in_play_at_the_close_is_refused_at_a_later_opening(name: str) -> None:
    """000 §1, 001 BP §1, 003 §1: the decks are new at the opening and destroyed after the
    table closes — with ``paper_until_close`` (lot ids the casino's own), a paper lot of an
    earlier session is refused the same day too; a lot of the same name bought another day
    is another lot."""
    lot = {"id": "P-7", "kind": "paper", "first_use": "2026-11-21"}

    def two_sessions(second: dict[str, str]) -> list[dict[str, object]]:
        morning, evening = events(day(name, 0)), events(day(name, 1))
        morning[0]["deck_lots"], evening[0]["deck_lots"] = [lot], [second]
        evening[0]["sabot"] = "S-99"  # (another sabot: no rotation to judge)
        return [*morning, *evening]

    strict = _custom(name, deck_lifecycle={"paper_until_close": True})
    stream = two_sessions(dict(lot))
    r = run(strict, stream)  # type: ignore[arg-type]
    (dev,) = only(r, "DECK_EXPIRED")
    assert r.at("DECK_EXPIRED") == [len(events(day(name, 0)))]  # the evening's opening
    assert dev.evidence["lot"] == "P-7" and dev.evidence["closed_before"] is True
    assert "destroyed at the close" in dev.message
    assert run(strict, two_sessions({**lot, "id": "P-8"})).proc() == {}  # type: ignore[arg-type]
    later = two_sessions({**lot, "first_use": "2026-11-22"})
    later[len(events(day(name, 0)))]["t"] = "2026-11-22T10:00:00Z"
    assert run(strict, later).proc() == {}  # type: ignore[arg-type]
    assert run(name, stream).proc() == {}  # the bundled profiles: off (docs/profiles.md)


@pytest.mark.parametrize("name", PROFILES)
def test_deck_expired_whole_day_flagged_once(name: str) -> None:
    steps = day(name)
    steps[0].event["deck_lots"][0]["first_use"] = "2026-11-10"  # 11 days before the 21st
    r = run(name, events(steps))
    (dev,) = only(r, "DECK_EXPIRED")
    assert r.at("DECK_EXPIRED") == [0]
    assert dev.evidence["days"] == 11


@pytest.mark.parametrize("name", PROFILES)
def test_deck_expired_lots_on_a_deck_check(name: str) -> None:
    steps = day(name)
    i = first(steps, "opening_check")
    steps[i].event["deck_lots"] = [{"id": "OLD", "kind": "paper", "first_use": "2026-11-20"}]
    r = run(name, events(steps))
    (dev,) = only(r, "DECK_EXPIRED")
    assert r.at("DECK_EXPIRED") == [i] and dev.evidence["lot"] == "OLD"


def test_new_lot_after_midnight_is_not_expired() -> None:
    name = "gr-baccarat-two-tableaux"
    steps = day(name, 0, start=dt.datetime(2026, 11, 21, 23, 30, tzinfo=dt.UTC))
    i = first(steps, "new_pack_check")
    used_on = steps[i].event["t"][:10]
    assert used_on == "2026-11-22" and steps[0].event["t"][:10] == "2026-11-21"
    steps[i].event["deck_lots"][0]["first_use"] = used_on  # opened and first used now
    r = run(name, events(steps))
    assert r.proc() == {}, [d.message for d in r.devs()]
    # the count recorded without its own time (`t` is optional): it came no earlier than
    # the events before it, already of the new day (a review: DECK_EXPIRED, critical,
    # judged on the opening's day)
    del steps[i].event["t"]
    r = run(name, events(steps))
    assert r.proc() == {}, [d.message for d in r.devs()]
    steps[i].event["deck_lots"][0]["first_use"] = "2026-11-23"  # a day later: still flagged
    assert run(name, events(steps)).proc() == {"DECK_EXPIRED": 1}


def test_two_tableaux_second_shoe_without_new_cards() -> None:
    name = "gr-baccarat-two-tableaux"
    steps = day(name)
    assert len(where(steps, "new_pack_check")) == 1
    mutated = drop(steps, first(steps, "new_pack_check"))
    r = run(name, events(mutated))
    (dev,) = only(r, "DECK_EXPIRED")
    # judged when the sequence's cards are loaded: a reshuffle never dealt from is none
    assert r.at("DECK_EXPIRED") == [first(mutated, "shoe_loaded", shoe=2)]
    assert dev.evidence["lots"] == ["LOT-A"] and dev.evidence["shoe"] == 2
    # chemin de fer (same sabot, decks, end card, no burn) does not need new cards
    same = run("gr-chemin-de-fer", events(mutated))
    assert same.proc() == {}


@pytest.mark.parametrize("variant", ["count without lots", "the day's lots at the opening",
                                     "reshuffle before the closing count"])
def test_two_tableaux_sequences_the_stream_does_not_name_are_not_judged(variant: str) -> None:
    """New cards every sequence (001 §2) is judged on the lots the stream names for a
    sequence. A new pack counted without lots, a table opened with all the day's lots
    (each count naming its own), and a reshuffle before the closing count (never dealt
    from) are correct days (a review's false alarms: DECK_EXPIRED, critical)."""
    name = "gr-baccarat-two-tableaux"
    steps = day(name)
    i = first(steps, "new_pack_check")
    if variant == "count without lots":
        del steps[i].event["deck_lots"]
    elif variant == "the day's lots at the opening":
        opening = steps[first(steps, "table_open")].event
        opening["deck_lots"] = [*opening["deck_lots"], *steps[i].event["deck_lots"]]
    else:
        closing = first(steps, "closing_check")
        steps = insert(steps, closing, {"type": "shuffle",
                                        "t": steps[closing].event.get("t")})
    r = run(name, events(steps))
    assert r.proc() == {}, [d.message for d in r.devs()]


@pytest.mark.parametrize("second", [["LOT-A", "LOT-B"], ["LOT-B"]])
def test_two_tableaux_a_sequence_naming_the_whole_stock_reuses_one(second: list[str]) -> None:
    """The opening lists the day's stock (LOT-A, LOT-B) and no count names the first
    sequence's lots: it was dealt from one of them. A later count naming the whole stock
    deals that one again (a review: clean before); naming a part of it is not judged."""
    name = "gr-baccarat-two-tableaux"
    steps = day(name)
    opening = steps[first(steps, "table_open")].event
    lot = opening["deck_lots"][0]
    opening["deck_lots"] = [lot, {**lot, "id": "LOT-B"}]
    assert lot["id"] == "LOT-A"
    steps[first(steps, "opening_check")].event.pop("deck_lots", None)
    i = first(steps, "new_pack_check")
    steps[i].event["deck_lots"] = [{**lot, "id": n} for n in second]
    r = run(name, events(steps))
    if len(second) == 1:
        assert r.proc() == {}, [d.message for d in r.devs()]
        return
    (dev,) = only(r, "DECK_EXPIRED")
    assert r.at("DECK_EXPIRED") == [first(steps, "shoe_loaded", shoe=2)]
    assert dev.evidence["lots"] == ["LOT-A", "LOT-B"] and "stock" in dev.message


def test_two_tableaux_any_later_sequence_naming_the_whole_stock_reuses_one() -> None:
    """The same, with a sequence of new lots between: the stock's lot dealt unnamed at
    first is still used, however many sequences later the whole stock is named (a review:
    caught only right after it)."""
    name = "gr-baccarat-two-tableaux"
    steps = day(name, 0, shoes=3)
    opening = steps[first(steps, "table_open")].event
    lot = opening["deck_lots"][0]
    opening["deck_lots"] = [lot, {**lot, "id": "LOT-B"}]
    steps[first(steps, "opening_check")].event.pop("deck_lots", None)
    second, third = where(steps, "new_pack_check")
    steps[second].event["deck_lots"] = [{**lot, "id": "LOT-C"}]
    steps[third].event["deck_lots"] = [{**lot, "id": n} for n in ("LOT-A", "LOT-B")]
    r = run(name, events(steps))
    (dev,) = only(r, "DECK_EXPIRED")
    assert r.at("DECK_EXPIRED") == [first(steps, "shoe_loaded", shoe=3)]
    assert dev.evidence["lots"] == ["LOT-A", "LOT-B"]


def test_two_tableaux_new_check_reusing_the_lot() -> None:
    name = "gr-baccarat-two-tableaux"
    steps = day(name)
    i = first(steps, "new_pack_check")
    steps[i].event["deck_lots"][0]["id"] = "LOT-A"
    r = run(name, events(steps))
    only(r, "DECK_EXPIRED")


@pytest.mark.parametrize("name", [p for p in PROFILES if p != "gr-baccarat-two-tableaux"])
def test_other_profiles_reuse_lots_across_shoes(name: str) -> None:
    """new_cards_every_shoe is two-tableaux only: a day of 3 shoes on LOT-A is fine."""
    assert not prof(name).deck_lifecycle.new_cards_every_shoe
    r = run(name, events(day(name, 2, shoes=3, rounds_per_block=4)))
    assert r.proc() == {}
    assert r.engine.shoe >= 3


# --------------------------------------------------------------------------- SHUFFLE_MISSING


@pytest.mark.parametrize("name", PROFILES)
def test_shuffle_missing_first_shoe(name: str) -> None:
    steps = day(name)
    mutated = drop(steps, first(steps, "shuffle"))
    r = run(name, events(mutated))
    only(r, "SHUFFLE_MISSING")
    loaded = "shoe_loaded" if prof(name).card_source != "hand" else "bets_closed"
    assert r.at("SHUFFLE_MISSING") == [first(mutated, loaded)]


@pytest.mark.parametrize("name", CUT_CARD_PROFILES)
def test_shuffle_missing_second_shoe(name: str) -> None:
    steps = day(name)
    mutated = drop(steps, first(steps, "shuffle", shoe=2))
    r = run(name, events(mutated))
    only(r, "SHUFFLE_MISSING")
    assert r.at("SHUFFLE_MISSING") == [first(mutated, "shoe_loaded", shoe=2)]


def test_stud_round_without_its_own_shuffle() -> None:
    name = "gr-stud-poker"
    steps = day(name)
    mutated = drop(steps, first(steps, "shuffle", shoe=5))
    r = run(name, events(mutated))
    only(r, "SHUFFLE_MISSING")
    assert r.at("SHUFFLE_MISSING") == [first(mutated, "bets_closed", shoe=5)]


def test_stud_round_without_shuffle_and_cut() -> None:
    name = "gr-stud-poker"
    steps = day(name)
    mutated = drop(steps, first(steps, "shuffle", shoe=5), first(steps, "cut", shoe=5))
    r = run(name, events(mutated))
    assert r.proc() == {"SHUFFLE_MISSING": 1, "CUT_MISSING": 1}
    i = first(mutated, "bets_closed", shoe=5)
    assert r.at("SHUFFLE_MISSING") == r.at("CUT_MISSING") == [i]


@pytest.mark.parametrize("name", SHUFFLER_PROFILES)
def test_shuffler_second_block_without_shuffle_is_not_silent(name: str) -> None:
    """A re-cut between rounds starts a new shoe; its load without a shuffle is flagged once."""
    steps = day(name)
    mutated = drop(steps, first(steps, "shuffle", shoe=2))
    r = run(name, events(mutated))
    only(r, "SHUFFLE_MISSING")
    assert r.at("SHUFFLE_MISSING") == [first(mutated, "shoe_loaded", shoe=2)]


@pytest.mark.parametrize("name", SHUFFLER_PROFILES)
def test_a_continuous_shufflers_own_shuffle_is_a_note_and_play_goes_on(name: str) -> None:
    """A review: a shuffle reported after each return of the discards (the device's
    SHUFFLE_DONE: it mixed them in) began a new shoe, and every later round was CUT_MISSING
    and BURN_COUNT; one reported once the stack was loaded, before the start burn, was
    UNEXPECTED_EVENT. The hands follow one another without a cut or a burn (001 BP §20γ,
    §20δ(6)): a note each, the shoes as before."""
    steps = day(name)
    machine = {"type": "shuffle"}
    at = [i + 1 for i in where(steps, "discards_returned")] + \
        [first(steps, "shoe_loaded") + 1, first(steps, "shoe_loaded", shoe=2) + 1]
    mutated = list(steps)
    for i in sorted(at, reverse=True):
        mutated = insert(mutated, i, machine)
    clean = run(name, events(steps))
    r = run(name, events(mutated))
    # (the clean day's second block begins with a shuffle between rounds: a note until
    # its cut, which takes it as the block's shuffle)
    assert r.codes() == Counter()
    assert len(r.notes("machine_shuffle")) == len(clean.notes("machine_shuffle")) + len(at)
    assert (r.engine.shoe, r.state) == (clean.engine.shoe, clean.state)
    burn = where(steps, "burn")[1]  # a burn under way: no shuffler reports then — as
    r = run(name, events(insert(steps, burn, machine)))  # the next burn card shows
    assert r.codes() == Counter({"UNEXPECTED_EVENT": 1})
    assert r.at("UNEXPECTED_EVENT") == [burn + 1]
    assert r.devs()[0].evidence["event"] == "shuffle"


@pytest.mark.parametrize("name", SHUFFLER_PROFILES)
def test_a_start_burn_stopped_short_then_the_machines_shuffle_is_one_slip(name: str
                                                                           ) -> None:
    """A review's independent dealer: the start burn one card short, then the shuffler's
    own report of its mixing, then the bets — UNEXPECTED_EVENT for the shuffle (refused
    mid-burn) and BURN_COUNT: two for one slip. The burn stopped there: the shuffle was the
    machine's between the burn and the first round (a note), the burn short (one)."""
    steps = day(name)
    burns = where(steps, "burn", shoe=1)
    short = drop(steps, burns[-1])
    r = run(name, events(insert(short, burns[-1], {"type": "shuffle"})))
    assert r.codes() == Counter({"BURN_COUNT": 1}), r.codes()
    assert r.at("BURN_COUNT") == [burns[-1] + 1]  # (the bets, which closed the burn short)


@pytest.mark.parametrize("name", SHUFFLER_PROFILES)
def test_a_shuffle_between_rounds_then_a_load_is_a_new_block_without_its_cut(name: str
                                                                             ) -> None:
    """The shuffle before a load was the hand shuffle of a new block (001 BP §20δ(6)), not
    the machine's: the load begins it and the cut is what is missing — once, as before."""
    steps = day(name)
    mutated = drop(steps, first(steps, "cut", shoe=2))
    r = run(name, events(mutated))
    only(r, "CUT_MISSING")
    assert r.at("CUT_MISSING") == [first(mutated, "shoe_loaded", shoe=2)]
    assert r.engine.shoe == run(name, events(steps)).engine.shoe


# --------------------------------------------------------------------------- CUT_MISSING
# every profile requires a cut


@pytest.mark.parametrize("name", PROFILES)
def test_cut_missing(name: str) -> None:
    steps = day(name)
    mutated = drop(steps, first(steps, "cut"))
    r = run(name, events(mutated))
    only(r, "CUT_MISSING")
    p = prof(name)
    at = ("cut_card_placed" if p.has_cut_card else
          "shoe_loaded" if p.card_source != "hand" else "bets_closed")
    assert r.at("CUT_MISSING") == [first(mutated, at)]


@pytest.mark.parametrize("name", [p for p in PROFILES if prof(p).card_source != "hand"])
def test_cut_missing_with_no_shoe_loaded_recorded(name: str) -> None:
    # shoe_loaded is optional (docs/events.md): with no cut and no load recorded the first
    # card came while the cut was awaited. A review: the card was refused
    # (UNEXPECTED_EVENT), the burn it began counted short (BURN_COUNT), then CUT_MISSING
    steps = day(name)
    mutated = drop(steps, first(steps, "cut"), first(steps, "shoe_loaded"))
    r = run(name, events(mutated))
    assert r.codes() == Counter({"CUT_MISSING": 1}), r.codes()
    at = ("cut_card_placed",) if prof(name).has_cut_card else ("card", "bets_closed")
    assert r.at("CUT_MISSING") == [next(i for i, s in enumerate(mutated)
                                        if s.event["type"] in at)]


# --------------------------------------------------------------------------- CUT_TOO_SHALLOW


def _cut_at(name: str, offset: int) -> Run:
    steps = day(name)
    steps[first(steps, "cut")].event["offset"] = offset
    return run(name, events(steps))


@pytest.mark.parametrize("name", DECK_CUT)
def test_cut_too_shallow_deck_each_side(name: str) -> None:
    size = prof(name).decks.max * 52
    for offset in (51, size - 51, 0, 1, size):
        r = _cut_at(name, offset)
        (dev,) = only(r, "CUT_TOO_SHALLOW")
        assert (dev.evidence["top"], dev.evidence["bottom"]) == (offset, size - offset)
        assert dev.evidence["min_each_side"] == 52 and dev.evidence["pack"] == size
    for offset in (52, size - 52, size // 2):
        assert _cut_at(name, offset).proc() == {}


@pytest.mark.parametrize("name", ANYWHERE_CUT)
def test_cut_too_shallow_anywhere(name: str) -> None:
    size = prof(name).decks.max * 52
    for offset in (0, size):
        only(_cut_at(name, offset), "CUT_TOO_SHALLOW")
    for offset in (1, size - 1, 51):
        assert _cut_at(name, offset).proc() == {}


@pytest.mark.parametrize("name", PROFILES)
def test_cut_beyond_the_pack_is_rejected(name: str) -> None:
    steps = day(name)
    i = first(steps, "cut")
    r = run(name, events(steps[:i]))
    outs = r.feed({"type": "cut", "offset": prof(name).decks.max * 52 + 1})
    assert codes_of(outs) == ["UNEXPECTED_EVENT"] and len(outs) == 1
    assert r.state == "cut"
    r.feed_all(events(steps[i:]))
    assert r.proc() == {"UNEXPECTED_EVENT": 1}


# --------------------------------------------------------------------------- cut card
# CUT_CARD_POSITION / CUT_CARD_MISSING only where the profile has a cut card;
# CUT_CARD_UNEXPECTED only where it has none


@pytest.mark.parametrize("name", CUT_CARD_PROFILES)
def test_cut_card_position_declared_outside_window(name: str) -> None:
    lo, hi = prof(name).cut_card.window()  # type: ignore[misc]
    for behind in (lo - 1, hi + 1):
        steps = day(name)
        i = first(steps, "cut_card_placed")
        steps[i].event["behind"] = behind
        r = run(name, events(steps))
        (dev,) = only(r, "CUT_CARD_POSITION")
        assert r.at("CUT_CARD_POSITION") == [i]
        assert dev.evidence == {"position": behind, "measured": False, "window": [lo, hi]}
    for behind in (lo, hi):
        steps = day(name)
        steps[first(steps, "cut_card_placed")].event["behind"] = behind
        assert run(name, events(steps)).proc() == {}


@pytest.mark.parametrize("side", ["early", "late"])
@pytest.mark.parametrize("name", CUT_CARD_PROFILES)
def test_cut_card_position_measured(name: str, side: str) -> None:
    # (early, two off: the helper's rounds are random cards, some short of a draw the
    # tableau wants, and a round short of a card gives the measured place one card of
    # slack that way — a card drawn unread; one off in correct days:
    # ..._by_moving_the_event below. Late, one off: more would be a card behind it, the
    # cut card implied. A round of them that read a card twice in a row and holds a card
    # too many gives a card of slack the other way — a card maybe read twice: a stack
    # whose rounds have none)
    lo, hi = prof(name).cut_card.window()  # type: ignore[misc]
    left = hi + 2 if side == "early" else lo - 1
    t = _no_card_twice_in_a_row(Table(name))
    t.prepare()  # declared at `behind`, inside the window
    t.play_until(left + 2)
    assert not t.run.notes("read_twice")
    t.bets()
    t.cards(2)
    outs = t.send("cut_card")
    assert codes_of(outs) == ["CUT_CARD_POSITION"]
    assert t.state == "last_round"
    t.cards(1)
    t.send("round_end")
    (dev,) = only(t.run, "CUT_CARD_POSITION")
    assert dev.evidence == {"position": left, "measured": True, "window": [lo, hi]}
    assert t.state == "shoe_complete"


def _no_card_twice_in_a_row(t: Table) -> Table:
    """``t`` with no card of its stack twice in a row: the helper's rounds are random cards,
    and a round that reads a card twice in a row and holds a card too many for the rules
    gives the cut card's measured place a card of slack (a card maybe read twice)."""
    stack = t.stack
    while pairs := [i for i in range(1, len(stack)) if stack[i] == stack[i - 1]]:
        for i in reversed(pairs):  # (each moved to the end)
            stack.append(stack.pop(i))
    return t


def _cut_card_out(name: str, placed: int, left: int) -> tuple[Table, list[Any], list[Any]]:
    """A shoe whose cut card was placed ``placed`` cards from the back and came out with
    ``left`` cards in the shoe (no card twice in a row): the table, what the placing
    answered, what its reading answered."""
    t = _no_card_twice_in_a_row(Table(name))
    t.open()
    if t.profile.inspection.opening_check:
        t.check()
    t.shuffle()
    t.cut()
    at_place = t.place(behind=placed)
    t.load()
    t.burn()
    t.play_until(left + 2)
    t.bets()
    t.cards(2)
    return t, at_place, t.send("cut_card")


@pytest.mark.parametrize("name", CUT_CARD_PROFILES)
def test_a_cut_card_placed_outside_its_window_and_coming_out_there_is_one_slip(
        name: str) -> None:
    # a review: flagged when placed, and again when it came out where it was placed. The
    # second is a consequence note (one declared inside the window that comes out outside
    # it is still a deviation: test_cut_card_position_measured)
    lo, hi = prof(name).cut_card.window()  # type: ignore[misc]
    t, placed, outs = _cut_card_out(name, hi + 3, hi + 3)
    assert codes_of(placed) == ["CUT_CARD_POSITION"]
    assert codes_of(outs) == []
    (note,) = [o for o in outs if getattr(o, "kind", "") == "consequence"]
    assert note.data["code"] == "CUT_CARD_POSITION" and note.data["evidence"]["measured"]
    t.cards(1)
    t.send("round_end")
    only(t.run, "CUT_CARD_POSITION")
    # declared above the window, come out below it: the declaration was not where it
    # went — a deviation of its own (a review of the note above)
    _, _, outs = _cut_card_out(name, hi + 3, lo - 1)
    assert codes_of(outs) == ["CUT_CARD_POSITION"]


@pytest.mark.parametrize("name", [p for p in CUT_CARD_PROFILES
                                  if prof(p).cut_card.mode == "exact"])
def test_cut_card_position_measured_by_moving_the_event(name: str) -> None:
    """Exact windows: the cut card event moved one card earlier inside the last round.
    (Approximate windows need tolerance+1 cards: test_cut_card_position_measured.)"""
    k = 1
    for seed in range(40):
        steps = day(name, seed, shoes=1)
        c = first(steps, "cut_card")
        rnd = steps[c].round
        dealt_before = [i for i in round_cards(steps, rnd) if i < c]
        if len(dealt_before) > k:  # stays inside the last round, not its first card
            break
    else:
        pytest.fail("no seed puts enough cards before the cut card in the last round")
    mutated = move(steps, c, dealt_before[-k])
    r = run(name, events(mutated))
    (dev,) = only(r, "CUT_CARD_POSITION")
    assert dev.evidence["measured"] is True
    assert dev.evidence["position"] == steps[first(steps, "cut_card_placed")].event["behind"] + k


@pytest.mark.parametrize("name", CUT_CARD_PROFILES)
def test_cut_card_missing(name: str) -> None:
    steps = day(name)
    mutated = drop(steps, first(steps, "cut_card_placed"))
    r = run(name, events(mutated))
    only(r, "CUT_CARD_MISSING")
    assert r.at("CUT_CARD_MISSING") == [first(mutated, "shoe_loaded")]
    # and with no shoe_loaded recorded (optional): at the first card (a burn) or, in a
    # game that burns none, the bets closed — the only deviation
    mutated = drop(steps, first(steps, "cut_card_placed"), first(steps, "shoe_loaded"))
    r = run(name, events(mutated))
    assert r.codes() == Counter({"CUT_CARD_MISSING": 1}), r.codes()
    assert r.at("CUT_CARD_MISSING") == [next(i for i, s in enumerate(mutated)
                                             if s.event["type"] in ("card", "bets_closed"))]


@pytest.mark.parametrize("name", NO_CUT_CARD_PROFILES)
def test_cut_card_unexpected(name: str) -> None:
    steps = day(name)
    deal = round_cards(steps, 2)[1]
    cut = first(steps, "cut")
    mutated = insert(steps, deal, {"type": "cut_card"})
    mutated = insert(mutated, cut + 1, {"type": "cut_card_placed", "behind": 52})
    r = run(name, events(mutated))
    only(r, "CUT_CARD_UNEXPECTED", 2)
    assert r.at("CUT_CARD_UNEXPECTED") == [cut + 1, deal + 1]
    assert [d.evidence["event"] for d in r.devs()] == ["cut_card_placed", "cut_card"]
    # neither moves the procedure
    assert r.states[cut + 1] == r.states[cut]
    assert r.states[deal + 1] == r.states[deal]


@pytest.mark.parametrize("name", CUT_CARD_PROFILES)
def test_second_cut_card_in_a_shoe_is_unexpected(name: str) -> None:
    steps = day(name)
    c = first(steps, "cut_card")
    mutated = insert(steps, c + 2, {"type": "cut_card"})
    r = run(name, events(mutated))
    only(r, "UNEXPECTED_EVENT")
    assert r.states[c + 2] == r.states[c + 1]


# --------------------------------------------------------------------------- BURN_COUNT
# where burn.mode != none or burn.on_dealer_change > 0:
# gr-blackjack, gr-blackjack-shuffler, ru-blackjack (five), gr-banco-punto(+shuffler) (by value)


def _burns(steps: list, shoe: int = 1, phase: str = "burn") -> list[int]:
    return [i for i in where(steps, phase, shoe=shoe) if steps[i].event["type"] == "card"]


@pytest.mark.parametrize("name", FIVE_BURN_PROFILES + BY_VALUE_PROFILES)
def test_burn_count_one_short(name: str) -> None:
    """The last burn card is dealt into the first round instead (card count unchanged)."""
    steps = day(name)
    burns = _burns(steps)
    bets = first(steps, "bets_closed")
    if not prof(name).shuffler.burns_returned:  # the round's cards go back, that one too
        steps[where(steps, "discards_returned")[0]].event["count"] += 1
    mutated = move(steps, burns[-1], bets + 1)
    r = run(name, events(mutated))
    (dev,) = only(r, "BURN_COUNT")
    assert r.at("BURN_COUNT") == [bets - 1]  # at bets_closed
    assert dev.evidence["burned"] == len(burns) - 1
    if prof(name).burn.mode == "five":
        assert len(burns) == 5 and dev.evidence["required"] == 5
    elif len(burns) > 1:
        assert dev.evidence["required"] == len(burns)


@pytest.mark.parametrize("name", [n for n in FIVE_BURN_PROFILES + BY_VALUE_PROFILES
                                  if not prof(n).shuffler.continuous])
@pytest.mark.parametrize("drawn", [0, 1, 2])
def test_a_shoe_shuffled_again_during_its_start_burn_is_a_new_shoe(name: str,
                                                                    drawn: int) -> None:
    """A review's independent dealer: the start burn stopped after a card or two, the stack
    gathered and shuffled again, cut, its cut card placed, loaded and burned in full — the
    new shoe's shuffle, cut, cut card and load were refused (four UNEXPECTED_EVENT) and its
    burn read as a burn too many of the old shoe ("6 burned, 5 required": the slip named
    backwards). A shuffle there begins a new shoe, as between rounds (002 3.2.2); the burn
    left short is one BURN_COUNT, and none when no card was drawn yet."""
    steps, burns = next((st, b) for seed in range(20) for st in [day(name, seed)]
                        for b in [_burns(st)] if len(b) > 2)  # (by value: 3 or more)
    again = [s for s in steps[burns[0] - 4:burns[0]]
             if s.event["type"] in ("shuffle", "cut", "cut_card_placed", "shoe_loaded")]
    assert [s.event["type"] for s in again][-1] == "shoe_loaded"
    again = [steps[first(steps, "shuffle", shoe=1)], *again] \
        if again[0].event["type"] != "shuffle" else again
    mutated = [*steps[:burns[0] + drawn], *again, *steps[burns[0]:]]
    r = run(name, events(mutated))
    assert r.codes() == (Counter({"BURN_COUNT": 1}) if drawn else Counter()), r.codes()
    if drawn:
        assert r.at("BURN_COUNT") == [burns[0] + drawn + 1]  # at the cut: a new shoe
        assert only(r, "BURN_COUNT")[0].evidence["burned"] == drawn
    assert r.engine.shoe == run(name, events(steps)).engine.shoe + 1


@pytest.mark.parametrize("name", [n for n in FIVE_BURN_PROFILES + BY_VALUE_PROFILES
                                  if not prof(n).shuffler.continuous])
def test_a_shoe_loaded_without_its_shuffle_and_cut_then_done_again_is_those_slips(
        name: str) -> None:
    """A reread of the late shuffle and the late cut: a stack loaded without its shuffle and
    cut (SHUFFLE_MISSING, CUT_MISSING at the load), then taken out and shuffled, cut and
    loaded again before any card — the shuffle a new shoe's (the next step, its cut, says
    so), not the late cut of the first load's with that load refused after it."""
    steps = day(name)
    sh = first(steps, "shuffle", shoe=2)
    cut = first(steps, "cut", shoe=2)
    load = first(steps, "shoe_loaded", shoe=2)
    redo = steps[sh:load + 1]
    mutated = [*steps[:sh], *[s for s in redo if s.event["type"] not in ("shuffle", "cut")],
               *redo, *steps[load + 1:]]
    assert cut < load
    r = run(name, events(mutated))
    assert r.codes() == Counter({"SHUFFLE_MISSING": 1, "CUT_MISSING": 1}), r.codes()


@pytest.mark.parametrize("name", [n for n in FIVE_BURN_PROFILES + BY_VALUE_PROFILES
                                  if not prof(n).shuffler.continuous])
@pytest.mark.parametrize("then", ["the burn goes on", "the bets"])
def test_a_stray_shuffle_during_the_start_burn_is_one_unexpected_event(name: str,
                                                                       then: str) -> None:
    """The other side of the test above (a review): a shuffle recorded during the start
    burn with no cut after it is no new shoe — taken as one at once, a stray shuffle with
    the burn going on was BURN_COUNT, CUT_MISSING, CUT_CARD_MISSING and BURN_COUNT again.
    The next step says: a burn card, one UNEXPECTED_EVENT for the shuffle (the burn judged
    as ever); the bets, that and the burn short, as before."""
    steps, burns = next((st, b) for seed in range(20) for st in [day(name, seed)]
                        for b in [_burns(st)] if len(b) > 2)
    at = burns[1] if then == "the burn goes on" else burns[-1]
    mutated = insert(steps, at, {"type": "shuffle"})
    if then == "the bets":
        mutated = drop(mutated, at + 1)  # (the burn's last card: the bets come next)
    r = run(name, events(mutated))
    codes = r.codes()
    if then == "the burn goes on":
        assert codes == Counter({"UNEXPECTED_EVENT": 1}), codes
    else:  # (the card dropped is a card fewer in the shoe: its cut card may be one off)
        assert codes["UNEXPECTED_EVENT"] == codes["BURN_COUNT"] == 1, codes
        assert not {"CUT_MISSING", "CUT_CARD_MISSING", "SHUFFLE_MISSING"} & set(codes)
    assert r.at("UNEXPECTED_EVENT") == [at + 1]  # (read late: at the step after it)
    assert r.engine.shoe == run(name, events(steps)).engine.shoe


@pytest.mark.parametrize("name", FIVE_BURN_PROFILES + BY_VALUE_PROFILES)
def test_burn_count_one_too_many(name: str) -> None:
    """The first card of round 1 is taken before bets close, right after the burn."""
    steps = day(name)
    burns = _burns(steps)
    bets = first(steps, "bets_closed")
    card = round_cards(steps, 1)[0]
    mutated = move(steps, card, bets)
    r = run(name, events(mutated))
    (dev,) = only(r, "BURN_COUNT")
    assert r.at("BURN_COUNT") == [bets]
    # the round is judged with the card as its first too: no dealing-rule cascade (a
    # review: read as a burn only, a blackjack round was a card short — two refused
    # actions and a dealer's draw)
    assert r.codes() == Counter({"BURN_COUNT": 1}), r.codes()
    assert dev.evidence["burned"] == len(burns) + 1
    assert dev.evidence["required"] == len(burns)
    assert dev.evidence["card"] == steps[card].event["card"]


@pytest.mark.parametrize("name", FIVE_BURN_PROFILES + BY_VALUE_PROFILES)
def test_a_card_named_to_a_hand_after_the_burn_is_the_round_dealt_before_bets_closed(
        name: str) -> None:
    """The same card, its ``to`` naming the hand it went to: no burn too many but the
    round's first card before the bets closed (critical; a review: one BURN_COUNT, and a
    whole first round dealt with no bets_closed read as burns, '0 rounds')."""
    steps = day(name)
    bets = first(steps, "bets_closed")
    card = round_cards(steps, 1)[0]
    first_hand = ("punto" if prof(name).game == "baccarat"
                  else f"box{steps[bets].event['boxes'][0]}")
    steps[card].event["to"] = first_hand
    mutated = move(steps, card, bets)
    r = run(name, events(mutated))
    (dev,) = only(r, "CARD_BEFORE_BETS_CLOSED")
    assert r.at("CARD_BEFORE_BETS_CLOSED") == [bets]
    assert dev.severity == "critical" and dev.evidence["card"] == steps[card].event["card"]
    # the whole round dealt before its bets_closed, which never comes: one deviation
    no_bets = [s for i, s in enumerate(steps) if i != bets]
    r = run(name, events(no_bets))
    assert r.proc() == Counter({"CARD_BEFORE_BETS_CLOSED": 1}), r.proc()
    assert r.at("CARD_BEFORE_BETS_CLOSED") == [bets]  # the round's first card, named


def test_a_burn_too_many_may_stay_in_the_holder_with_the_burns() -> None:
    """001 BP §20δ(3): with a shuffler the burns stay in the discard holder. A card burned
    after the burn was complete (BURN_COUNT) may stay there with them, or go back as the
    round's card it may have been: either return is accepted, one slip, one deviation."""
    name = "gr-banco-punto-shuffler"
    steps = day(name)
    burns = _burns(steps)
    bets = first(steps, "bets_closed")
    extra = {"type": "card", "card": steps[burns[0]].event["card"]}  # (a twin in the pack)
    mutated = insert(steps, bets, extra)
    back = where(mutated, "discards_returned")[0]
    for change in (0, 1):  # the round's cards (it stays with the burns), or those and it
        each = [dict(s.event) for s in mutated]
        each[back]["count"] += change
        r = run(name, each)
        only(r, "BURN_COUNT")
        assert r.state == "closed"
    each = [dict(s.event) for s in mutated]
    each[back]["count"] -= 1  # a round's card kept back as well: a card short
    assert "DISCARDS_NOT_RETURNED" in run(name, each).codes()


@pytest.mark.parametrize("name", ["gr-blackjack", "ru-blackjack", "gr-blackjack-shuffler"])
def test_burn_count_four_and_six_by_hand(name: str) -> None:
    for burned, at in ((4, "bets"), (6, "card")):
        t = Table(name).up_to_the_burn()
        t.cards(min(burned, 5))
        if burned == 4:
            assert t.state == "burn"
            outs = t.bets()
        else:
            assert t.state == "ready"
            outs = t.card()
        assert codes_of(outs) == ["BURN_COUNT"], at
        dev = t.run.devs("BURN_COUNT")[0]
        assert (dev.evidence["burned"], dev.evidence["required"]) == (burned, 5)
        assert dev.evidence["mode"] == "five"


@pytest.mark.parametrize("name", BY_VALUE_PROFILES)
@pytest.mark.parametrize(("first_card", "value"), [("7H", 7), ("KD", 10), ("AS", 1)])
def test_burn_count_by_value(name: str, first_card: str, value: int) -> None:
    # short: one card fewer than the value (an ace cannot be short: it is its own burn)
    if value > 1:
        t = Table(name).up_to_the_burn()
        t.card(first_card)
        t.cards(value - 2)
        assert t.state == "burn"
        outs = t.bets()
        assert codes_of(outs) == ["BURN_COUNT"]
        dev = t.run.devs("BURN_COUNT")[0]
        assert (dev.evidence["burned"], dev.evidence["required"]) == (value - 1, value)
        assert dev.evidence["mode"] == "by-value"
    # over: one card more than the value
    t = Table(name).up_to_the_burn()
    t.card(first_card)
    t.cards(value - 1)
    assert t.state == "ready" and t.run.proc() == {}
    outs = t.card()
    assert codes_of(outs) == ["BURN_COUNT"]
    dev = t.run.devs("BURN_COUNT")[0]
    assert (dev.evidence["burned"], dev.evidence["required"]) == (value + 1, value)


def test_burn_count_by_value_nothing_drawn() -> None:
    t = Table("gr-banco-punto")
    t.open()
    t.check()
    t.shuffle()
    t.cut()
    t.place()
    t.load()
    outs = t.bets()
    assert codes_of(outs) == ["BURN_COUNT"]
    dev = t.run.devs("BURN_COUNT")[0]
    assert dev.evidence["burned"] == 0 and dev.evidence["required"] is None


def test_burn_count_dealer_change_short() -> None:
    name = "ru-blackjack"
    steps = day(name)
    (burn,) = _burns(steps, phase="dealer_change_burn")
    nxt = next(i for i in range(burn, len(steps)) if steps[i].phase == "bets_closed")
    mutated = move(steps, burn, nxt + 1)
    r = run(name, events(mutated))
    (dev,) = only(r, "BURN_COUNT")
    assert (dev.evidence["burned"], dev.evidence["required"]) == (0, 1)
    assert dev.evidence["mode"] == "dealer_change"


def test_burn_count_dealer_change_two_burned() -> None:
    name = "ru-blackjack"
    steps = day(name)
    (burn,) = _burns(steps, phase="dealer_change_burn")
    nxt = next(i for i in range(burn, len(steps)) if steps[i].phase == "bets_closed")
    mutated = move(steps, nxt + 1, nxt)
    r = run(name, events(mutated))
    (dev,) = only(r, "BURN_COUNT")
    assert (dev.evidence["burned"], dev.evidence["required"]) == (2, 1)


@pytest.mark.parametrize("name", NO_BURN_PROFILES)
def test_no_burn_profiles_card_after_load_is_not_a_burn(name: str) -> None:
    """Without a burn, a card before the first bets_closed is CARD_BEFORE_BETS_CLOSED."""
    steps = day(name)
    bets = first(steps, "bets_closed")
    mutated = move(steps, round_cards(steps, 1)[0], bets)
    r = run(name, events(mutated))
    only(r, "CARD_BEFORE_BETS_CLOSED")


# ------------------------------------------------------------------ CARD_BEFORE_BETS_CLOSED
# every profile (dealing.bets_close_before_cards is true in all ten)


@pytest.mark.parametrize("name", PROFILES)
def test_card_before_bets_closed(name: str) -> None:
    steps = day(name)
    bets = first(steps, "bets_closed", rnd=2)
    card = round_cards(steps, 2)[0]
    mutated = move(steps, card, bets)
    r = run(name, events(mutated))
    (dev,) = only(r, "CARD_BEFORE_BETS_CLOSED")
    assert r.at("CARD_BEFORE_BETS_CLOSED") == [bets]
    assert dev.evidence["card"] == steps[card].event["card"]
    assert dev.evidence["state"] == "ready"
    assert r.states[bets] == "ready"


@pytest.mark.parametrize("name", ["gr-banco-punto", "gr-banco-punto-shuffler"])
def test_a_first_card_exposed_before_the_bets_is_one_slip_whatever_its_infos(name: str
                                                                           ) -> None:
    """A review's independent dealer: a round's first card came out face up before the
    bets closed — used, the hand a dummy (001 BP §5: EXPOSED_CARD and DUMMY_HAND, infos).
    Judged both ways, the reading with it set aside won on the count of deviations, two
    infos against the round's DRAW_RULE: one slip became two. Infos count only between
    readings with as many slips."""
    steps = day(name)
    done = 0
    for rnd in range(2, 40):
        cards = round_cards(steps, rnd)
        if len(cards) < 5:
            continue  # (a round of four: either reading deals it right)
        bets = first(steps, "bets_closed", rnd=rnd)
        steps_x = [*steps]
        steps_x[cards[0]] = dataclasses.replace(
            steps[cards[0]], event={**steps[cards[0]].event, "exposed": True})
        r = run(name, events(move(steps_x, cards[0], bets)))
        assert r.proc() == Counter({"CARD_BEFORE_BETS_CLOSED": 1}), (rnd, r.codes())
        assert not r.devs("DRAW_RULE"), rnd
        done += 1
        if done == 4:
            break
    assert done == 4


@pytest.mark.parametrize("back", [False, True])
def test_a_burn_between_a_shufflers_hands_is_one_slip_kept_back_or_returned(back: bool
                                                                           ) -> None:
    """A review's independent dealer: a card burned between the hands of Banco Punto with a
    shuffler (none is, 001 BP §20δ(6)) — CARD_BEFORE_BETS_CLOSED, judged both ways — kept
    in the discard holder with the burns (§20δ(3)), was DISCARDS_NOT_RETURNED as well at
    the next return ("6 went back; 7 were out"). A card the round's reading set aside may
    stay with the burns, as a burn too many does, or go back with the round."""
    name = "gr-banco-punto-shuffler"
    taken = 0  # (rounds that read as well with the card as without: taken as theirs — the
    # return may still show it kept aside, a review's 7 in 120)
    for seed in range(3):
        steps = day(name, seed)
        rets = where(steps, "discards_returned")
        for k in range(4, 24):
            window = {s.event["card"] for s in steps[rets[k - 1]:rets[k + 1]]
                      if s.event["type"] == "card"}
            stray = next(str(c) for c in pack(1) if str(c) not in window)
            bets = next(i for i in range(rets[k - 1], rets[k]) if steps[i].phase ==
                        "bets_closed")
            each = [dict(s.event) for s in insert(steps, bets, {"type": "card",
                                                                 "card": stray})]
            if back:
                each[rets[k] + 1]["count"] += 1
            r = run(name, each)
            codes = r.codes()  # (right after a new block's burn: a burn too many)
            assert sum(codes.values()) == 1 and set(codes) <= {
                "CARD_BEFORE_BETS_CLOSED", "BURN_COUNT"}, (seed, k, codes)
            rnd = steps[bets].round
            taken += any(c["card"] == stray for n in r.notes("round") if n.data["round"] == rnd
                         for c in n.data["cards"])
            # the holder keeps it with the burns, or it went back: the shoe counts it so
            held = run(name, each[:rets[k] + 2]).engine._shoe.in_holder
            clean = run(name, events(steps[:rets[k] + 1])).engine._shoe.in_holder
            assert held == clean + (0 if back else 1), (seed, k, held, clean)
    assert taken >= 1


def test_card_before_bets_closed_is_a_profile_setting() -> None:
    p = _custom("gr-chemin-de-fer", dealing={"bets_close_before_cards": False})
    steps = day("gr-chemin-de-fer")
    bets = first(steps, "bets_closed", rnd=2)
    mutated = move(steps, round_cards(steps, 2)[0], bets)
    r = run(p, events(mutated))  # type: ignore[arg-type]
    assert r.proc() == {}


# ------------------------------------------------------------------ PLAY_AFTER_LAST_HAND
# only with a cut card (a stud round without its shuffle is SHUFFLE_MISSING, above)


def _stub(steps: list, shoe: int, decks: int) -> list[str]:
    seen = Counter(s.event["card"] for s in steps if s.event["type"] == "card" and s.shoe == shoe)
    left = Counter(str(c) for c in pack(decks)) - seen
    return sorted(left.elements())


@pytest.mark.parametrize("name", CUT_CARD_PROFILES)
def test_play_after_last_hand_a_round_after_the_last(name: str) -> None:
    steps = day(name)
    end = where(steps, "round_end", shoe=1)[-1]
    stub = _stub(steps, 1, steps[0].event["decks"])
    assert stub, "the cards behind the cut card are never dealt"
    extra = [{"type": "bets_closed"}, *[{"type": "card", "card": c} for c in stub[:2]],
             {"type": "round_end"}]
    mutated = insert(steps, end + 1, *extra)
    r = run(name, events(mutated))
    (dev,) = only(r, "PLAY_AFTER_LAST_HAND")
    assert r.at("PLAY_AFTER_LAST_HAND") == [end + 1]
    assert r.states[end] == "shoe_complete"
    assert r.states[end + len(extra)] == "shoe_complete"
    assert dev.evidence["shoe"] == 1
    assert len(r.notes("round")) == len(where(steps, "bets_closed")) + 1


@pytest.mark.parametrize("name", CUT_CARD_PROFILES)
def test_play_after_last_hand_a_card_after_the_last(name: str) -> None:
    steps = day(name)
    end = where(steps, "round_end", shoe=1)[-1]
    stub = _stub(steps, 1, steps[0].event["decks"])
    mutated = insert(steps, end + 1, {"type": "card", "card": stub[0]})
    r = run(name, events(mutated))
    (dev,) = only(r, "PLAY_AFTER_LAST_HAND")
    assert dev.evidence["card"] == stub[0]
    assert r.states[end + 1] == "shoe_complete"


# --------------------------------------------------------------------------- CARD_DUPLICATE


@pytest.mark.parametrize("name", SHOE_PROFILES)
def test_card_duplicate_in_a_shoe(name: str) -> None:
    steps = day(name)
    decks = steps[0].event["decks"]
    in_shoe = [i for i, s in enumerate(steps) if s.event["type"] == "card" and s.shoe == 1]
    count = Counter(steps[i].event["card"] for i in in_shoe)
    deals = [i for i in in_shoe if steps[i].phase not in BURN_PHASES]
    last = deals[-1]
    # the card dealt most often (not the last one), topped up to decks + 1 at the end
    x = max(sorted(count), key=lambda c: (c != steps[last].event["card"], count[c]))
    need = decks + 1 - count[x]
    changed = [i for i in deals if steps[i].event["card"] != x][-need:]
    assert changed[-1] == last
    for i in changed:
        steps[i].event["card"] = x
    r = run(name, events(steps))
    (dev,) = only(r, "CARD_DUPLICATE")
    assert dev.evidence == {"card": x, "seen": decks + 1, "decks": decks}
    assert r.at("CARD_DUPLICATE") == [last]


@pytest.mark.parametrize("name", ["gr-blackjack", "live-baccarat"])
def test_a_copy_more_than_the_pack_holds_leaves_the_shoe_count_alone(name: str) -> None:
    """A review's sweep: a card read twice (or a foreign copy) was CARD_DUPLICATE, and the
    shoe's count of cards left went one card low: the cut card's place was then one off
    (CUT_CARD_POSITION) in every exact-place profile. A copy beyond the pack's is no card of
    it: the count of cards left does not move."""
    t = Table(name).prepare()
    t.bets()
    left = t.in_shoe
    x = next(c for c in t.stack[t.pos:] if c not in t.stack[:t.pos])
    outs: list[Any] = []
    for _ in range(t.decks):
        outs += t.card(x)
    assert t.in_shoe == left - t.decks and not codes_of(outs)
    outs = t.send("card", card=x)  # one copy more than the decks hold
    assert codes_of(outs) == ["CARD_DUPLICATE"]
    assert t.in_shoe == left - t.decks
    t.card()
    assert t.in_shoe == left - t.decks - 1


@pytest.mark.parametrize("name", ["gr-banco-punto", "live-baccarat", "gr-chemin-de-fer"])
@pytest.mark.parametrize("how", ["read twice", "misread"])
def test_a_duplicate_early_in_the_shoe_leaves_the_cut_card_in_its_place(
        name: str, how: str) -> None:
    """The cut card's place is exact in these profiles (001 BP §8, 002 §2 3.3, 001 §2). A
    copy beyond the pack's read early in the shoe — a card read twice (an extra card
    event), or a card misread as one whose copies were all out — is CARD_DUPLICATE, and the
    cut card is still where it belongs under one reading or the other: no second slip."""
    steps = day(name)
    decks = steps[0].event["decks"]
    shoe1 = [i for i, s in enumerate(steps) if s.event["type"] == "card" and s.shoe == 1]
    count = Counter(steps[i].event["card"] for i in shoe1)
    full = sorted(c for c, n in count.items() if n == decks)
    at = next(i for i in shoe1[len(shoe1) // 2:]
              if steps[i].event["card"] not in full and steps[i].phase == "deal")
    if how == "read twice":  # (an extra event: no card of the pack)
        mutated = insert(steps, at + 1, {"type": "card", "card": full[0]})
    else:  # (a card of the pack, read as another face)
        steps[at].event["card"] = full[0]
        mutated = steps
    r = run(name, events(mutated))
    assert r.proc() == Counter({"CARD_DUPLICATE": 1}), r.codes()


@pytest.mark.parametrize("name", ["gr-banco-punto", "live-baccarat", "gr-chemin-de-fer"])
def test_a_drawn_card_not_read_is_the_rounds_slip_only(name: str) -> None:
    """A review's sweep: a side's third card not read (the reader missed it) — the round's
    DRAW_RULE (the side stood where it must draw), and the cut card then one card off its
    exact place (CUT_CARD_POSITION), since the shoe was counted a card fuller than it was:
    two for one slip (about 250 mutations a profile). A round the referee found short of a
    card may have had it drawn unread: the cut card is in its place if that reading puts
    it there."""
    steps = day(name)
    dropped = 0
    for rnd in range(3, 40):
        cards = round_cards(steps, rnd)
        if len(cards) == 5 and steps[cards[0]].shoe == 1:
            r = run(name, events(drop(steps, cards[4])))
            codes = r.codes()
            if codes["DRAW_RULE"]:  # (a third card whose loss the tableau shows)
                assert codes == Counter({"DRAW_RULE": 1}), (rnd, codes)
                dropped += 1
        if dropped == 3:
            break
    assert dropped == 3


@pytest.mark.parametrize("name", ["gr-banco-punto",  # (make quick: the first; ~1.5 s each)
                                  *(pytest.param(n, marks=pytest.mark.slow)
                                    for n in ("live-baccarat", "gr-chemin-de-fer"))])
def test_a_card_read_twice_in_a_round_is_the_rounds_slip_only(name: str) -> None:
    """The sweep (250–260 mutations a profile): a round's card read twice in a row — the
    round holds a card too many for the rules (DRAW_RULE: after a natural, where the rule
    stands, beyond the tableau), and the face's copies then one more than the pack holds
    (CARD_DUPLICATE, shoes later) or the cut card a card off its exact place
    (CUT_CARD_POSITION). One reading twice is one slip: the round's, with a note."""
    steps = day(name)
    done = allowed = 0
    for rnd in range(3, 60):
        cards = round_cards(steps, rnd)
        faces = [steps[i].event["card"] for i in cards]
        if steps[cards[0]].shoe != 1 or any(map(str.__eq__, faces, faces[1:])):
            continue  # (a round with a pair in a row of its own: which was read twice?)
        for at in cards[:2]:
            mutated = insert(steps, at + 1, dict(steps[at].event))
            r = run(name, events(mutated))
            rule = [d for d in r.devs() if d.code == "DRAW_RULE"]
            if not rule:  # the pair made a round the rules allow: both cards counted
                assert not r.notes("read_twice")
                allowed += 1
                continue
            if rule[0].evidence["problem"] not in ("drew", "natural", "extra") \
                    or at + 1 in r.at("CARD_DUPLICATE"):
                continue  # (the pair shifted the tableau into a round short of a draw, or
                # the copy read again was one more than the pack holds: flagged at once)
            assert r.codes() == Counter({"DRAW_RULE": 1}), (rnd, r.codes())
            assert len(r.notes("read_twice")) == 1
            done += 1
    assert done >= 10 and allowed >= 1


def test_only_a_card_too_many_for_the_rules_takes_a_pair_in_a_row_as_read_twice() -> None:
    """A review: any deviation of the round's referee gave a round with a pair in a row the
    double read's slack — an exposed card (EXPOSED_CARD, DUMMY_HAND: infos) too. Only the
    findings of a card too many do (DRAW_RULE after a natural, where the rule stands,
    beyond the tableau; a card to a finished hand; the dealer's draw on 17 or more)."""
    name = "gr-banco-punto"
    for seed in range(10):
        steps = day(name, seed)
        for rnd in range(2, 60):
            cards = round_cards(steps, rnd)
            faces = [steps[i].event["card"] for i in cards]
            pair = next((k for k in range(1, len(faces) - 1) if faces[k] == faces[k - 1]),
                        None)
            if pair is None:
                continue
            after = cards[pair + 1]  # (a card after the pair, exposed: used, 001 BP §5)
            exposed = [*steps]
            exposed[after] = dataclasses.replace(
                steps[after], event={**steps[after].event, "exposed": True})
            r = run(name, events(exposed))
            assert r.codes()["EXPOSED_CARD"] == 1 and not r.notes("read_twice"), r.codes()
            return
    raise AssertionError("no round with a pair in a row in ten days")


def test_a_card_too_many_without_a_pair_in_a_row_is_no_double_read() -> None:
    """The other side of the test above: a card too many in a round without a card read
    twice in a row is counted as it was read (no note): only a round that read a card
    twice in a row *and* holds a card too many is taken as a double read."""
    name = "gr-banco-punto"
    steps = day(name)
    rnd = next(r for r in range(3, 60) if len(round_cards(steps, r)) == 4)
    cards = round_cards(steps, rnd)
    extra = next(c for c in pack(1) if str(c) not in {steps[i].event["card"] for i in cards})
    r = run(name, events(insert(steps, cards[-1] + 1, {"type": "card", "card": str(extra)})))
    assert r.codes()["DRAW_RULE"] == 1 and not r.notes("read_twice")


def test_a_stud_card_read_twice_is_one_duplicate_and_no_hand_a_card_long() -> None:
    """Stud poker's single deck (003 §4): a card read again right after itself is one
    CARD_DUPLICATE; the copy is dealt to no hand, so no hand is also a card long (the
    sweep: DEAL_COUNT as well, in 366 of 461 mutations). A second copy read later is a
    foreign card in a hand, and that hand is still judged."""
    name = "gr-stud-poker"
    steps = day(name)
    cards = round_cards(steps, 3)
    r = run(name, events(insert(steps, cards[2] + 1, dict(steps[cards[2]].event))))
    assert r.codes() == Counter({"CARD_DUPLICATE": 1}), r.codes()
    (dev,) = only(r, "CARD_DUPLICATE")
    assert dev.evidence["read_twice"] is True
    steps = day(name)
    steps[cards[4]].event["card"] = steps[cards[1]].event["card"]  # (not in a row)
    r = run(name, events(steps))
    assert "read_twice" not in only(r, "CARD_DUPLICATE")[0].evidence
    # in a row but named to the next place: a foreign copy dealt to that hand (a scanner
    # reads a card's place twice with it) — one CARD_DUPLICATE, the hand whole
    steps = day(name)
    first_, second = (steps[i].event for i in cards[:2])
    assert first_["to"] != second["to"]
    named = [*steps]
    named[cards[1]] = dataclasses.replace(steps[cards[1]],
                                          event={**second, "card": first_["card"]})
    r = run(name, events(named))
    assert r.codes() == Counter({"CARD_DUPLICATE": 1}), r.codes()
    assert "read_twice" not in only(r, "CARD_DUPLICATE")[0].evidence


@pytest.mark.parametrize("how", ["not read", "read twice"])
def test_a_drawn_card_not_read_or_read_twice_is_not_also_a_wrong_return(how: str) -> None:
    """A review's sweep (about 200 mutations each way in gr-banco-punto-shuffler): a third
    card missed by the reader, or read twice — the round's DRAW_RULE, and the return of the
    discards one card more, or one fewer, than read: DISCARDS_NOT_RETURNED as well. Since a
    round the referee found short of a card, or with a card too many, a count off by that
    card is that round's slip (a note)."""
    name = "gr-banco-punto-shuffler"
    steps = day(name)
    done = 0
    for rnd in range(2, 40):
        cards = round_cards(steps, rnd)
        if len(cards) != 5:
            continue
        third = cards[4]
        mutated = (drop(steps, third) if how == "not read"
                   else insert(steps, third + 1, dict(steps[third].event)))
        r = run(name, events(mutated))
        if r.codes()["DRAW_RULE"]:
            assert r.codes() == Counter({"DRAW_RULE": 1}), (rnd, r.codes())
            assert r.notes("return_count")
            done += 1
        if done == 3:
            break
    assert done == 3


def test_which_referee_findings_leave_the_card_count_unsure() -> None:
    """A round short of a card the rules wanted (maybe drawn unread: -1) or with a card too
    many (maybe read twice: +1) gives the cut card's place and a shuffler's return count a
    card of slack; a recorded stand where the rule draws does not — every card was read (a
    review: it gave the cut card slack)."""
    from controller.engine.day import _card_unsure
    assert [_card_unsure("DRAW_RULE", {"problem": p}) for p in (
        "missing", "deal-incomplete", "punto-missing", "drew", "natural", "extra", "stood",
        "order")] == [-1, -1, -1, 1, 1, 1, 0, 0]
    assert _card_unsure("DEALER_DRAW_RULE", {"drew": False}) == -1
    assert _card_unsure("DEALER_DRAW_RULE", {"drew": True}) == 1
    assert _card_unsure("HAND_CARD_MISSING", {}) == -1
    assert _card_unsure("CARD_TO_FINISHED_HAND", {}) == 1


def test_a_late_return_takes_the_flags_of_its_rounds_with_it() -> None:
    """A review: a round short of a card (Banco did not draw: a real slip, every card read),
    its discards returned late (after the next bets), then a card too many back with the
    next round: the flag of the first round still covered the next return, and the card
    added was hidden. The late return takes its rounds' flags with it."""
    name = "gr-banco-punto-shuffler"
    steps = day(name)
    rnd = next(r for r in range(3, 40) if len(round_cards(steps, r)) == 6)
    back = first(steps, "discards_returned", rnd=rnd)
    nxt = first(steps, "discards_returned", rnd=rnd + 1)
    steps[back].event["count"] -= 1  # (the card Banco did not draw stays in the shuffler)
    steps[nxt].event["count"] += 1  # a card added to the shuffler with the next round
    short = drop(steps, round_cards(steps, rnd)[5])
    back = first(short, "discards_returned", rnd=rnd)
    assert [s.event["type"] for s in short[back + 1:back + 3]] == ["bets_closed", "card"]
    r = run(name, events(move(short, back, back + 2)))
    assert r.codes() == Counter({"DRAW_RULE": 1, "DISCARDS_NOT_RETURNED": 2}), r.codes()


def test_card_duplicate_stud_single_deck() -> None:
    name = "gr-stud-poker"
    steps = day(name)
    cards = round_cards(steps, 3)
    steps[cards[4]].event["card"] = steps[cards[1]].event["card"]
    r = run(name, events(steps))
    (dev,) = only(r, "CARD_DUPLICATE")
    assert dev.evidence["seen"] == 2 and dev.evidence["decks"] == 1
    assert r.at("CARD_DUPLICATE") == [cards[4]]


@pytest.mark.parametrize("name", SHUFFLER_PROFILES)
def test_card_duplicate_between_returns(name: str) -> None:
    """Shuffler: the count runs from one return of the discards to the next."""
    steps = day(name)
    decks = steps[0].event["decks"]
    ret = first(steps, "discards_returned")
    window = {s.event["card"] for s in steps[:ret] if s.event["type"] == "card"}
    x = next(str(c) for c in pack(1) if str(c) not in window)
    bets = first(steps, "bets_closed")
    mutated = insert(steps, bets + 1, *[{"type": "card", "card": x}] * (decks + 1))
    mutated[ret + decks + 1].event["count"] += decks + 1
    r = run(name, events(mutated))
    (dev,) = only(r, "CARD_DUPLICATE")
    assert dev.evidence == {"card": x, "seen": decks + 1, "decks": decks}
    assert r.at("CARD_DUPLICATE") == [bets + decks + 1]


@pytest.mark.parametrize("name", SHUFFLER_PROFILES)
def test_shuffler_same_card_in_consecutive_rounds_is_fine(name: str) -> None:
    """`decks` copies of one card in round 3 and again in round 4: each window holds
    at most `decks`, so nothing is a duplicate."""
    steps = day(name)
    decks = steps[0].event["decks"]
    rets = where(steps, "discards_returned")
    x = "AS"
    mutated = list(steps)
    for rnd in (4, 3):  # later round first: earlier indices stay valid
        window = [i for i in range(rets[rnd - 2] + 1, rets[rnd - 1])
                  if steps[i].event["type"] == "card"]
        copies = decks - sum(steps[i].event["card"] == x for i in window)
        steps[rets[rnd - 1]].event["count"] += copies
        mutated = insert(mutated, first(steps, "bets_closed", rnd=rnd) + 1,
                         *[{"type": "card", "card": x} for _ in range(copies)])
    r = run(name, events(mutated))
    assert r.proc() == {}
    assert sum(ev.get("card") == x for ev in r.sent) >= 2 * decks


# ------------------------------------------------------------------ DISCARDS_NOT_RETURNED
# only where the shuffler takes the discards back every round


@pytest.mark.parametrize("name", SHUFFLER_PROFILES)
def test_discards_not_returned_before_next_round(name: str) -> None:
    steps = day(name)
    rets = where(steps, "discards_returned")
    count3 = steps[rets[2]].event["count"]
    steps[rets[3]].event["count"] += count3  # both rounds' cards go back together, later
    mutated = drop(steps, rets[2])
    r = run(name, events(mutated))
    (dev,) = only(r, "DISCARDS_NOT_RETURNED")
    assert r.at("DISCARDS_NOT_RETURNED") == [first(mutated, "bets_closed", rnd=4)]
    assert dev.evidence["outstanding"] == count3


@pytest.mark.parametrize("later", [False, True])
@pytest.mark.parametrize("name", SHUFFLER_PROFILES)
def test_a_return_missed_is_flagged_once_whatever_the_next_holds(name: str,
                                                                 later: bool) -> None:
    """A review's independent dealer: a round's return not made (or not read) — the next
    bets flag it, and the next return, of its own round's cards only, was flagged again
    ("5 went back; 9 were out"). One slip: that return is its round's (a note); the cards
    owed may still go back with a later one (a note), and a count that fits neither is
    flagged as ever."""
    steps = day(name)
    rets = where(steps, "discards_returned")
    owed = steps[rets[2]].event["count"]
    if later:  # the owed cards go back with the return after the next
        steps[rets[4]].event["count"] += owed
    mutated = drop(steps, rets[2])
    r = run(name, events(mutated))
    assert r.codes() == Counter({"DISCARDS_NOT_RETURNED": 1}), r.codes()
    assert r.at("DISCARDS_NOT_RETURNED") == [first(mutated, "bets_closed", rnd=4)]
    (note,) = r.notes("return_without_missed")
    assert note.data == {"returned": steps[rets[3]].event["count"], "owed": owed}
    assert len(r.notes("late_return")) == int(later)
    if not later:
        steps[rets[3]].event["count"] -= 1  # (neither its round's cards nor all of them)
        r = run(name, events(drop(steps, rets[2])))
        assert r.codes() == Counter({"DISCARDS_NOT_RETURNED": 2})
        assert not r.notes("return_without_missed")


@pytest.mark.parametrize("delta", [1, -1, -5])
@pytest.mark.parametrize("name", SHUFFLER_PROFILES)
def test_discards_not_returned_wrong_count(name: str, delta: int) -> None:
    steps = day(name)
    i = where(steps, "discards_returned")[4]
    right = steps[i].event["count"]
    steps[i].event["count"] = right + delta
    r = run(name, events(steps))
    (dev,) = only(r, "DISCARDS_NOT_RETURNED")
    assert r.at("DISCARDS_NOT_RETURNED") == [i]
    assert dev.evidence == {"returned": right + delta, "outstanding": right}


@pytest.mark.parametrize("returned", [False, True])
@pytest.mark.parametrize("name", SHUFFLER_PROFILES)
def test_the_burns_stay_in_the_holder_or_go_back_where_the_profile_says(name: str,
                                                                         returned: bool) -> None:
    """000 §10 (blackjack): before the dealing the first five go to the Discard Holder, and
    after every round the cards used or burned *in that round* go back into the shuffler —
    the start burn is in no round. 001 BP §20δ(3), δ(6), δ(7)(3) (Banco Punto): the burn
    goes to the discard holder and only each hand's used cards go back. Both bundled
    profiles: ``burns_returned = false``, and a count with the burns is accepted too (early,
    but no card is lost). A profile that sets it true refuses a count without them."""
    bundled = prof(name)
    assert not bundled.shuffler.burns_returned
    profile = dataclasses.replace(
        bundled, shuffler=dataclasses.replace(bundled.shuffler, burns_returned=returned))
    steps = day(name)
    returns = where(steps, "discards_returned")
    ret = returns[0]
    cards = sum(1 for s in steps[:ret] if s.event["type"] == "card")
    burns = sum(1 for s in steps[:ret] if s.phase == "burn")
    assert burns > 0
    # the simulated dealer counts as the bundled profile says
    assert steps[ret].event["count"] == cards - burns
    if returned:  # the later starts' burns go back too, as that profile says
        for before, at in itertools.pairwise(returns):
            steps[at].event["count"] += sum(1 for s in steps[before:at] if s.phase == "burn")
    for count, flagged in ((cards, False), (cards - burns, returned),
                           (cards - burns - 1, True), (cards + 1, True)):
        steps[ret].event["count"] = count
        r = run(profile, events(steps))
        assert r.codes() == (Counter({"DISCARDS_NOT_RETURNED": 1}) if flagged else Counter()), \
            (count, cards, burns)
        if flagged and not returned:
            (dev,) = r.devs("DISCARDS_NOT_RETURNED")
            assert dev.evidence == {"returned": count, "outstanding": cards - burns}
            assert f"({burns} burned card(s) stay in the discard holder)" in dev.message


@pytest.mark.parametrize("name", [p for p in PROFILES if p not in SHUFFLER_PROFILES])
def test_discards_returned_without_a_shuffler_is_unexpected(name: str) -> None:
    steps = day(name)
    end = first(steps, "round_end")
    mutated = insert(steps, end + 1, {"type": "discards_returned", "count": 5})
    r = run(name, events(mutated))
    only(r, "UNEXPECTED_EVENT")
    assert r.states[end + 1] == r.states[end]


# --------------------------------------------------------------------------- DEVICE_FAULT
# every profile


FAULT = {"type": "device_fault", "device": "shoe-reader", "code": "E42"}
OK = {"type": "device_ok", "device": "shoe-reader", "code": "E42"}


@pytest.mark.parametrize("name", PROFILES)
def test_device_fault_play_goes_on(name: str) -> None:
    steps = day(name)
    big = [rnd for rnd in range(1, 40) if len(round_cards(steps, rnd)) >= 4]
    cards2 = round_cards(steps, big[0])
    cards3 = round_cards(steps, big[1])
    clean = run(name, events(steps))
    # fault 1: over cards 2-3 of one round; fault 2: over the first card of a later round
    mutated = insert(steps, cards3[1], OK)
    mutated = insert(mutated, cards3[0], FAULT)
    mutated = insert(mutated, cards2[3], OK)
    mutated = insert(mutated, cards2[1], FAULT)
    r = run(name, events(mutated))
    devs = only(r, "DEVICE_FAULT", 2)
    assert r.at("DEVICE_FAULT") == [cards2[1] + 1, cards3[0] + 3]
    assert devs[0].evidence["faults"] == ["shoe-reader:E42"]
    assert devs[0].evidence["event"] == "card"
    assert devs[0].evidence["resume_state"] == "round"
    # the cards dealt under the fault were counted like any other
    assert [n.data for n in r.notes("round")] == [n.data for n in clean.notes("round")]
    assert r.state == "closed"


@pytest.mark.parametrize("name", PROFILES)
def test_device_fault_counts_the_card(name: str) -> None:
    steps = day(name)
    c = round_cards(steps, 1)[0]
    r = run(name, events(steps[:c]))
    before = r.engine.accounting()
    r.feed(FAULT)
    outs = r.feed(steps[c].event)
    assert codes_of(outs) == ["DEVICE_FAULT"]
    after = r.engine.accounting()
    assert after.in_shoe == before.in_shoe - 1 and after.dealt == before.dealt + 1
    assert r.state == "device_fault"
    r.feed(OK)
    assert r.state == "round"


@pytest.mark.parametrize("name", PROFILES)
def test_device_fault_shoe_preparation_under_fault(name: str) -> None:
    """Shuffling under an open fault is play too (PLAY_EVENTS)."""
    steps = day(name)
    s = first(steps, "shuffle")
    mutated = insert(steps, s + 1, OK)
    mutated = insert(mutated, s, FAULT)
    r = run(name, events(mutated))
    only(r, "DEVICE_FAULT")


# --------------------------------------------------------------------------- device diagnostics
# every profile: the runtime logs a driver's diagnostic as a device_diagnostic input


BAD_CRC = {"type": "device_diagnostic", "device": "shoe", "code": "PROTOCOL_ERROR",
           "kind": "bad_crc", "count": 1, "total": 2, "detail": "CRC mismatch"}
REFUSED = {"type": "device_diagnostic", "device": "scanner", "code": "DEVICE_IDENTITY",
           "kind": "serial", "detail": "serial SC999 is not on the allowlist"}


@pytest.mark.parametrize("name", PROFILES)
def test_protocol_error_in_any_state_changes_nothing(name: str) -> None:
    steps = day(name)
    c = round_cards(steps, 2)[1]
    clean = run(name, events(steps))
    mutated = insert(steps, c, BAD_CRC)
    mutated = insert(mutated, 0, BAD_CRC)  # closed
    r = run(name, events(mutated))
    devs = only(r, "PROTOCOL_ERROR", 2)
    assert devs[1].evidence == {"device": "shoe", "kind": "bad_crc", "count": 1, "total": 2,
                                "detail": "CRC mismatch"}
    assert "1 bad_crc" in devs[1].message and "2 so far" in devs[1].message
    assert r.states[0] == "closed" and r.states[c] == r.states[c + 1] == "round"
    assert [n.data for n in r.notes("round")] == [n.data for n in clean.notes("round")]
    # under an open fault it is handled in place: the fault stays, nothing is "play"
    r2 = run(name, events(steps[:c]))
    r2.feed(FAULT)
    assert codes_of(r2.feed(BAD_CRC)) == ["PROTOCOL_ERROR"] and r2.state == "device_fault"


ANCHORS_FULL = {"type": "device_diagnostic", "device": "audit", "code": "ANCHOR_WRITE_FAILED",
                "detail": "the round_end anchor (seq 812) could not be written to "
                          "/var/lib/shoewarden/anchors.jsonl: No space left on device"}


@pytest.mark.parametrize("name", PROFILES)
def test_anchor_write_failed_is_critical_and_play_goes_on(name: str) -> None:
    steps = day(name)
    c = round_cards(steps, 2)[1]
    clean = run(name, events(steps))
    r = run(name, events(insert(steps, c, ANCHORS_FULL)))
    (dev,) = only(r, "ANCHOR_WRITE_FAILED")
    assert dev.severity == Severity.CRITICAL and "No space left" in dev.message
    assert dev.evidence["device"] == "audit"
    assert r.states[c] == r.states[c + 1] == "round"  # the state does not change
    assert [n.data for n in r.notes("round")] == [n.data for n in clean.notes("round")]


@pytest.mark.parametrize("name", PROFILES)
def test_device_identity_refused_device(name: str) -> None:
    steps = day(name)
    c = round_cards(steps, 1)[0]
    fault = {"type": "device_fault", "device": "scanner", "code": "DEVICE_IDENTITY"}
    r = run(name, events(insert(steps, c, REFUSED, fault)))
    assert r.proc() == Counter({"DEVICE_IDENTITY": 1, "DEVICE_FAULT": 1}), r.codes()
    dev = r.devs("DEVICE_IDENTITY")[0]
    assert dev.severity == Severity.CRITICAL and "SC999" in dev.message
    assert dev.evidence["kind"] == "serial"


def test_device_connected_and_other_diagnostics_are_notes() -> None:
    r = Run.of("gr-blackjack")
    outs = r.feed({"type": "device_connected", "device": "shoe", "driver": "swp-shoe",
                   "port": "/dev/pts/3", "model": "SW-SHOE-1", "serial": "SH000001",
                   "firmware": "2.4.1"})
    assert [o.kind for o in outs] == ["device_connected"] and r.state == "closed"
    assert outs[0].text == "shoe: SW-SHOE-1 SH000001 firmware 2.4.1 on /dev/pts/3 (swp-shoe)"
    outs = r.feed({"type": "device_diagnostic", "device": "shuffler", "code": "NAK",
                   "kind": "CMD_SHUFFLE", "detail": "busy"})
    assert [o.kind for o in outs] == ["device_diagnostic"] and not r.devs()


# --------------------------------------------------------------------------- UNEXPECTED_EVENT
# every profile


@pytest.mark.parametrize("name", PROFILES)
def test_unexpected_round_end_in_ready(name: str) -> None:
    steps = day(name)
    bets = first(steps, "bets_closed", rnd=2)
    r = run(name, events(steps[:bets]))
    assert r.state == "ready"
    outs = r.feed({"type": "round_end"})
    assert len(outs) == 1 and codes_of(outs) == ["UNEXPECTED_EVENT"]
    ev = outs[0].evidence
    assert ev["event"] == "round_end" and ev["state"] == "ready"
    assert ev["expected"] == r.engine.valid_events() and "bets_closed" in ev["expected"]
    assert r.state == "ready"
    r.feed_all(events(steps[bets:]))
    only(r, "UNEXPECTED_EVENT")


@pytest.mark.parametrize("name", PROFILES)
def test_a_damaged_card_is_replaced_between_rounds_but_not_during_one(name: str) -> None:
    # 000 §1, 001 BP §1, 003 §1: a card damaged during a hand is replaced from a new deck
    # before the next shuffle, and play continues normally (with a shuffler: before the
    # next round, 001 BP §20δ(1)) — between rounds, not in the middle of one
    steps = day(name)
    after = first(steps, "round_end", rnd=1) + 1  # the round is over, the next not begun
    replaced = {"type": "card_replaced", "card": "7C"}
    r = run(name, events(insert(steps, after, replaced)))
    assert r.codes() == Counter(), r.codes()
    assert [n.data for n in r.notes("card_replaced")] == [{"card": "7C"}]
    assert r.states[after] == r.states[after - 1]
    bets = first(steps, "bets_closed", rnd=2)
    r = run(name, events(insert(steps, bets, replaced)))
    if prof(name).shuffle.every_round:  # (stud) the next round's shuffle came first: late
        only(r, "UNEXPECTED_EVENT")
        assert r.at("UNEXPECTED_EVENT") == [bets]
    else:  # the same shoe: still before its next shuffle
        assert r.codes() == Counter(), r.codes()
    mid = round_cards(steps, 2)[1]  # after the round's first card
    r = run(name, events(insert(steps, mid, replaced)))
    only(r, "UNEXPECTED_EVENT")
    assert r.at("UNEXPECTED_EVENT") == [mid]


@pytest.mark.parametrize("name", PROFILES)
def test_unexpected_table_open_twice(name: str) -> None:
    steps = day(name)
    mutated = insert(steps, 2, dict(steps[0].event))
    r = run(name, events(mutated))
    only(r, "UNEXPECTED_EVENT")
    assert r.at("UNEXPECTED_EVENT") == [2]
    assert r.states[2] == r.states[1] == "shuffle"


@pytest.mark.parametrize("name", PROFILES)
def test_unexpected_card_while_closed(name: str) -> None:
    steps = day(name)
    card = {"type": "card", "card": "AS"}
    r = Run.of(name)
    outs = r.feed(card)
    assert len(outs) == 1 and codes_of(outs) == ["UNEXPECTED_EVENT"] and r.state == "closed"
    r.feed_all(events(steps))
    outs = r.feed(card)
    assert codes_of(outs) == ["UNEXPECTED_EVENT"] and r.state == "closed"
    only(r, "UNEXPECTED_EVENT", 2)


@pytest.mark.parametrize("name", PROFILES)
def test_unexpected_events_while_closed(name: str) -> None:
    r = Run.of(name)
    r.feed({"type": "table_open", "table": "T1", "decks": prof(name).decks.max})
    r.feed({"type": "table_close"})
    r.feed_all([])
    for ev in ({"type": "shuffle"}, {"type": "bets_closed"}, {"type": "round_end"},
               {"type": "deck_check", "cards": ["AS"]}, {"type": "table_close"},
               {"type": "cut", "offset": 10}, {"type": "stub_count", "count": 3}):
        outs = r.feed(ev)
        assert codes_of(outs) == ["UNEXPECTED_EVENT"] and len(outs) == 1, ev
        assert r.state == "closed"


# --------------------------------------------------------------------------- SABOT_ROTATION
# 001 §3 (sabots are assigned so the same sabot is not put on the same table systematically):
# tested in the sabot games (baccarat family). The engine raises it in every profile; whether
# blackjack shoes, shufflers and hand-dealt stud should be judged by 001 §3 is a rules question.

SABOT_GAMES = ["gr-chemin-de-fer", "gr-baccarat-two-tableaux", "gr-banco-punto", "live-baccarat"]


def _history(*sabots: str | None, table: str = "T1") -> dict[str, list[dict[str, str | None]]]:
    return {table: [{"date": f"2026-11-{18 + i:02d}", "sabot": s} for i, s in enumerate(sabots)]}


def _open_at(name: str, sabot: str | None, **kw: object) -> Run:
    r = Run(prof(name), TableEngine(prof(name), **kw))  # type: ignore[arg-type]
    ev: dict[str, object] = {"type": "table_open", "table": "T1", "decks": prof(name).decks.max,
                             "t": T_OPEN}
    if sabot is not None:
        ev["sabot"] = sabot
    r.feed(ev)
    return r


@pytest.mark.parametrize("name", SABOT_GAMES)
def test_sabot_rotation_same_sabot_at_the_last_k_openings(name: str) -> None:
    r = _open_at(name, "S-07", sabot_history=_history("S-07", "S-07", "S-07"))
    (dev,) = only(r, "SABOT_ROTATION")
    assert dev.evidence == {"sabot": "S-07", "table": "T1", "k": 3,
                            "openings": ["2026-11-18", "2026-11-19", "2026-11-20"]}
    assert r.state == "opening_check"


@pytest.mark.parametrize("name", SABOT_GAMES)
def test_sabot_rotation_not_systematic(name: str) -> None:
    for history, sabot in [
        (_history("S-07", "S-07"), "S-07"),  # only two earlier openings
        (_history("S-07", "S-03", "S-07"), "S-07"),  # rotated in between
        (_history("S-03", "S-03", "S-03"), "S-07"),  # another sabot
        (_history("S-07", "S-07", "S-07", table="T2"), "S-07"),  # another table
        (_history("S-07", "S-07", "S-07"), None),  # no sabot named
        (_history("S-07", "S-07", "S-07", "S-03"), "S-07"),  # only the last K count
    ]:
        r = _open_at(name, sabot, sabot_history=history)
        assert r.proc() == {}, (history, sabot)


@pytest.mark.parametrize("name", SABOT_GAMES)
def test_sabot_rotation_k_is_a_setting(name: str) -> None:
    only(_open_at(name, "S-07", sabot_history=_history("S-07"), sabot_rotation_k=1),
         "SABOT_ROTATION")
    assert _open_at(name, "S-07", sabot_history=_history("S-07", "S-07", "S-07"),
                    sabot_rotation_k=4).proc() == {}
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            TableEngine(prof(name), sabot_rotation_k=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", SABOT_GAMES)
def test_sabot_rotation_counts_the_days_this_engine_saw(name: str) -> None:
    """Four correct days in a row on one engine, always sabot S-07: the fourth is flagged.
    (The simulator dates every day 2026-11-21: each is moved to a day of its own, its lots
    with it — a table reopened the same day with its sabot is one placement.)"""
    r = Run.of(name)
    for n in range(4):
        evs = [json.loads(json.dumps(e).replace("2026-11-21", f"2026-11-{21 + n}"))
               for e in events(day(name, n, shoes=1))]
        r.feed_all(evs)
        assert r.state == "closed"
        assert r.proc() == ({"SABOT_ROTATION": 1} if n == 3 else {}), n
    assert r.at("SABOT_ROTATION") == [len(r.sent) - len(day(name, 3, shoes=1))]


# --------------------------------------------------------------------------- deviation fields


@pytest.mark.parametrize("name", PROFILES)
def test_deviation_fields(name: str) -> None:
    """Many mistakes in one day: each deviation's severity, message and rule."""
    p = prof(name)
    steps = day(name)
    steps[0].event["decks"] = p.decks.max + 1  # DECK_COUNT (and the checks then mismatch)
    steps[0].event["deck_lots"][0]["first_use"] = "2026-01-01"  # DECK_EXPIRED
    steps[first(steps, "opening_check")].event["cards"].append("JK")
    steps[first(steps, "cut")].event["offset"] = 0  # CUT_TOO_SHALLOW
    mutated = drop(steps, first(steps, "shuffle"), first(steps, "closing_check"))
    mutated = insert(mutated, 1, {"type": "round_end"})  # UNEXPECTED_EVENT
    r = run(name, events(mutated))
    got = set(r.codes())
    assert {"DECK_COUNT", "DECK_EXPIRED", "DECK_FOREIGN_CARD", "CUT_TOO_SHALLOW",
            "SHUFFLE_MISSING", "CHECK_MISSING", "UNEXPECTED_EVENT"} <= got
    cites = citations(p)
    for dev in r.devs():
        assert dev.severity == CATALOG[dev.code].severity
        assert dev.message and dev.message == dev.message.strip()
        m = re.match(r"^(\S+) (.+)$", dev.rule)
        assert m and m.group(1) == name
        assert m.group(2) in cites
        assert re.match(r"00[0-4] (BP )?§\d", m.group(2))
        rec = dev.to_record()
        assert rec["code"] == dev.code and rec["severity"] == str(dev.severity)


# --------------------------------------------------------------------------- SHUFFLE_SUSPECT
# the shuffle screen (docs/shuffle-screening.md): a day dealt by the reference dealer, by
# the book, except that one shoe's pack was shuffled badly


class _WeakDay(TableDay):
    """A correct day except that shoe ``shoe``'s pack comes out of ``model`` (given the
    order the pack was in: new-deck order, or the last shoe's discards round by round)."""

    def __init__(self, profile, seed, plan, shoe, model):
        super().__init__(profile, seed, plan)
        self.weak_shoe, self.model = shoe, model
        self.rounds: list[list[Card]] = []

    def _prepare(self, shoe_no, lots_serial):
        for step in super()._prepare(shoe_no, lots_serial):
            if step.phase == "shuffle" and shoe_no == self.weak_shoe:
                dealt = [c for r in self.rounds for c in r]
                unread = shuffles.rest_of(pack(self.decks), dealt)
                self.stack = self.model(pack(self.decks), self.rounds, unread)
            if step.phase == "shuffle":
                self.rounds = [[]]
            yield step

    def draw(self, phase="deal", **extra):
        for step in super().draw(phase, **extra):
            if step.event["type"] == "card":
                self.rounds[-1].append(self.last_card)
            yield step

    def _round(self):
        yield from super()._round()
        self.rounds.append([])


def _weak_run(name, shoe, model, seed=0):
    steps = list(_WeakDay(prof(name), seed, DayPlan(shoes=2), shoe, model).steps())
    return steps, run(name, events(steps))


@pytest.mark.parametrize("name", [n for n in PROFILES if prof(n).shuffle_screen.enabled])
def test_shuffle_suspect_unshuffled_pack(name: str) -> None:
    steps, r = _weak_run(name, 1, lambda new, rounds, unread: new)
    (dev,) = only(r, "SHUFFLE_SUSPECT")
    assert r.codes() == Counter({"SHUFFLE_SUSPECT": 1})
    cards = [i for i, s in enumerate(steps) if s.event["type"] == "card" and s.shoe == 1]
    at = r.at("SHUFFLE_SUSPECT")[0]
    assert at in cards and cards.index(at) < 10  # within the first ten cards read
    ev = dev.evidence
    assert ev["test"] == "run" and ev["reference"] == "new-deck" and ev["shoe"] == 1
    assert float(ev["value"]) >= float(ev["threshold"]) and ev["raised_at"] <= 10
    # the run names the cards as dealt, in new-deck order
    names = [row["card"] for row in ev["run"]]
    read = [steps[i].event["card"] for i in cards][:len(names)]
    assert names == read


def test_shuffle_suspect_two_riffles_in_the_second_shoe() -> None:
    rng = random.Random(5)
    _, r = _weak_run("live-baccarat", 2,
                     lambda new, rounds, unread: shuffles.riffle(new, rng, 2))
    (dev,) = only(r, "SHUFFLE_SUSPECT")
    assert dev.evidence["shoe"] == 2 and dev.evidence["reference"] == "new-deck"
    assert r.codes() == Counter({"SHUFFLE_SUSPECT": 1})


def test_shuffle_suspect_slug_of_the_last_shoe() -> None:
    rng = random.Random(6)

    def slug(new, rounds, unread):
        kept = [r for r in rounds if r]  # each round one hand, its cards as dealt
        pile = shuffles.collected(kept, [[0] * len(r) for r in kept], unread)
        return shuffles.with_slug(pile, rng, 50, start=60, within=120)

    _, r = _weak_run("gr-banco-punto", 2, slug)
    (dev,) = only(r, "SHUFFLE_SUSPECT")
    ev = dev.evidence
    assert ev["reference"] == "previous-shoe" and ev["reference_details"]["shoe"] == 1
    assert ev["test"] == "run" and ev["shoe"] == 2
    assert r.codes() == Counter({"SHUFFLE_SUSPECT": 1})


def test_shuffle_suspect_riffle_of_the_last_shoes_discards_and_its_replay() -> None:
    # the packet test (docs/shuffle-screening.md): the second shoe is one riffle of the
    # first shoe's discards, collected round by round (gr-banco-punto keeps round piles)
    rng = random.Random(7)

    def riffled(new, rounds, unread):
        kept = [r for r in rounds if r]
        pile = shuffles.collected(kept, [[0] * len(r) for r in kept], unread)
        return shuffles.cut(shuffles.riffle(pile, rng, 1), rng)

    steps, r = _weak_run("gr-banco-punto", 2, riffled)
    (dev,) = only(r, "SHUFFLE_SUSPECT")
    ev = dev.evidence
    assert ev["test"] == "packet" and ev["reference"] == "previous-shoe" and ev["shoe"] == 2
    assert ev["reference_details"]["shoe"] == 1 and "pile" not in ev["reference_details"]
    # a replay feeds the same inputs to a new engine: every output the same, the finding
    # at the same card with the same evidence
    again = run("gr-banco-punto", events(steps))
    assert ([[o.to_record() for o in outs] for outs in again.outputs]
            == [[o.to_record() for o in outs] for outs in r.outputs])


def test_shuffle_suspect_not_with_the_screen_off() -> None:
    p = prof("live-baccarat")
    off = dataclasses.replace(p, shuffle_screen=dataclasses.replace(p.shuffle_screen,
                                                                    enabled=False))
    steps = list(_WeakDay(p, 0, DayPlan(shoes=1), 1, lambda n, r_, u: n).steps())
    assert run(off, events(steps)).codes() == Counter()


COVERAGE = {
    "CHECK_MISSING": [test_check_missing_no_opening_count, test_check_missing_no_closing_count,
                      test_check_missing_play_on_after_closing_count],
    "DECK_INCOMPLETE": [test_deck_incomplete_names_the_missing_card,
                        test_deck_incomplete_names_every_missing_card],
    "DECK_EXTRA_CARD": [test_deck_extra_card],
    "DECK_FOREIGN_CARD": [test_deck_foreign_card, test_foreign_card_in_place_of_a_real_one],
    "DECK_COUNT": [test_deck_count_outside_range, test_deck_count_named_cases,
                   test_deck_count_whole_day_flagged_once],
    "DECK_EXPIRED": [test_deck_expired_at_table_open, test_deck_expired_whole_day_flagged_once,
                     test_two_tableaux_second_shoe_without_new_cards,
                     test_deck_expired_lots_on_a_deck_check],
    "SHUFFLE_SUSPECT": [test_shuffle_suspect_unshuffled_pack,
                        test_shuffle_suspect_two_riffles_in_the_second_shoe,
                        test_shuffle_suspect_slug_of_the_last_shoe,
                        test_shuffle_suspect_riffle_of_the_last_shoes_discards_and_its_replay,
                        test_shuffle_suspect_not_with_the_screen_off],
    "SHUFFLE_MISSING": [test_shuffle_missing_first_shoe, test_shuffle_missing_second_shoe,
                        test_stud_round_without_its_own_shuffle],
    "CUT_MISSING": [test_cut_missing],
    "CUT_TOO_SHALLOW": [test_cut_too_shallow_deck_each_side, test_cut_too_shallow_anywhere],
    "CUT_CARD_MISSING": [test_cut_card_missing],
    "CUT_CARD_POSITION": [test_cut_card_position_declared_outside_window,
                          test_cut_card_position_measured,
                          test_cut_card_position_measured_by_moving_the_event],
    "CUT_CARD_UNEXPECTED": [test_cut_card_unexpected],
    "BURN_COUNT": [test_burn_count_one_short, test_burn_count_one_too_many,
                   test_burn_count_by_value, test_burn_count_dealer_change_short],
    "CARD_BEFORE_BETS_CLOSED": [test_card_before_bets_closed],
    "PLAY_AFTER_LAST_HAND": [test_play_after_last_hand_a_round_after_the_last,
                             test_play_after_last_hand_a_card_after_the_last],
    "CARD_DUPLICATE": [test_card_duplicate_in_a_shoe, test_card_duplicate_stud_single_deck,
                       test_card_duplicate_between_returns],
    "DISCARDS_NOT_RETURNED": [test_discards_not_returned_before_next_round,
                              test_discards_not_returned_wrong_count],
    "DEVICE_FAULT": [test_device_fault_play_goes_on, test_device_fault_counts_the_card],
    "UNEXPECTED_EVENT": [test_unexpected_round_end_in_ready, test_unexpected_table_open_twice,
                         test_unexpected_card_while_closed],
    "PROTOCOL_ERROR": [test_protocol_error_in_any_state_changes_nothing],
    "DEVICE_IDENTITY": [test_device_identity_refused_device],
    "ANCHOR_WRITE_FAILED": [test_anchor_write_failed_is_critical_and_play_goes_on],
    "SABOT_ROTATION": [test_sabot_rotation_same_sabot_at_the_last_k_openings,
                       test_sabot_rotation_counts_the_days_this_engine_saw],
}
