"""Casino stud poker (003 §4, §6–7, §10β–γ): hand ranks and payouts, the dealer's
qualification, the stub count, void hands, the round note, and whole correct days.

Expected facts are written out here from the seed (003 §7's payout table, §4's
52 − 5 × (players + 1)), not read from the code.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from engine_streams import Run, Table, day, events, prof

from controller.deviations import Deviation, Severity
from controller.games.stud import hand_name
from controller.outputs import Note
from controller.poker import (
    PAYOUTS,
    Category,
    compare,
    dealer_qualifies,
    evaluate,
    payout,
    settle,
)

PROFILE = "gr-stud-poker"

# 003 §7: how many times a winning raise is paid ("1 pair of aces or less": high card too).
SEED_PAYOUTS = {
    "high card": 1,
    "one pair": 1,
    "two pair": 2,
    "three of a kind": 3,
    "straight": 4,
    "flush": 5,
    "full house": 7,
    "four of a kind": 20,
    "straight flush": 50,
    "royal flush": 100,
}


# --------------------------------------------------------------------------- hand ranks


@pytest.mark.parametrize(("hand", "rank"), [
    ("AS KD 9H 5C 3D", "high card"),
    ("7S 5D 4H 3C 2D", "high card"),  # 7-high, no straight
    ("KS AD 2H 3C 4D", "high card"),  # K-A-2-3-4 does not wrap
    ("QS KD AH 2C 3D", "high card"),
    ("QS QD 9H 5C 3D", "one pair"),
    ("AS AD 9H 5C 3D", "one pair"),
    ("KS KD 2H 2C 9D", "two pair"),
    ("7S 7D 7H KC 2D", "three of a kind"),
    ("9S TD JH QC KD", "straight"),
    ("AS 2D 3H 4C 5D", "straight"),  # the wheel
    ("5S 4D 3H 2C AD", "straight"),  # the wheel, any order
    ("AS KD QH JC TD", "straight"),  # broadway, mixed suits
    ("2H 7H 9H JH KH", "flush"),
    ("AC 2C 3C 4C 6C", "flush"),  # almost a straight flush
    ("3S 3D 3H 9C 9D", "full house"),
    ("QS QD QH QC 4D", "four of a kind"),
    ("5D 6D 7D 8D 9D", "straight flush"),
    ("AH 2H 3H 4H 5H", "straight flush"),  # steel wheel
    ("9S TS JS QS KS", "straight flush"),  # king high: not royal
    ("TS JS QS KS AS", "royal flush"),
    ("AD KD QD JD TD", "royal flush"),
])
def test_every_rank_and_its_payout(hand: str, rank: str) -> None:
    value = evaluate(hand.split())
    assert value.name == rank
    assert payout(value.category) == SEED_PAYOUTS[rank]
    assert value.payout == SEED_PAYOUTS[rank]


def test_payout_table_is_the_seed_table() -> None:
    assert {c.label: n for c, n in PAYOUTS.items()} == SEED_PAYOUTS
    assert [c.label for c in Category] == list(SEED_PAYOUTS)  # weakest first


def test_cards_accept_ten_notation_and_card_objects() -> None:
    from controller.cards import parse_card

    assert evaluate(["10s", "js", "qs", "ks", "as"]).name == "royal flush"
    quads = [parse_card(c) for c in ["2C", "2D", "2H", "2S", "3C"]]
    assert evaluate(quads).name == "four of a kind"


@pytest.mark.parametrize("n", [0, 4, 6])
def test_a_hand_is_five_cards(n: int) -> None:
    with pytest.raises(ValueError, match="five cards"):
        evaluate(["AS", "KS", "QS", "JS", "TS", "9S"][:n] or [])


# Strictly increasing, one per line: each beats every earlier one.
LADDER = [
    "7S 5D 4H 3C 2D",  # lowest possible high card
    "AS QD 9H 5C 3D",
    "AS KD 4H 3C 2D",
    "AS KD QH JC 9D",
    "2S 2D 5H 4C 3D",
    "2S 2D AH KC QD",
    "KS KD 9H 5C 3D",
    "KS KD AH 5C 3D",  # same pair, better kicker
    "AS AD 4H 3C 2D",
    "3S 3D 2H 2C AD",
    "KS KD 2H 2C 9D",
    "KS KD 3H 3C 2D",  # same top pair, better second pair
    "KS KD 3H 3C 4D",  # same pairs, better kicker
    "AS AD KH KC QD",
    "2S 2D 2H 4C 3D",
    "AS AD AH 3C 2D",
    "AS 2D 3H 4C 5D",  # the wheel is the lowest straight
    "2S 3D 4H 5C 6D",
    "TS JD QH KC AD",
    "2H 3H 4H 5H 7H",
    "AC KC QC JC 9C",
    "2S 2D 2H 3C 3D",
    "2S 2D 2H AC AD",
    "3S 3D 3H 2C 2D",  # trips decide a full house
    "2S 2D 2H 2C 3D",
    "2S 2D 2H 2C AD",
    "3S 3D 3H 3C 2D",
    "AH 2H 3H 4H 5H",
    "2H 3H 4H 5H 6H",
    "9S TS JS QS KS",
    "TH JH QH KH AH",
]


def test_the_ladder_ranks_strictly() -> None:
    values = [evaluate(h.split()) for h in LADDER]
    for i, (a, b) in enumerate(itertools.pairwise(values)):
        assert a < b, (LADDER[i], LADDER[i + 1])
        assert compare(LADDER[i + 1].split(), LADDER[i].split()) == 1
        assert compare(LADDER[i].split(), LADDER[i + 1].split()) == -1


@pytest.mark.parametrize(("a", "b"), [
    ("AS KD 9H 5C 3D", "AH KC 9D 5S 3C"),  # suits never break a tie
    ("QS QD 9H 5C 3D", "QH QC 9D 5S 3C"),
    ("AS 2D 3H 4C 5D", "AH 2C 3D 4S 5C"),
    ("2H 7H 9H JH KH", "2S 7S 9S JS KS"),
    ("TS JS QS KS AS", "TD JD QD KD AD"),
])
def test_equal_hands_tie(a: str, b: str) -> None:
    assert compare(a.split(), b.split()) == 0
    assert evaluate(a.split()) == evaluate(b.split())


# --------------------------------------------------------------------------- qualification


@pytest.mark.parametrize(("hand", "qualifies"), [
    ("AS KD 4H 3C 2D", True),  # ace-king, the weakest qualifying hand
    ("AS KD QH JC 9D", True),
    ("AS QD JH 9C 8D", False),  # ace-queen does not
    ("KS QD JH 9C 8D", False),
    ("7S 5D 4H 3C 2D", False),
    ("2S 2D 5H 4C 3D", True),  # any pair
    ("2S 2D 7H 4C 3D", True),
    ("AS 2D 3H 4C 5D", True),  # the wheel is a straight
    ("2H 7H 9H JH QH", True),  # flush
    ("TS JS QS KS AS", True),
])
def test_dealer_qualifies_with_ace_king_or_better(hand: str, qualifies: bool) -> None:
    assert dealer_qualifies(hand.split()) is qualifies
    assert dealer_qualifies(evaluate(hand.split()), prof(PROFILE).stud.dealer_qualifies) \
        is qualifies


@pytest.mark.parametrize(("player", "dealer", "outcome", "ante", "raise_", "times"), [
    # dealer qualifies: ante 1:1, raise 2 × ante paid the §7 multiple
    ("2H 7H 9H JH KH", "QS QD 9H 5C 3D", "win", 1, 10, 5),
    ("KS KD 2H 2C 9D", "QS QD 9H 5C 3D", "win", 1, 4, 2),
    ("AS KD QH JC 9D", "AH KC 4D 3S 2C", "win", 1, 2, 1),  # high card beats a weaker A-K
    ("TS JS QS KS AS", "2S 2D 5H 4C 3D", "win", 1, 200, 100),
    ("5D 6D 7D 8D 9D", "AS AD 4H 3C 2D", "win", 1, 100, 50),
    ("QS QD QH QC 4D", "AS AD 4H 3C 2D", "win", 1, 40, 20),
    ("3S 3D 3H 9C 9D", "AS AD 4H 3C 2D", "win", 1, 14, 7),
    ("9S TD JH QC KD", "AS AD 4H 3C 2D", "win", 1, 8, 4),
    ("7S 7D 7H KC 2D", "AS AD 4H 3C 2D", "win", 1, 6, 3),
    ("QS QD 9H 5C 3D", "KS KD 2H 5C 3D", "lose", -1, -2, None),
    ("QS QD 9H 5C 3D", "QH QC 9D 5S 3C", "tie", 0, 0, None),
    # dealer does not qualify: ante paid, raise returned, whatever the player holds
    ("TS JS QS KS AS", "AS QD JH 9C 8D", "no-qualify", 1, 0, None),
    ("7S 5D 4H 3C 2D", "AS QD JH 9C 8D", "no-qualify", 1, 0, None),
])
def test_settlement_in_ante_units(player: str, dealer: str, outcome: str, ante: int,
                                  raise_: int, times: int | None) -> None:
    s = settle(player.split(), dealer.split(), raise_multiple=2)
    assert (s.outcome, s.ante, s.raise_, s.payout) == (outcome, ante, raise_, times)


def test_hand_names() -> None:
    assert [hand_name(x) for x in ("p3", "P03", " Dealer ", "DEALER", "box9")] == \
        ["P3", "P3", "dealer", "dealer", "box9"]


# --------------------------------------------------------------------------- rounds


def _table() -> Table:
    t = Table(PROFILE).prepare()
    assert t.state == "ready"
    return t


def _next(t: Table) -> None:
    """Every stud round has its own shuffle and cut (003 §2–4)."""
    t.shuffle()
    t.cut(offset=20)
    assert t.state == "ready"


def _deal(t: Table, hands: dict[str, str], *, players: int | None = None, with_to: bool = True,
          stub: int | str | None = "auto", end: bool = True) -> list[Any]:
    """Deal ``hands`` ({"P1": "AS KD ...", ..., "dealer": "..."}) one card at a time in
    dealing order (P1..Pn, then the dealer), then the stub count and round_end."""
    cards = {h: c.split() for h, c in hands.items()}
    seats = sorted((h for h in cards if h != "dealer"), key=lambda h: int(h[1:]))
    order = [*seats, "dealer"]
    n = players if players is not None else len(seats)
    out = list(t.bets(players=n))  # a copy: the run keeps each event's outputs
    sent = 0
    for k in range(max(len(c) for c in cards.values())):
        for h in order:
            if k < len(cards.get(h, [])):
                ev: dict[str, Any] = {"card": cards[h][k]}
                if with_to:
                    ev["to"] = h
                out += t.send("card", **ev)
                sent += 1
    if stub == "auto":
        stub = 52 - sent
    if stub is not None:
        out += t.send("stub_count", count=stub)
    if end:
        out += t.send("round_end")
    return out


def _devs(outs: list[Any], code: str = "DEAL_COUNT") -> list[Deviation]:
    return [o for o in outs if isinstance(o, Deviation) and o.code == code]


def _note(outs: list[Any]) -> Note:
    notes = [o for o in outs if isinstance(o, Note) and o.kind == "round"]
    assert len(notes) == 1, outs
    return notes[0]


TWO = {
    "P1": "2H 7H 9H JH KH",  # flush
    "P2": "QS QD 9S 5C 3D",  # queens, loses to kings
    "dealer": "KS KD 2S 4C 6D",  # kings, qualifies; up card 6D
}


def test_a_correct_round_settles_every_hand() -> None:
    t = _table()
    outs = _deal(t, TWO)
    assert _devs(outs) == []
    assert t.run.devs() == []
    note = _note(outs)
    d = note.data
    assert d["players"] == 2
    assert d["stub"] == {"count": 37, "expected": 37}
    assert [c["to"] for c in d["cards"]] == ["P1", "P2", "dealer"] * 5
    assert {c["why"] for c in d["cards"]} == {"deal"}
    assert [c["card"] for c in d["cards"][:3]] == ["2H", "QS", "KS"]
    assert d["hands"]["P1"] == {"cards": ["2H", "7H", "9H", "JH", "KH"], "count": 5,
                                "rank": "flush", "void": False}
    assert d["hands"]["dealer"]["up_card"] == "6D"
    assert d["hands"]["dealer"]["qualifies"] is True and d["dealer_qualifies"] is True
    assert d["results"] == {
        "P1": {"outcome": "win", "ante": 1, "raise": 10, "payout": 5},
        "P2": {"outcome": "lose", "ante": -1, "raise": -2},
    }
    assert d["void"] == [] and d["raise_assumed"] is True
    assert "flush: win" in note.text and "qualifies" in note.text
    assert t.state == "shoe_complete"


def test_dealer_without_ace_king_pays_antes_only() -> None:
    t = _table()
    outs = _deal(t, {"P1": "7S 5D 4H 3C 2D", "P2": "TS JS QS KS AS",
                     "dealer": "AH QD JH 9C 8D"})
    d = _note(outs).data
    assert d["dealer_qualifies"] is False
    assert d["results"]["P1"] == d["results"]["P2"] == {"outcome": "no-qualify", "ante": 1,
                                                        "raise": 0}
    assert d["hands"]["P2"]["rank"] == "royal flush"


def _in_turns(hands: dict[str, str]) -> list[tuple[str, str]]:
    """(hand, card) one at a time: P1, P2, …, the dealer, five times."""
    cards = {h: c.split() for h, c in hands.items()}
    return [(h, cards[h][k]) for k in range(5) for h in cards]


def test_players_not_given_are_told_by_whole_rounds_when_only_some_cards_name_a_hand() -> None:
    # bets_closed without players, only the first card named (P1): a two-player deal of 15
    # cards and a stub of 37 is correct (003 §4); P1 alone said "one player"
    t = _table()
    out = list(t.bets())
    for i, (h, c) in enumerate(_in_turns(TWO)):
        out += t.send("card", card=c, **({"to": h} if i == 0 else {}))
    out += t.send("stub_count", count=37)
    out += t.send("round_end")
    assert _devs(out) == [] and t.run.devs() == []
    assert _note(out).data["players"] == 2 and _note(out).data["players_from"] == "cards"


def test_the_stub_is_counted_after_the_deal() -> None:
    # 003 §4: the five cards are dealt; "Στη συνέχεια" (then) the dealer counts the rest
    order = _in_turns(TWO)
    t = _table()
    out = list(t.bets(players=2))
    for h, c in order[:-1]:
        out += t.send("card", card=c, to=h)
    out += t.send("stub_count", count=37)  # the final count, before the dealer's up card
    out += t.send("card", card=order[-1][1], to=order[-1][0])
    out += t.send("round_end")
    (dev,) = _devs(out)
    assert dev.evidence["why"] == "counted before the deal ended"
    assert dev.evidence["dealt_after"] == ["6D"] and dev.evidence["cards_read"] == 14
    assert "before the deal was over" in dev.message and "003 §4" in dev.message
    _next(t)
    out = list(t.bets(players=2))  # counted honestly, but early: one deviation, at the count
    for h, c in order[:-1]:
        out += t.send("card", card=c, to=h)
    out += t.send("stub_count", count=38)
    out += t.send("card", card=order[-1][1], to=order[-1][0])
    out += t.send("round_end")
    (dev,) = _devs(out)
    assert dev.evidence["count"] == 38 and dev.evidence["expected"] == 37
    assert "why" not in dev.evidence


def test_a_stub_that_does_not_make_the_deck_with_the_cards_read_is_flagged() -> None:
    # players unknown, cards not named: 14 cards read and a stub of 37 leave 51 of 52
    t = _table()
    out = list(t.bets())
    for _, c in _in_turns(TWO)[:-1]:
        out += t.send("card", card=c)
    out += t.send("stub_count", count=37)
    out += t.send("round_end")
    (dev,) = _devs(out)
    assert (dev.evidence["count"], dev.evidence["cards_read"], dev.evidence["expected"]) == \
        (37, 14, 38)
    assert "51" in dev.message
    _next(t)
    out = list(t.bets())
    for _, c in _in_turns(TWO):
        out += t.send("card", card=c)
    assert _devs([*out, *t.send("stub_count", count=37), *t.send("round_end")]) == []


def _send_in(t: Table, order: list[tuple[str, str]]) -> list[Any]:
    """A round of TWO's cards sent in the given (hand, card) order, every card with `to`."""
    out = list(t.bets(players=2))
    for h, c in order:
        out += t.send("card", card=c, to=h)
    out += t.send("stub_count", count=37)
    return out + t.send("round_end")


def test_cards_dealt_in_a_batch_are_not_one_at_a_time() -> None:
    # 003 §4: five cards "one at a time" to each player and the dealer: every turn of the
    # deal gives every hand one card — the seats in any order within a turn
    cards = {h: c.split() for h, c in TWO.items()}
    turns = [[(h, cards[h][k]) for h in ("P1", "P2", "dealer")] for k in range(5)]
    t = _table()
    mixed = [x for k, turn in enumerate(turns) for x in (turn if k % 2 else turn[::-1])]
    assert t.run.devs() == [] and _devs(_send_in(t, mixed), "DEAL_ORDER") == []
    _next(t)
    batch = [(h, c) for h in ("P1", "P2", "dealer") for c in cards[h]]  # P1's five, then …
    outs = _send_in(t, batch)
    (dev,) = _devs(outs, "DEAL_ORDER")
    assert dev.severity is Severity.WARNING and _devs(outs) == []  # no hand is void
    assert dev.evidence["turn"] == 1
    assert dev.evidence["cards"] == ["2H to P1", "7H to P1", "9H to P1"]
    assert dev.evidence["order"] == ["P1"] * 5 + ["P2"] * 5 + ["dealer"] * 5
    assert "one at a time" in dev.message and "003 §4" in dev.message
    assert _note(outs).data["results"]["P1"]["outcome"] == "win"  # still settled
    _next(t)
    late = [x for turn in turns for x in turn]  # P1's 3rd card before the dealer's 2nd
    late[5], late[6] = late[6], late[5]
    (dev,) = _devs(_send_in(t, late), "DEAL_ORDER")
    assert dev.evidence["turn"] == 2
    assert [d.code for d in t.run.devs()] == ["DEAL_ORDER", "DEAL_ORDER"]


def test_cards_without_to_follow_the_dealing_order() -> None:
    t = _table()
    outs = _deal(t, TWO, with_to=False)
    assert _devs(outs) == []
    d = _note(outs).data
    assert [c["to"] for c in d["cards"]] == ["P1", "P2", "dealer"] * 5
    assert d["hands"]["P1"]["rank"] == "flush"
    assert d["hands"]["dealer"]["cards"] == ["KS", "KD", "2S", "4C", "6D"]
    assert d["results"]["P1"]["outcome"] == "win"


def test_wrong_stub_count_is_critical() -> None:
    t = _table()
    outs = _deal(t, TWO, stub=36)  # 2 players: 52 − 15 = 37
    devs = _devs(outs)
    assert len(devs) == 1
    dev = devs[0]
    assert dev.severity == Severity.CRITICAL
    assert dev.rule == "gr-stud-poker 003 §4–§7, §10β–γ"
    assert dev.evidence["count"] == 36 and dev.evidence["expected"] == 37
    assert dev.evidence["players"] == 2
    assert "36" in dev.message and "37" in dev.message
    # flagged at the stub count itself
    assert t.run.at("DEAL_COUNT") == [len(t.run.sent) - 2]


@pytest.mark.parametrize(("players", "stub"), [(1, 42), (3, 32), (7, 12), (9, 2)])
def test_stub_count_formula(players: int, stub: int) -> None:
    t = _table()
    t.bets(players=players)
    assert _devs(t.send("stub_count", count=stub)) == []
    assert _devs(t.send("stub_count", count=stub + 5))


def test_missing_stub_count_is_flagged_at_round_end() -> None:
    t = _table()
    outs = _deal(t, TWO, stub=None)
    devs = _devs(outs)
    assert len(devs) == 1
    assert devs[0].evidence["why"] == "stub not counted"
    assert devs[0].evidence["expected"] == 37
    assert t.run.at("DEAL_COUNT") == [len(t.run.sent) - 1]
    assert _note(outs).data["stub"] == {"count": None, "expected": 37}


@pytest.mark.parametrize("cards", ["QS QD 9S 5C", "QS QD 9S 5C 3D 8C"])
def test_player_with_wrong_number_has_that_hand_void(cards: str) -> None:
    t = _table()
    hands = {**TWO, "P2": cards}
    outs = _deal(t, hands, stub=37)  # the stub as the formula wants: only the hands are wrong
    devs = _devs(outs)
    assert len(devs) == 1
    dev = devs[0]
    assert dev.severity == Severity.CRITICAL
    assert dev.evidence["void"] == ["P2"]
    assert dev.evidence["counts"] == {"P1": 5, "P2": len(cards.split()), "dealer": 5}
    assert "P2" in dev.message and "void" in dev.message and "§10β" in dev.message
    d = _note(outs).data
    assert d["void"] == ["P2"]
    assert d["results"]["P2"] == {"outcome": "void"}
    assert d["results"]["P1"]["outcome"] == "win"  # the other hand plays on
    assert d["hands"]["P2"]["void"] is True and d["hands"]["P2"]["rank"] is None


def test_player_misdeal_with_the_true_stub_is_one_finding() -> None:
    """A review: the stub counted right shows the card dealt too many (DEAL_COUNT at the
    stub); the hand it made void is that slip's — a consequence note, not a second
    critical."""
    t = _table()
    outs = _deal(t, {**TWO, "P1": "2H 7H 9H JH KH 3S"})  # stub 36, as the dealer counts it
    devs = _devs(outs)
    assert [d.evidence["check"] for d in devs] == ["stub"]
    follows = [o for o in outs if isinstance(o, Note) and o.kind == "consequence"]
    assert [n.data["evidence"]["void"] for n in follows] == [["P1"]]
    assert follows[0].data["code"] == "DEAL_COUNT"


def test_player_misdeal_with_a_miscounted_stub_is_two_findings() -> None:
    t = _table()
    outs = _deal(t, {**TWO, "P1": "2H 7H 9H JH KH 3S"}, stub=35)  # 36 left, counted 35
    devs = _devs(outs)
    assert [d.evidence["check"] for d in devs] == ["stub", "hands"]
    assert devs[1].evidence["void"] == ["P1"]


@pytest.mark.parametrize("cards", ["KS KD 2S 4C", "KS KD 2S 4C 6D 8H"])
def test_dealer_with_wrong_number_voids_every_hand(cards: str) -> None:
    t = _table()
    outs = _deal(t, {**TWO, "dealer": cards}, stub=37)
    devs = _devs(outs)
    assert len(devs) == 1
    dev = devs[0]
    assert dev.evidence["void"] == ["P1", "P2"]
    assert dev.evidence["dealer"] == len(cards.split())
    assert "every hand" in dev.message and "§10γ" in dev.message
    d = _note(outs).data
    assert d["void"] == ["P1", "P2"]
    assert d["results"] == {"P1": {"outcome": "void"}, "P2": {"outcome": "void"}}
    assert d["dealer_qualifies"] is None


def test_dealing_order_places_an_extra_card_without_to() -> None:
    t = _table()
    # 16 cards for 2 players, no `to`: the 16th goes round again to P1
    outs = _deal(t, {**TWO, "P1": "2H 7H 9H JH KH 3S"}, with_to=False, stub=37)
    devs = _devs(outs)
    assert len(devs) == 1 and devs[0].evidence["void"] == ["P1"]
    assert devs[0].evidence["assigned"] == "dealing order"


def test_dealing_order_short_deal_without_to_voids_all() -> None:
    t = _table()
    # 14 cards for 2 players: the dealer's fifth card is missing
    outs = _deal(t, {**TWO, "dealer": "KS KD 2S 4C"}, with_to=False, stub=37)
    devs = _devs(outs)
    assert len(devs) == 1 and devs[0].evidence["void"] == ["P1", "P2"]


def test_card_to_a_seat_without_a_bet() -> None:
    t = _table()
    outs = _deal(t, {**TWO, "P3": "AS"}, players=2, stub=37)
    devs = _devs(outs)
    assert len(devs) == 1
    assert devs[0].evidence["stray"] == {"P3": ["AS"]} and devs[0].evidence["void"] == []
    assert _note(outs).data["results"]["P1"]["outcome"] == "win"


def test_round_without_read_cards_still_checks_the_stub() -> None:
    t = _table()
    t.bets(players=3)
    assert _devs(t.send("stub_count", count=32)) == []
    outs = t.send("round_end")
    assert _devs(outs) == []
    d = _note(outs).data
    assert d["cards"] == [] and "hands" not in d


def test_every_round_has_its_own_shuffle() -> None:
    t = _table()
    _deal(t, TWO)
    _next(t)
    _deal(t, TWO)
    assert t.run.devs() == []
    outs = _deal(t, TWO)  # no shuffle, no cut before this round
    codes = [o.code for o in outs if isinstance(o, Deviation)]
    assert "SHUFFLE_MISSING" in codes and "CUT_MISSING" in codes
    assert "DEAL_COUNT" not in codes
    assert len(t.run.notes("round")) == 3


# --------------------------------------------------------------------------- whole days


def _strip_to(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k != "to"} for e in evs]


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_correct_days_flag_nothing(seed: int) -> None:
    from controller.engine import TableEngine
    from controller.events import parse_event
    from controller.profiles import load_profile
    from simulators.dealer import table_day

    profile = load_profile(PROFILE)
    engine = TableEngine(profile)
    outs = [o for s in table_day(profile, seed) for o in engine.handle(parse_event(s.event))]
    assert [o for o in outs if isinstance(o, Deviation)] == []
    notes = [o for o in outs if isinstance(o, Note) and o.kind == "round"]
    assert len(notes) >= 20
    for n in notes:
        d = n.data
        assert d["void"] == [] and d["stub"]["count"] == d["stub"]["expected"]
        assert len(d["cards"]) == 5 * (d["players"] + 1)
        assert set(d["results"]) == {f"P{i}" for i in range(1, d["players"] + 1)}
        assert all(h["count"] == 5 and h["rank"] for h in d["hands"].values())


@pytest.mark.parametrize("seed", [0, 3])
def test_days_without_to_give_the_same_rounds(seed: int) -> None:
    evs = events(day(PROFILE, seed))
    assert any("to" in e for e in evs)
    with_to = Run.of(PROFILE).feed_all(evs)
    without = Run.of(PROFILE).feed_all(_strip_to(evs))
    assert with_to.devs() == [] and without.devs() == []
    assert [n.data for n in with_to.notes("round")] == [n.data for n in without.notes("round")]


def test_a_dropped_card_in_a_day_voids_that_hand() -> None:
    steps = day(PROFILE, 1)
    deal = [i for i, s in enumerate(steps) if s.phase == "deal" and s.round == 2]
    victim = deal[-2]  # the last player's fifth card
    hand = steps[victim].event["to"]
    evs = events(steps[:victim] + steps[victim + 1:])
    r = Run.of(PROFILE).feed_all(evs)
    devs = r.devs("DEAL_COUNT")
    assert len(devs) == 1 and devs[0].evidence["void"] == [hand]
    assert [d.code for d in r.devs()] == ["DEAL_COUNT"]
    note = r.notes("round")[1]
    assert note.data["results"][hand] == {"outcome": "void"}


@pytest.mark.parametrize("seed", [0, 1])
def test_a_table_opened_with_two_decks_is_one_deck_count_not_a_deal_count_a_round(
        seed: int) -> None:
    """Stud is dealt from one deck (003 §1): a table that opens with two is
    ``DECK_COUNT`` once. Its rounds' stub counts are judged on the pack it deals from, so
    a correct deal from it raises nothing more (it raised a ``DEAL_COUNT`` every round: ~40
    a day)."""
    from engine_streams import run

    evs = events(day("gr-stud-poker", seed))
    for ev in evs:
        if ev["type"] == "table_open":
            ev["decks"] = 2
        elif ev["type"] == "deck_check":
            ev["cards"] = ev["cards"] * 2
        elif ev["type"] == "stub_count":
            ev["count"] += 52
    r = run("gr-stud-poker", evs)
    assert r.codes() == {"DECK_COUNT": 1}, r.codes()
    # a stub one card off in that pack is still a DEAL_COUNT, naming the pack's size
    at = next(i for i, ev in enumerate(evs) if ev["type"] == "stub_count")
    evs[at] = {**evs[at], "count": evs[at]["count"] - 1}
    r = run("gr-stud-poker", evs)
    assert r.codes() == {"DECK_COUNT": 1, "DEAL_COUNT": 1}, r.codes()
    (dev,) = r.devs("DEAL_COUNT")
    assert "104 − 5 ×" in dev.message


def test_a_seat_beyond_any_table_names_no_player() -> None:
    # one card named to seat 10**20 with no `players` at the bets: the hands were built per
    # seat up to it (memory without end); a seat beyond MAX_SEATS is no player
    t = _table()
    out = list(t.bets())
    out += t.send("card", card="AS", to="P99999999999999999999")
    out += t.send("round_end")
    d = _note(out).data
    assert d["players"] is None
    assert [c["to"] for c in d["cards"]] == ["P99999999999999999999"]
    # a seat a table can have still counts: P7 alone is seven players' deal
    t = _table()
    out = list(t.bets())
    out += t.send("card", card="AS", to="P7")
    out += t.send("round_end")
    assert _note(out).data["players"] == 7
