"""One slip, one deviation: the engine resynchronises after a deviation.

A dealer's slip — a round ended early, bets_closed missed, a burn run too long, a round
after the last hand — used to raise a deviation for every card and action that followed
it (17 for one early ``round_end``). After the fix the slip is one deviation and what
follows from it is recorded as ``consequence`` notes naming it, while independent slips
still count one by one. Streams come from the reference dealer (simulators/dealer.py) with
the slip planted; every event also goes through the output-contract checks of ``Run``.
"""

from __future__ import annotations

from collections import Counter

import pytest
from engine_streams import (
    BURN_PHASES,
    BY_VALUE_PROFILES,
    CUT_CARD_PROFILES,
    FIVE_BURN_PROFILES,
    PROFILES,
    SHUFFLER_PROFILES,
    Run,
    Table,
    day,
    drop,
    events,
    first,
    insert,
    move,
    prof,
    round_cards,
    run,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.deviations import Deviation
from controller.engine import TableEngine
from controller.events import parse_event
from controller.outputs import Note
from controller.profiles import load_profile
from tests.budget import examples

SLOW = settings(max_examples=examples(60), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _consequences_name(r: Run, slip: str) -> None:
    for note in r.notes("consequence"):
        assert note.data["slip"] == slip
        assert note.data["code"] and note.data["severity"]
        assert "not counted again" in note.text


def _rounds(steps: list) -> list[int]:
    return sorted({s.round for s in steps if s.round and s.event["type"] == "round_end"})


@SLOW
@given(name=st.sampled_from(PROFILES), seed=st.integers(0, 2), data=st.data())
def test_an_early_round_end_anywhere_is_one_deviation(name: str, seed: int,
                                                      data: st.DataObject) -> None:
    steps = day(name, seed, shoes=1)
    rnd = data.draw(st.sampled_from(_rounds(steps)[:8]), label="round")
    cards = round_cards(steps, rnd)
    k = data.draw(st.integers(1, len(cards) - 1), label="after card")
    at = cards[k - 1] + 1
    mutated = insert(steps, at, {"type": "round_end", "t": steps[at - 1].event["t"]})
    r = run(name, events(mutated))
    devs = r.devs()
    assert len(devs) == 1, r.codes()
    _consequences_name(r, devs[0].code)
    # the rest of the day is clean: the next round is judged afresh
    assert r.states[-1] == run(name, events(steps)).states[-1]


@pytest.mark.parametrize("name", PROFILES)
def test_a_missed_bets_closed_is_one_deviation_every_round(name: str) -> None:
    steps = day(name, 0, shoes=1)
    for rnd in _rounds(steps)[:6]:
        r = run(name, events(drop(steps, first(steps, "bets_closed", rnd=rnd))))
        devs = r.devs()
        assert len(devs) == 1, (rnd, r.codes())
        assert devs[0].code in ("CARD_BEFORE_BETS_CLOSED", "BURN_COUNT")
        _consequences_name(r, devs[0].code)


@pytest.mark.parametrize("name", PROFILES)
@pytest.mark.parametrize("cards_early", [1, 2])
def test_cards_dealt_before_the_bets_closed_are_the_rounds_first_and_one_deviation(
        name: str, cards_early: int) -> None:
    """The bets closed after a round's first card(s), mid-shoe: one
    ``CARD_BEFORE_BETS_CLOSED``, and the round is judged with those cards as its first —
    not one card short (a review found a draw rule, a dealer's total, hands' actions or a
    stub count flagged after the slip, in 30 of 40 days)."""
    steps = day(name, 1, shoes=1)
    for rnd in _rounds(steps)[2:6]:
        closed = first(steps, "bets_closed", rnd=rnd)
        cards = round_cards(steps, rnd)
        if cards[0] != closed + 1 or len(cards) <= cards_early \
                or steps[closed - 1].phase in BURN_PHASES:
            continue  # (a step between them, or a burn just before: another case, below)
        r = run(name, events(move(steps, closed, cards[cards_early - 1] + 1)))
        assert r.codes() == Counter({"CARD_BEFORE_BETS_CLOSED": 1}), (rnd, r.codes())
        _consequences_name(r, "CARD_BEFORE_BETS_CLOSED")
        notes = [n.data for n in r.notes("round") if n.data.get("round") == rnd]
        clean = [n.data for n in run(name, events(steps)).notes("round")
                 if n.data.get("round") == rnd]
        assert notes == clean  # the round's own record: every card, as if in order


@pytest.mark.parametrize("name", PROFILES)
def test_a_card_drawn_and_put_aside_before_the_bets_closed_is_one_deviation(name: str
                                                                           ) -> None:
    """The other reading of the same slip: a card drawn before the bets closed and set
    aside, the round then dealt afresh (as a burn between a shuffler's hands, or a burn
    where the game has none, plants it). The round is judged both ways and its end takes
    the reading with fewer deviations (TableEngine._round_ended): one
    ``CARD_BEFORE_BETS_CLOSED`` and nothing from the round. The extra card moves the
    count of cards left by one: where the cut card's place is exact it may come out a card
    off, and a shuffler's discards come back a card short."""
    steps = day(name, 2, shoes=1)
    for rnd in _rounds(steps)[2:6]:
        closed = first(steps, "bets_closed", rnd=rnd)
        if steps[closed - 1].phase in BURN_PHASES:
            continue
        shoe = steps[closed].shoe
        dealt = Counter(s.event["card"] for s in steps
                        if s.event["type"] == "card" and s.shoe == shoe)
        decks = next(s.event["decks"] for s in steps if s.event["type"] == "table_open")
        spare = next(c for c in (f"{r}{u}" for u in "SHDC" for r in "A23456789TJQK")
                     if dealt[c] < decks)
        extra = {"type": "card", "card": spare, "t": steps[closed].event.get("t")}
        r = run(name, events(insert(steps, closed, extra)))
        codes = r.codes()
        assert codes["CARD_BEFORE_BETS_CLOSED"] == 1, (rnd, codes)
        # (with a shuffler, the card set aside is missing from the discards returned)
        assert set(codes) <= {"CARD_BEFORE_BETS_CLOSED", "CUT_CARD_POSITION",
                              "DISCARDS_NOT_RETURNED"}, (rnd, codes)
        assert max(codes.values()) == 1, (rnd, codes)


def test_cards_read_before_the_bets_closed_and_then_a_round_end_open_no_round() -> None:
    """Cards read before any bets closed, then the round's end, belong to no round opened
    later: the next round is judged on its own cards."""
    name = "gr-banco-punto"
    steps = day(name, 1, shoes=1)
    rnd = _rounds(steps)[3]
    r = run(name, events(drop(steps, first(steps, "bets_closed", rnd=rnd))))
    assert len(r.devs()) == 1, r.codes()
    nxt = [n.data for n in r.notes("round") if n.data.get("round") == rnd]
    clean = [n.data for n in run(name, events(steps)).notes("round")
             if n.data.get("round") == rnd + 1]
    assert [n["cards"] for n in nxt] == [n["cards"] for n in clean]


@pytest.mark.parametrize("name", FIVE_BURN_PROFILES + BY_VALUE_PROFILES)
@pytest.mark.parametrize("over", [1, 2, 3])
def test_a_burn_too_long_is_one_deviation(name: str, over: int) -> None:
    t = Table(name).up_to_the_burn()
    if t.profile.burn.mode == "by-value":
        t.card("7H")
        t.cards(6 + over)
        required = 7
    else:
        t.cards(5 + over)
        required = 5
    t.round(4)
    assert t.run.proc() == Counter({"BURN_COUNT": 1}), t.run.codes()
    (dev,) = t.run.devs("BURN_COUNT")
    assert (dev.evidence["burned"], dev.evidence["required"]) == (required + 1, required)
    notes = t.run.notes("consequence")
    assert [n.data["code"] for n in notes] == ["BURN_COUNT"] * (over - 1)
    _consequences_name(t.run, "BURN_COUNT")


def test_stray_events_of_different_kinds_are_two_findings() -> None:
    """Two stray events while the table is closed (after its day): nothing groups them."""
    e = TableEngine(load_profile("gr-blackjack"))
    e.handle(parse_event({"type": "table_open", "table": "T1", "decks": 6,
                          "t": "2026-11-21T09:00:00Z"}))
    e.handle(parse_event({"type": "table_close", "t": "2026-11-21T09:01:00Z"}))
    outs = e.handle(parse_event({"type": "shuffle", "t": "2026-11-21T10:00:00Z"}))
    outs += e.handle(parse_event({"type": "cut", "offset": 100, "t": "2026-11-21T10:00:01Z"}))
    assert len([o for o in outs if isinstance(o, Deviation)]) == 2, outs


@pytest.mark.parametrize("name", PROFILES)
def test_a_slip_in_the_next_round_counts_again(name: str) -> None:
    """The round played on ends the episode: an early round_end in round 2 and a missed
    bets_closed in round 3 are two slips, two deviations."""
    steps = day(name, 0, shoes=1)
    r2 = round_cards(steps, 2)
    missed = first(steps, "bets_closed", rnd=3)
    mutated = drop(insert(steps, r2[1] + 1, {"type": "round_end"}), missed + 1)
    r = run(name, events(mutated))
    assert len(r.devs()) == 2, r.codes()
    assert r.at(r.devs()[1].code)[-1] > missed  # the second one is round 3's


def test_the_engine_groups_nothing_on_a_clean_day() -> None:
    for name in PROFILES:
        r = run(name, events(day(name, 1, shoes=1)))
        assert r.notes("consequence") == [] and r.codes() == Counter()


@pytest.mark.parametrize("name", CUT_CARD_PROFILES)
@pytest.mark.parametrize("seed", [0, 1, 4])  # (two tableaux, seed 4: the round not dealt)
def test_a_last_round_left_open_ends_there_and_the_next_shoe_is_judged(name: str, seed: int
                                                                       ) -> None:
    """A review: with the last round's round_end missing, the next shoe's shuffle, cut, load
    and bets were refused and each of its cards counted against the finished shoe (about
    490 deviations, the second shoe never judged). Now the next shoe's first step ends the
    round: one UNEXPECTED_EVENT naming the missing round_end — none where the round was
    not dealt (the end card came before its first card: 001 §2) — and the next shoe is
    judged as ever, a slip planted in it included."""
    steps = day(name, seed, shoes=2)
    last = [i for i, s in enumerate(steps) if s.shoe == 1 and s.event["type"] == "round_end"][-1]
    dealt = bool(round_cards(steps, steps[last].round))
    r = run(name, events(drop(steps, last)))
    if dealt:
        (dev,) = r.devs()
        assert dev.code == "UNEXPECTED_EVENT" and dev.evidence["missing"] == "round_end"
        assert r.at("UNEXPECTED_EVENT") == [last]
    else:
        assert r.codes() == Counter() and r.notes("round_not_dealt")
    assert r.engine.shoe == 2 and r.state == "closed"
    cut = first(steps, "cut", shoe=2)
    assert run(name, events(drop(steps, last, cut))).proc()["CUT_MISSING"] == 1


@pytest.mark.parametrize("name", ["gr-chemin-de-fer", "gr-baccarat-two-tableaux"])
def test_a_card_replaced_after_a_round_the_end_card_left_undealt_is_taken(name: str) -> None:
    """A review: the end card came first after bets closed (001 §2: no further hand), the
    dealer wrote no round_end (nothing to collect) and replaced a damaged card before the
    reshuffle: UNEXPECTED_EVENT, where a count, a shuffle or a dealer change in the same
    place were taken. It is taken too; in a round with cards dealt it is still refused."""
    for seed in range(12):
        steps = day(name, seed, shoes=2)
        last = [i for i, s in enumerate(steps)
                if s.shoe == 1 and s.event["type"] == "round_end"][-1]
        if not round_cards(steps, steps[last].round):
            break
    else:
        pytest.fail("no day of 12 whose shoe 1 ends with a round not dealt")
    replaced = {"type": "card_replaced", "card": "7C"}
    r = run(name, events(insert(drop(steps, last), last, replaced)))
    assert r.codes() == Counter() and r.notes("round_not_dealt")
    assert [n.data for n in r.notes("card_replaced")] == [{"card": "7C"}]
    mid = round_cards(steps, 3)[1]  # inside a dealt round: not before the next shuffle
    r = run(name, events(insert(steps, mid, replaced)))
    assert r.codes() == Counter({"UNEXPECTED_EVENT": 1}) and r.at("UNEXPECTED_EVENT") == [mid]


@pytest.mark.parametrize("name", PROFILES)
def test_a_card_replaced_in_place_of_a_round_end_is_one_deviation(name: str) -> None:
    """A review: a damaged card replaced once the round's cards were all dealt, its
    round_end not written — refused, then the next bets_closed ended the round: two
    deviations for one missing round_end. Where the referee can tell that no card of the
    round is still due (blackjack, punto banco, chemin de fer, stud), the replacement ends
    the round (one UNEXPECTED_EVENT naming the missing round_end) and is taken; a game
    whose referee cannot tell (two tableaux) keeps the two."""
    steps = day(name)
    replaced = {"type": "card_replaced", "card": "7C"}
    for rnd in (2, 3, 4):
        end = first(steps, "round_end", rnd=rnd)
        r = run(name, events(insert(drop(steps, end), end, replaced)))
        if name == "gr-baccarat-two-tableaux":
            assert r.proc() == Counter({"UNEXPECTED_EVENT": 2}), r.codes()
            continue
        assert r.proc() == Counter({"UNEXPECTED_EVENT": 1}), r.codes()
        dev, = r.devs("UNEXPECTED_EVENT")
        assert dev.evidence["missing"] == "round_end" and r.at("UNEXPECTED_EVENT") == [end]
        assert [n.data for n in r.notes("card_replaced")] == [{"card": "7C"}]


@pytest.mark.parametrize("exposed", [False, True])
def test_a_card_replaced_before_the_round_end_is_one_deviation_after_an_exposed_card(
        exposed: bool) -> None:
    """A review's independent dealer: a damaged card replaced before the round's
    round_end, in a round that had a card exposed (EXPOSED_CARD, an info: a fact, no slip),
    was two deviations — the info held the round's slip, so the round_end after the
    replacement was refused as well — where without the exposed card it is one."""
    t = Table("gr-blackjack").prepare()
    t.bets(boxes=[2, 5])

    def card(face: str, to: str, **kw: object) -> None:
        t.put_next(face)
        t.send("card", card=face, to=to, **kw)
        t.pos += 1

    for face, to in (("TD", "box2"), ("7H", "box5"), ("JD", "dealer"), ("3S", "box2")):
        card(face, to)
    if exposed:  # burned (000 §8), and the box's card dealt again
        card("2S", "box5", exposed=True)
    card("3C", "box5")
    card("JC", "box2")  # box 2: 23, bust
    card("9H", "box5")  # box 5: 19
    t.send("action", action="stand")
    card("QC", "dealer")  # the dealer's 20: the round's every card is out
    t.send("card_replaced", card="TH")
    outs = t.send("round_end")
    assert t.run.proc() == Counter({"UNEXPECTED_EVENT": 1}), t.run.codes()
    assert t.run.codes()["EXPOSED_CARD"] == int(exposed)
    assert [o.kind for o in outs if isinstance(o, Note)] == ["consequence"]


@pytest.mark.parametrize("name", PROFILES)
def test_a_round_end_one_step_late_is_one_deviation(name: str) -> None:
    """A review: a round_end written after the next step (the next bets_closed; in stud,
    the next round's shuffle; with a shuffler, the return of the discards) — the step ended
    the round (round_end missing), then the late round_end ended the round just opened and
    its first card was a critical CARD_BEFORE_BETS_CLOSED. It is now the late one: a note,
    one deviation in all."""
    steps = day(name)
    for rnd in (1, 2, 3):
        end = first(steps, "round_end", rnd=rnd)
        if steps[end + 1].event["type"] == "dealer_change":
            continue
        r = run(name, events(move(steps, end, end + 2)))
        assert sum(r.proc().values()) == 1, (rnd, r.codes())
        assert (r.at("UNEXPECTED_EVENT") or r.at("DISCARDS_NOT_RETURNED")) == [end]
        assert r.engine.state == "closed"


@pytest.mark.parametrize("name", SHUFFLER_PROFILES)
def test_a_round_end_after_the_return_and_the_next_bets_is_one_deviation(name: str
                                                                          ) -> None:
    """The sweep (47 of 49 in gr-banco-punto-shuffler): a shuffler round's round_end written
    after the return of its discards and the next bets_closed — the return ended the round
    (round_end missing), the bets opened the next, and the late round_end ended that one:
    its first card was a critical CARD_BEFORE_BETS_CLOSED. It is the last round's, late."""
    steps = day(name)
    ones = tried = 0
    for rnd in range(2, 14):
        end = first(steps, "round_end", rnd=rnd)
        if [s.event["type"] for s in steps[end + 1:end + 4]] != [
                "discards_returned", "bets_closed", "card"]:
            continue
        tried += 1
        r = run(name, events(move(steps, end, end + 3)))
        ones += r.codes() == Counter({"UNEXPECTED_EVENT": 1}) and bool(
            r.notes("late_round_end"))
    assert tried >= 8 and ones >= tried - 1, (ones, tried)


@pytest.mark.parametrize("name", [p for p in PROFILES if not prof(p).shuffler_mode
                                  and not prof(p).shuffle.every_round])
def test_a_round_end_after_the_next_rounds_first_card_is_one_deviation(name: str) -> None:
    """A review's sweep: a round_end written after the next bets_closed and the next round's
    first card ended that round after one card, and its next card was a critical
    CARD_BEFORE_BETS_CLOSED: three. A round_end while the round the bets_closed opened is
    still in its first deal (the referee says so) is the last round's, late: one."""
    steps = day(name)
    ones = tried = 0
    for rnd in range(2, 14):
        end = first(steps, "round_end", rnd=rnd)
        if [s.event["type"] for s in steps[end + 1:end + 3]] != ["bets_closed", "card"]:
            continue
        tried += 1
        r = run(name, events(move(steps, end, end + 3)))
        ones += sum(r.codes().values()) == 1
    assert tried >= 8 and ones >= tried - 1, (ones, tried)


@pytest.mark.parametrize("name", ["gr-blackjack", "live-baccarat"])
def test_two_round_ends_missing_are_two_deviations_not_three(name: str) -> None:
    """A review: round 2's round_end missing, round 3 stopped after two cards and its
    round_end missing too — the marker the first left made the round_end the engine sends
    for the second look late: the same UNEXPECTED_EVENT twice. Two slips, two."""
    steps = day(name)
    end2 = first(steps, "round_end", rnd=2)
    end3 = first(steps, "round_end", rnd=3)
    cards3 = round_cards(steps, 3)
    short = drop(steps, end2, *cards3[2:], end3)
    r = run(name, events(short))
    assert r.proc()["UNEXPECTED_EVENT"] == 2 and not r.notes("late_round_end"), r.codes()


@pytest.mark.parametrize("name", SHUFFLER_PROFILES)
def test_a_rounds_last_card_read_after_its_discards_went_back_is_one_deviation(
        name: str) -> None:
    """A review's sweep: a round's last card read after its round_end and the return of
    its discards (which held it) — the round short of a card, the card before the next
    bets a critical CARD_BEFORE_BETS_CLOSED, and the next return one short: three. The
    return one more than read takes that card; read before the next bets, it is the last
    round's, late: the round's own finding alone."""
    tried = ones = 0
    for seed in (0, 1):
        steps = day(name, seed)
        for i in range(len(steps) - 3):
            if steps[i].event["type"] == "card" and [
                    s.event["type"] for s in steps[i + 1:i + 3]] == [
                    "round_end", "discards_returned"]:
                r = run(name, events(move(steps, i, i + 3)))
                tried += 1
                ones += sum(r.codes().values()) == 1
    assert tried >= 60 and ones >= tried - 2, (ones, tried)


@pytest.mark.parametrize("name", [p for p in CUT_CARD_PROFILES  # (two tableaux: its
                                  if p != "gr-baccarat-two-tableaux"])  # days end no such way)
def test_a_shoes_last_card_read_after_the_next_shuffle_is_one_deviation(name: str) -> None:
    """A review's sweep: a shoe's last card read after its round_end and the next shuffle —
    the round short of it (its rule's finding), then the card taken as the next shoe's
    first burn with its load implied (CUT_MISSING, CUT_CARD_MISSING), its cut, cut card
    and load refused, the burn one long, the pack a card off: five to eight. Before the
    next shoe's first card, a card after a last round short of one is that card, late."""
    tried = 0
    for seed in (0, 1, 2):
        steps = day(name, seed)
        for i in range(len(steps) - 3):
            if steps[i].event["type"] == "card" and [
                    s.event["type"] for s in steps[i + 1:i + 3]] == ["round_end", "shuffle"]:
                r = run(name, events(move(steps, i, i + 3)))
                assert sum(r.codes().values()) == 1, (seed, i, r.codes())
                assert r.notes("late_card")
                tried += 1
    assert tried >= 2


@pytest.mark.parametrize("name", SHUFFLER_PROFILES)
def test_the_discards_of_a_round_after_the_start_burn_end_it(name: str) -> None:
    """A review: round 1's round_end missing (the first round after the start burn), then
    its discards went back — refused as a late reading of the shoe's own (that exception is
    for a shuffle or a count), so those cards stayed out: four deviations. Now one."""
    steps = day(name)
    r = run(name, events(drop(steps, first(steps, "round_end", rnd=1))))
    assert r.proc() == Counter({"UNEXPECTED_EVENT": 1}), r.codes()


@pytest.mark.parametrize("name", SHUFFLER_PROFILES)
def test_discards_returned_after_the_next_bets_closed_are_taken(name: str) -> None:
    """A review: the return of a round's discards written after the next bets_closed —
    DISCARDS_NOT_RETURNED at the bets, then the return refused (those cards never went back)
    and the next return flagged again: three. The late return is taken (a note): one."""
    steps = day(name)
    back = first(steps, "discards_returned", rnd=3)
    assert steps[back + 1].event["type"] == "bets_closed"
    r = run(name, events(move(steps, back, back + 2)))
    assert r.proc() == Counter({"DISCARDS_NOT_RETURNED": 1}), r.codes()
    assert r.notes("late_return")
    late = move(steps, back, back + 3)  # after the round's first card too
    r = run(name, events(late))
    assert r.proc() == Counter({"DISCARDS_NOT_RETURNED": 1}), r.codes()


@pytest.mark.parametrize("name", SHUFFLER_PROFILES)
def test_a_card_returned_a_round_late_is_one_deviation(name: str) -> None:
    """A review: one card held back from a round's return and sent with the next — the
    short return flagged, and the next (one card more than that round's) flagged again."""
    steps = day(name)
    back = first(steps, "discards_returned", rnd=3)
    nxt = first(steps, "discards_returned", rnd=4)
    steps[back].event["count"] -= 1
    steps[nxt].event["count"] += 1
    r = run(name, events(steps))
    assert r.proc() == Counter({"DISCARDS_NOT_RETURNED": 1}), r.codes()
    assert r.at("DISCARDS_NOT_RETURNED") == [back]


@pytest.mark.parametrize("name", [p for p in PROFILES if prof(p).cut.required])
def test_a_cut_recorded_one_step_late_is_one_deviation(name: str) -> None:
    """A review: the cut written after the next step (the cut card placed, the load, a
    stud round's bets) — CUT_MISSING there, then the cut refused: two for one slip. The
    cut is taken as late (a note), its depth still judged; once a card is out it is refused
    (but for a round's first card where no burn came before it: the next test)."""
    steps = day(name)
    cut = first(steps, "cut", shoe=2)
    r = run(name, events(move(steps, cut, cut + 2)))
    assert r.proc() == Counter({"CUT_MISSING": 1}), r.codes()
    assert [n.data["offset"] for n in r.notes("late_cut")] == [steps[cut].event["offset"]]
    if steps[cut + 2].event["type"] == "shoe_loaded":  # after the load too, no card out:
        # still this shoe's (it was a new shoe's where the load leads to the bets, a review:
        # SHUFFLE_MISSING and CUT_CARD_MISSING as well)
        r = run(name, events(move(steps, cut, cut + 3)))
        assert r.proc() == Counter({"CUT_MISSING": 1}), r.codes()
        assert r.notes("late_cut")
    steps[cut].event["offset"] = 0  # too shallow: judged as a cut in place would be
    r = run(name, events(move(steps, cut, cut + 2)))
    assert r.codes() == Counter({"CUT_MISSING": 1, "CUT_TOO_SHALLOW": 1})


@pytest.mark.parametrize("step", ["cut", "shuffle"])
def test_a_stud_rounds_shuffle_or_cut_recorded_two_steps_late_is_one_deviation(step: str
                                                                              ) -> None:
    """The sweep (gr-stud-poker, 32 mutations): a round's cut written after its bets and
    first card, or its shuffle after its cut and bets — CUT_MISSING (SHUFFLE_MISSING) there,
    then the step refused: two for one slip. Before a second card (a stud deal burns none),
    that step is the one flagged, late: a note."""
    name = "gr-stud-poker"
    steps = day(name)
    done = 0
    for rnd in range(3, 12):
        at = first(steps, step, rnd=rnd) if step == "cut" else first(steps, step, shoe=rnd)
        r = run(name, events(move(steps, at, at + 3)))
        want = "CUT_MISSING" if step == "cut" else "SHUFFLE_MISSING"
        assert r.proc() == Counter({want: 1}), (rnd, r.codes())
        assert r.notes(f"late_{step}"), rnd
        done += 1
    assert done >= 5


@pytest.mark.parametrize("name", ["gr-blackjack", "gr-blackjack-shuffler"])
def test_a_double_recorded_after_its_card_is_one_deviation(name: str) -> None:
    """A review: a double written after its one card — refused on three cards (one slip),
    but still applied, so the hand waited for a fourth: HAND_CARD_MISSING; and where that
    card made 21, the double went to the next box, refused there, then that box's own stand
    and card (three). The double is now the hand's of the card before it: one
    ACTION_NOT_ALLOWED, every time (000 §15: a double on the first two cards)."""
    moved = one = 0
    for seed in (0, 1, 2):
        steps = day(name, seed)
        for i, s in enumerate(steps):
            if s.event == {**s.event, "type": "action", "action": "double"} \
                    and steps[i + 1].event["type"] == "card":
                r = run(name, events(move(steps, i, i + 2)))
                n = sum(r.codes().values())
                assert 1 <= n <= 3, (seed, i, r.codes())
                moved += 1
                one += n == 1
    # (the rest: two doubles in a row, a split hand's double — where the slip and the
    # play around it cannot be told apart at the card)
    assert moved >= 30 and one >= 0.9 * moved, (one, moved)


@pytest.mark.parametrize("name", ["gr-chemin-de-fer", "gr-baccarat-two-tableaux"])
def test_bets_closed_missing_in_the_round_the_end_card_shows_in_is_one_deviation(
        name: str) -> None:
    """A review: the last round's bets_closed missing and the end card showing during it
    (001 §2: that hand is finished) — its cards before the end card were
    CARD_BEFORE_BETS_CLOSED, and the end card then read as coming before a round, so the
    round's own cards after it were a critical PLAY_AFTER_LAST_HAND as well."""
    tried = 0
    for seed in range(12):
        steps = day(name, seed)
        for at in (i for i, s in enumerate(steps) if s.event["type"] == "cut_card"):
            rnd = steps[at].round
            cards = round_cards(steps, rnd)
            if not cards or cards[0] > at or cards[-1] < at:
                continue  # (the end card before the round's first card, or after it)
            tried += 1
            r = run(name, events(drop(steps, first(steps, "bets_closed", rnd=rnd))))
            assert r.proc() == Counter({"CARD_BEFORE_BETS_CLOSED": 1}), (seed, r.codes())
    assert tried >= 3


@pytest.mark.parametrize("name", PROFILES)
def test_a_count_recorded_one_step_late_is_one_deviation(name: str) -> None:
    """A review: the closing count written after table_close, or the opening count after
    the first round's bets closed — CHECK_MISSING, then the count refused: two for one
    slip. The count is taken as late (a note) and the pack judged as in place."""
    steps = day(name)
    closing = first(steps, "closing_check")
    close = first(steps, "table_close")
    r = run(name, events(move(steps, closing, close + 1)))
    assert r.proc() == Counter({"CHECK_MISSING": 1}), r.codes()
    assert r.notes("late_count") and r.state == "closed"
    opening = first(steps, "opening_check")
    r = run(name, events(move(steps, opening, round_cards(steps, 1)[0])))
    assert r.proc() == Counter({"CHECK_MISSING": 1}), r.codes()
    assert r.notes("late_count")
    steps[closing].event["cards"] = steps[closing].event["cards"][1:]  # a card missing
    r = run(name, events(move(steps, closing, close + 1)))
    assert r.proc() == Counter({"CHECK_MISSING": 1, "DECK_INCOMPLETE": 1}), r.codes()


def test_a_slip_that_repeats_after_a_slip_of_another_kind_is_grouped_too() -> None:
    """A review: the end card placed 11 from the back (CUT_CARD_POSITION) and then a hand
    dealt after it showed raised PLAY_AFTER_LAST_HAND for each of its cards — the grouping
    followed the first slip only. A slip that repeats card by card takes over."""
    from controller.deviations import Severity
    from controller.engine.resync import resync

    def dev(code: str) -> Deviation:
        return Deviation(code, Severity.WARNING, code.lower(), "001 §2", {})

    out, slip = resync([dev("CUT_CARD_POSITION")], None, "cut_card", "last_round")
    assert [o.code for o in out] == ["CUT_CARD_POSITION"]
    out, slip = resync([dev("PLAY_AFTER_LAST_HAND")], slip, "card", "last_round")
    assert [type(o) for o in out] == [Deviation] and slip is not None
    assert slip.code == "PLAY_AFTER_LAST_HAND"
    for _ in range(4):
        out, slip = resync([dev("PLAY_AFTER_LAST_HAND")], slip, "card", "last_round")
        assert not any(isinstance(o, Deviation) for o in out)
        assert out[0].kind == "consequence"  # type: ignore[union-attr]
    out, slip = resync([dev("CARD_DUPLICATE")], slip, "card", "last_round")
    assert [o.code for o in out] == ["CARD_DUPLICATE"]  # another kind: its own deviation


@pytest.mark.parametrize("name", CUT_CARD_PROFILES)
def test_rounds_dealt_after_the_last_hand_are_one_slip_until_the_shoe_is_reshuffled(
        name: str) -> None:
    """A review moved a shoe's cut-card reading into the next shoe's burn: the reading
    is implausible (CUT_CARD_POSITION) but taken, so the next round was the last, and
    every round after it — the whole shoe — was its own PLAY_AFTER_LAST_HAND (up to 86).
    Not reshuffling is one slip: one PLAY_AFTER_LAST_HAND, the rest consequence notes."""
    steps = day(name, 1, shoes=2)
    cut_card = first(steps, "cut_card", shoe=1)
    loaded = first(steps, "shoe_loaded", shoe=2)
    late = [*steps[:cut_card], *steps[cut_card + 1:loaded + 1], steps[cut_card],
            *steps[loaded + 1:]]
    r = run(name, events(late))
    assert r.codes() == Counter({"CUT_CARD_POSITION": 1, "PLAY_AFTER_LAST_HAND": 1})
    assert len(r.notes("consequence")) > 5
    # and the slip ends with the shoe: a third shoe after a reshuffle is judged afresh
    three = day(name, 1, shoes=3)
    cut_card, loaded = first(three, "cut_card", shoe=1), first(three, "shoe_loaded", shoe=2)
    late = [*three[:cut_card], *three[cut_card + 1:loaded + 1], three[cut_card],
            *three[loaded + 1:]]
    end = [i for i, s in enumerate(late) if s.shoe == 3 and s.phase == "round_end"][-1]
    begin = max(i for i in range(end) if late[i].event["type"] == "bets_closed")
    again = [*late[:end + 1], *late[begin:end + 1], *late[end + 1:]]  # its last round twice
    r = run(name, events(again))
    assert r.codes()["PLAY_AFTER_LAST_HAND"] == 2


@pytest.mark.parametrize("name", [*FIVE_BURN_PROFILES, *BY_VALUE_PROFILES])
def test_a_burn_card_read_without_shoe_loaded_implies_the_load(name: str) -> None:
    """A review dropped shoe_loaded where a burn follows: the first burn card was refused
    (UNEXPECTED_EVENT), the burn judged '0 burned' and the cut card one card off at the
    shoe's end. Loading cannot be skipped: the first card read implies it."""
    steps = day(name, 0, shoes=2)
    r = run(name, events(drop(steps, first(steps, "shoe_loaded", shoe=1))))
    assert r.codes() == Counter()
    assert r.notes("load_implied")


EXACT_CUT_CARD = ["gr-banco-punto", "live-baccarat", "gr-chemin-de-fer",
                  "gr-baccarat-two-tableaux"]  # the cut card's place exact: 7 or 10 cards


@pytest.mark.parametrize("name", CUT_CARD_PROFILES)
@pytest.mark.parametrize("seed", [0, 1])
def test_a_cut_card_that_came_out_unread_is_implied_and_a_correct_shoe_stays_clean(
        name: str, seed: int) -> None:
    """PROCEDURES §2.10. A review's sweep: with the cut card's reading lost, dealing past
    it was never judged. A card read from behind its place (past both the place declared
    and the rule's lowest, by more than a card: a reading one card late is measured) implies
    it came out: a note, no deviation, so a dealer who finished the round and reshuffled
    stays clean…"""
    steps = day(name, seed, shoes=2)
    r = run(name, events(drop(steps, first(steps, "cut_card", shoe=1))))
    assert r.codes() == Counter()
    for note in r.notes("cut_card_implied"):  # (where the last hand went on long enough)
        window = prof(name).cut_card.window()
        assert window is not None
        assert note.data["left"] < min(note.data["declared_behind"], window[0])


@pytest.mark.parametrize("name", EXACT_CUT_CARD)
def test_a_round_dealt_past_an_unread_cut_card_is_play_after_the_last_hand(name: str) -> None:
    """… and one who deals another round after it is judged as after any cut card."""
    steps = day(name, 0, shoes=2)
    gone = drop(steps, first(steps, "cut_card", shoe=1))
    end = [i for i, s in enumerate(gone) if s.shoe == 1 and s.phase == "round_end"][-1]
    begin = max(i for i in range(end) if gone[i].event["type"] == "bets_closed")
    more = [*gone[:end + 1], *gone[begin:end + 1], *gone[end + 1:]]  # a round more
    r = run(name, events(more))
    assert r.codes()["PLAY_AFTER_LAST_HAND"] == 1
    assert r.notes("cut_card_implied")


@pytest.mark.parametrize("name", [p for p in PROFILES if prof(p).inspection.opening_check])
def test_an_opening_count_made_after_the_shuffle_is_one_check_missing(name: str) -> None:
    """A review moved the opening count after the stack was loaded: it was taken as a
    closing count, ending the shoe, and the shoe's own shuffle, cut, cut card and burn
    were then flagged as missing (7 deviations, 5 of them for steps done). The count of
    the first shoe's pack before any round is its opening count, late: CHECK_MISSING
    (at the shuffle) and nothing else."""
    steps = day(name, 0, shoes=1)
    check = first(steps, "opening_check")
    last_prep = max(i for i, s in enumerate(steps) if s.round == 0 and i > check
                    and s.event["type"] in ("shuffle", "cut", "cut_card_placed",
                                            "shoe_loaded"))
    late = [*steps[:check], *steps[check + 1:last_prep + 1], steps[check],
            *steps[last_prep + 1:]]
    r = run(name, events(late))
    assert r.codes() == Counter({"CHECK_MISSING": 1})
    assert r.notes("late_opening_count")


def test_events_refused_while_the_table_is_closed_count_once_a_kind() -> None:
    """A review played a day after the table's close: every event of it was its own
    UNEXPECTED_EVENT (up to 1,188). Now one per kind of event (a stray shuffle and a stray
    cut are still two: test_stray_events_of_different_kinds_are_two_findings), the rest
    consequence notes; the next table_open starts afresh."""
    for name in PROFILES:
        steps = day(name, 0, shoes=1)
        # (from the bets of round 1, no count or shuffle: they would open a day)
        lost = [e for e in events(steps[first(steps, "bets_closed", rnd=1):])
                if e["type"] not in ("deck_check", "shuffle")]
        r = run(name, [*events(steps), *lost, *events(steps)])
        kinds = {e["type"] for e in lost}  # (its table_close too: the table is closed)
        assert r.codes() == Counter({"UNEXPECTED_EVENT": len(kinds)}), name
        assert len(r.notes("consequence")) == len(lost) - len(kinds)
        assert r.state == "closed"  # the real day after it, judged clean


@pytest.mark.parametrize("name", PROFILES)
def test_a_day_whose_table_open_is_missing_is_judged(name: str) -> None:
    """A review's sweep: the day's table_open dropped — every step then refused (one
    UNEXPECTED_EVENT a kind), the table closed all day, and the day's real slips unseen.
    The table is taken as opened at the first step (one UNEXPECTED_EVENT naming the missing
    table_open), and the day is judged: a bets_closed missed later is still caught."""
    steps = day(name, 0, shoes=1)
    lost = drop(steps, first(steps, "table_open"))
    r = run(name, events(lost))
    assert r.codes() == Counter({"UNEXPECTED_EVENT": 1}), r.codes()
    dev, = r.devs("UNEXPECTED_EVENT")
    assert dev.evidence["missing"] == "table_open"
    assert dev.evidence["decks"] == steps[0].event["decks"]
    assert r.state == "closed" and r.engine.shoe >= 1
    bets = first(lost, "bets_closed", rnd=3)
    r = run(name, events(drop(lost, bets)))
    assert r.proc()["CARD_BEFORE_BETS_CLOSED"] == 1, r.codes()
    # a stray first step, then the day's own opening: the day starts again there
    stray = {"type": "shuffle"} if not prof(name).inspection.opening_check else \
        {"type": "deck_check", "cards": steps[1].event["cards"]}
    r = run(name, [stray, *events(steps)])
    assert r.codes() == Counter({"UNEXPECTED_EVENT": 1}), r.codes()
    assert r.notes("late_table_open") and r.state == "closed"
    # any other event before the first opening is a stray one, refused; so is a count of
    # a few cards (a review: it opened the day, and its DECK_INCOMPLETE was a false critical)
    for stray in ({"type": "card", "card": "AS"}, {"type": "deck_check", "cards": ["AS"] * 10}):
        r = run(name, [stray, *events(steps)])
        assert r.codes() == Counter({"UNEXPECTED_EVENT": 1}), r.codes()
        assert not r.notes("late_table_open")
    # the opening count written before the table_open: one deviation, the count kept
    if prof(name).inspection.opening_check:
        r = run(name, [steps[1].event, steps[0].event, *events(steps[2:])])
        assert r.codes() == Counter({"UNEXPECTED_EVENT": 1}), r.codes()
    # a day after a closed one, its table_open lost: judged too (a review: refused whole)
    r = run(name, [*events(steps), *events(drop(lost, bets))])
    assert r.proc() == Counter({"UNEXPECTED_EVENT": 1, "CARD_BEFORE_BETS_CLOSED": 1}), \
        r.codes()
    # once a card is out, a table_open is refused, not a restart of the day mid-round
    first_card = next(i for i, s in enumerate(lost) if s.event["type"] == "card")
    r = run(name, events(insert(lost, first_card + 1, steps[0].event)))
    assert r.codes() == Counter({"UNEXPECTED_EVENT": 2}), r.codes()


@pytest.mark.parametrize("name", ["gr-blackjack", "live-baccarat"])
def test_play_after_the_last_hand_does_not_group_a_slip_of_the_next_shoe(name: str) -> None:
    """A review: after a round played past the last hand, a new shoe begun by a bare
    shoe_loaded (its shuffle, cut and cut card flagged missing) kept the grouping, and a
    bets_closed missed in it was only a note. The grouping ends where a new shoe begins."""
    steps = day(name, 0, shoes=2)
    end = [i for i, s in enumerate(steps) if s.shoe == 1 and s.phase == "round_end"][-1]
    begin = max(i for i in range(end) if steps[i].event["type"] == "bets_closed")
    loaded = first(steps, "shoe_loaded", shoe=2)
    bets = first(steps, "bets_closed", shoe=2)
    mutated = [*steps[:end + 1], *steps[begin:end + 1],  # a round after the last hand
               *steps[loaded:bets], *steps[bets + 1:]]  # a bare reload, then no bets closed
    r = run(name, events(mutated))
    assert r.codes()["PLAY_AFTER_LAST_HAND"] == 1
    # (a burn game reads the round's first card as one burned too many)
    assert r.codes()["CARD_BEFORE_BETS_CLOSED"] + r.codes()["BURN_COUNT"] == 1


def _cut_short(steps: list, rnd: int) -> tuple[list, int]:
    """Shoe 1 dealt to round ``rnd``'s last card (its round_end left out), then the day goes
    on from shoe 2's reshuffle: an early reshuffle (002 §2 3.2.3: after any hand) with the
    round's end not written. Returns the steps and where the reshuffle is."""
    end = next(i for i, s in enumerate(steps) if s.event["type"] == "round_end"
           and s.shoe == 1 and s.round == rnd)
    shuffle = first(steps, "shuffle", shoe=2)
    return steps[:end] + steps[shuffle:], end


@pytest.mark.parametrize("name", ["gr-blackjack", "live-baccarat", "ru-blackjack",
                                  "gr-banco-punto"])
def test_a_reshuffle_mid_shoe_ends_the_round_left_open(name: str) -> None:
    """A review: a round's round_end missing and then a reshuffle mid-shoe — the shuffle
    was refused as a stray one (a shoe with a cut card is reshuffled after its last round)
    and the next shoe's every card counted against the old one (116 deviations). The
    reshuffle ends the round: one UNEXPECTED_EVENT, and the next shoe is judged."""
    steps, at = _cut_short(day(name, 0, shoes=2), 3)
    r = run(name, events(steps))
    assert r.codes() == Counter({"UNEXPECTED_EVENT": 1}), r.codes()
    (dev,) = r.devs()
    assert dev.evidence["missing"] == "round_end" and r.at("UNEXPECTED_EVENT") == [at]
    assert r.engine.shoe == 2 and r.state == "closed"
    empty = insert(_cut_short(day(name, 0, shoes=2), 3)[0], at,  # bets closed, none dealt
                   {"type": "round_end"}, {"type": "bets_closed", "players": 2})
    assert run(name, events(empty)).codes() == Counter({"UNEXPECTED_EVENT": 1})


@pytest.mark.parametrize("name", ["gr-blackjack", "live-baccarat", "gr-chemin-de-fer"])
def test_bets_closed_after_the_last_hand_then_the_reshuffle_is_one_slip(name: str) -> None:
    """A review: one stray bets_closed after the shoe's last hand (PLAY_AFTER_LAST_HAND),
    and the reshuffle, cut, cut card and load were refused, every card of the next shoe
    counted against the old one: 232–413 deviations. The reshuffle ends that round."""
    steps = day(name, 0, shoes=2)
    shuffle = first(steps, "shuffle", shoe=2)
    r = run(name, events(insert(steps, shuffle, {"type": "bets_closed", "players": 1})))
    assert r.codes() == Counter({"PLAY_AFTER_LAST_HAND": 1}), r.codes()
    assert r.notes("round_not_dealt") and r.engine.shoe == 2 and r.state == "closed"


def test_a_closing_count_after_a_round_left_open_mid_shoe_is_judged() -> None:
    """A review: the table closing mid-shoe with the last round's round_end missing — its
    count was refused (a stray count), table_close then raised a false CHECK_MISSING, and
    a card missing from the count was never flagged."""
    name = "gr-blackjack"
    steps = day(name, 0, shoes=2)
    end = next(i for i, s in enumerate(steps) if s.event["type"] == "round_end"
           and s.shoe == 1 and s.round == 3)
    closing = [i for i, s in enumerate(steps) if s.event["type"] == "deck_check"][-1]
    count = dict(steps[closing].event)
    count["cards"] = [c for c in count["cards"] if c != "8D"] + ["8D"] * 5  # one 8D short
    r = run(name, events([*steps[:end], *insert(steps[closing:], 0, count)[:1],
                          *steps[closing + 1:]]))
    assert r.codes() == Counter({"UNEXPECTED_EVENT": 1, "DECK_INCOMPLETE": 1}), r.codes()
