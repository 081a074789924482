"""The baccarat-family referee: Banco Punto / live baccarat tableau, chemin de fer with its
options, naturals, the round note, exposed cards and dummy hands, shoe passing, two
tableaux, correct simulated days, and a property test with a reference dealer of its own.

Every expected fact is written out here from the seeds (001 §8, 001 BP §5, §9–15,
002 §2 3.4–3.5) and PROCEDURES.md §4 — the tableaux below are literal grids, not taken
from controller/games/baccarat.py.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from typing import Any

import pytest
from engine_streams import Run, Table, day, prof, run
from hypothesis import event, given, settings
from hypothesis import strategies as st

from controller.deviations import CATALOG, Deviation
from controller.events import BetsClosed, CardDrawn, parse_event
from controller.games.baccarat import BaccaratReferee
from controller.outputs import Note
from controller.profiles import Profile
from controller.rounds import referee_for
from simulators.dealer import DayPlan, table_day
from tests.budget import examples

FAMILY = ["gr-banco-punto", "gr-banco-punto-shuffler", "live-baccarat", "gr-chemin-de-fer",
          "gr-baccarat-two-tableaux"]
PUNTO_BANCO = ["gr-banco-punto", "gr-banco-punto-shuffler", "live-baccarat"]
CHEMIN = "gr-chemin-de-fer"

# ----------------------------------------------------------------------------- the tableaux
# D = must draw, S = must stand, O = option (chemin de fer only). Banco/bank rows are the
# two-card total 0–9; the first column is "Punto stood" (no third card), then a space, then
# Punto's third card value 0 1 2 3 4 5 6 7 8 9. Rows 8 and 9 are naturals (no card at all).

# 001 BP §10: Punto 0–5 draws, 6–7 stands (8–9 natural, §12).
PUNTO_PB = "DDDDDDSSSS"
# 001 BP §11 (+ the stand half, §12); Punto stood: 002 §2 3.5.1 iii (Banco draws on 5 or less).
BANCO_PB = {
    #   - 0123456789
    0: "D DDDDDDDDDD",
    1: "D DDDDDDDDDD",
    2: "D DDDDDDDDDD",
    3: "D DDDDDDDDSD",
    4: "D SSDDDDDDSS",
    5: "D SSSSDDDDSS",
    6: "S SSSSSSDDSS",
    7: "S SSSSSSSSSS",
    8: "S SSSSSSSSSS",
    9: "S SSSSSSSSSS",
}
# 001 §8α: the player 0–4 always draws, 5 may or may not, 6–7 never, 8–9 turns over.
PLAYER_CDF = "DDDDDOSSSS"
# 001 §8β–η; player stood: 5 must draw (η), 6 stands (ζ), 0–2 draw (στ), 3–4 draw
# (interpretation), 7 stands (β).
BANK_CDF = {
    #   - 0123456789
    0: "D DDDDDDDDDD",
    1: "D DDDDDDDDDD",
    2: "D DDDDDDDDDD",
    3: "D DDDDDDDDSO",
    4: "D SSDDDDDDSS",
    5: "D SSSSODDDSS",
    6: "S SSSSSSDDSS",
    7: "S SSSSSSSSSS",
    8: "S SSSSSSSSSS",
    9: "S SSSSSSSSSS",
}

# The profile's bank_stood_3_4 = "option": 001 §8 does not state the bank's 3 and 4 when the
# player stood (στ names 0–2, η 5, ζ 6): the house may leave them to the bank.
BANK_CDF_3_4_OPTION = {**BANK_CDF, 3: "O DDDDDDDDSO", 4: "O SSDDDDDDSS"}


def bank_rule(bank: dict[int, str], total: int, third: int | None) -> str:
    return bank[total][0 if third is None else third + 2]


# ----------------------------------------------------------------------------- helpers

SUITS = "SHDC"


def card_of(value: int, k: int = 0) -> str:
    """A card worth ``value`` in baccarat (0 → T/J/Q/K, 1 → A), varied by ``k``."""
    rank = "TJQK"[k % 4] if value == 0 else ("A" if value == 1 else str(value))
    return rank + SUITS[k % 4]


def two_cards(total: int, k: int = 0) -> tuple[str, str]:
    first = (3 * k + total) % 10
    return card_of(first, k), card_of((total - first) % 10, k + 1)


def factory(profile: Profile) -> Any:
    def make(code: str, message: str, **evidence: Any) -> Deviation:
        spec = CATALOG[code]
        return Deviation(code, spec.severity, message, profile.rule(spec.section), evidence)
    return make


def with_baccarat(name: str, **keys: Any) -> Profile:
    """A bundled profile with keys of its ``[baccarat]`` changed."""
    p = prof(name)
    assert p.baccarat is not None
    return dataclasses.replace(p, baccarat=dataclasses.replace(p.baccarat, **keys))


def referee(name: str | Profile) -> BaccaratReferee:
    p = prof(name) if isinstance(name, str) else name
    ref = referee_for(p, factory(p))
    assert isinstance(ref, BaccaratReferee)
    return ref


Token = str | dict[str, Any]


def play(ref: BaccaratReferee, tokens: list[Token], round_no: int = 1) -> list[list[Any]]:
    """One round through the referee: outputs per token, then the outputs of ``end``."""
    outs = [ref.begin(round_no, BetsClosed())]
    for tok in tokens:
        if tok == "stand":
            outs.append(ref.action("stand"))
            continue
        ev = {"type": "card", "card": tok} if isinstance(tok, str) else {"type": "card", **tok}
        e = parse_event(ev)
        assert isinstance(e, CardDrawn)
        outs.append(ref.card(e))
    outs.append(ref.end())
    return outs


def devs(outs: list[list[Any]], code: str = "DRAW_RULE") -> list[Deviation]:
    return [o for group in outs for o in group if isinstance(o, Deviation) and o.code == code]


def round_note(outs: list[list[Any]]) -> Note:
    notes = [o for group in outs for o in group if isinstance(o, Note) and o.kind == "round"]
    assert len(notes) == 1, notes
    assert notes[0] in outs[-1]  # from round_end
    return notes[0]


def all_devs(outs: list[list[Any]]) -> list[Deviation]:
    return [o for group in outs for o in group if isinstance(o, Deviation)]


# ----------------------------------------------------------------------------- the referee


def test_referee_registered_for_the_three_games() -> None:
    for name in FAMILY:
        assert isinstance(referee(name), BaccaratReferee), name


def _initial(p2: int, b2: int, k: int) -> list[Token]:
    p1, p3 = two_cards(p2, k)
    b1, b3 = two_cards(b2, k + 2)
    return [p1, b1, p3, b3]


def _round_tokens(p2: int, b2: int, v: int | None, bank_draws: bool, k: int, *, hints: bool,
                  player: str, bank: dict[int, str]) -> list[Token]:
    tokens = _initial(p2, b2, k)
    natural = p2 >= 8 or b2 >= 8
    if v is not None:
        c = card_of(v, k + 1)
        tokens.append({"card": c, "to": "punto"} if hints else c)
    elif not natural and player[p2] == "O":
        tokens.append("stand")  # the declined option is recorded
    if bank_draws:
        c = card_of((b2 + k) % 10, k + 3)
        tokens.append({"card": c, "to": "banco"} if hints else c)
    elif not natural and bank_rule(bank, b2, v) == "O":
        tokens.append("stand")
    return tokens


def _wrong(p2: int, b2: int, v: int | None, bank_draws: bool, player: str,
           bank: dict[int, str]) -> bool:
    """The cards disagree with the tableau (each side's draw read from the grids)."""
    if p2 >= 8 or b2 >= 8:
        return v is not None or bank_draws
    p = player[p2]
    if (p == "D" and v is None) or (p == "S" and v is not None):
        return True
    b = bank_rule(bank, b2, v)
    return (b == "D" and not bank_draws) or (b == "S" and bank_draws)


def _tail_ok(p2: int, b2: int, tail: list[int | str], player: str,
             bank: dict[int, str]) -> bool:
    """Without ``to`` the cards after the first four are only values (and ``stand`` records):
    is there a reading by the grids under which they are correct? The reading is the
    documented one: a card on Punto's turn is Punto's when Punto may draw (an option is
    declined only by a ``stand``); a stand on Punto's turn is Punto's."""
    cards = [t for t in tail if t != "stand"]
    if p2 >= 8 or b2 >= 8:
        return not cards

    def bank_ok(third: int | None, rest: list[int | str]) -> bool:
        # a stand recorded once both sides are done is nobody's: it changes nothing
        stands = all(x == "stand" for x in rest)
        card_then_stands = bool(rest) and rest[0] != "stand" and \
            all(x == "stand" for x in rest[1:])
        rule = bank_rule(bank, b2, third)
        if rule == "D":
            return card_then_stands
        if rule == "S":
            return stands
        return stands or card_then_stands

    p = player[p2]
    ok = False
    if p in "DO" and tail and tail[0] != "stand":
        ok = bank_ok(int(tail[0]), tail[1:])
    if p in "SO":
        if tail and tail[0] == "stand":
            ok = ok or bank_ok(None, tail[1:])
        elif p == "S" or not cards:
            ok = ok or bank_ok(None, tail)
    return ok


def _value(tok: Token) -> int | str:
    if tok == "stand":
        return "stand"
    c = tok if isinstance(tok, str) else tok["card"]
    return 0 if c[0] in "TJQK" else "A23456789".index(c[0]) + 1


CASES = [(p2, b2, v, d) for p2 in range(10) for b2 in range(10)
         for v in (None, *range(10)) for d in (False, True)]


@pytest.mark.parametrize("hints", [True, False], ids=["with-to", "by-order"])
@pytest.mark.parametrize("name", PUNTO_BANCO)
def test_punto_banco_tableau_exhaustive(name: str, hints: bool) -> None:
    """Every Punto total × Banco total × Punto third card (none, 0–9) × Banco draws or not."""
    ref = referee(name)
    flagged = checked = 0
    for k, (p2, b2, v, d) in enumerate(CASES):
        tokens = _round_tokens(p2, b2, v, d, k, hints=hints, player=PUNTO_PB, bank=BANCO_PB)
        outs = play(ref, tokens, round_no=k + 1)
        if hints:
            expected = _wrong(p2, b2, v, d, PUNTO_PB, BANCO_PB)
        else:
            expected = not _tail_ok(p2, b2, [_value(t) for t in tokens[4:]], PUNTO_PB,
                                    BANCO_PB)
        got = devs(outs)
        assert len(got) == int(expected), (p2, b2, v, d, tokens, got)
        assert [d.code for d in all_devs(outs)] == ["DRAW_RULE"] * int(expected)
        round_note(outs)
        flagged += expected
        checked += 1
    assert checked == 2200
    assert 0 < flagged < checked


@pytest.mark.parametrize("bank_stood", ["draw", "option"])
@pytest.mark.parametrize("hints", [True, False], ids=["with-to", "by-order"])
def test_chemin_de_fer_tableau_exhaustive(hints: bool, bank_stood: str) -> None:
    """Every player total × bank total × player's third card × bank draws or not; an option
    taken either way is never flagged, and each option is logged — with the bank's 3–4
    when the player stood a draw (the profile's reading) and an option (the other)."""
    ref = referee(with_baccarat(CHEMIN, bank_stood_3_4=bank_stood))
    grid = BANK_CDF if bank_stood == "draw" else BANK_CDF_3_4_OPTION
    flagged = options = 0
    for k, (p2, b2, v, d) in enumerate(CASES):
        tokens = _round_tokens(p2, b2, v, d, k, hints=hints, player=PLAYER_CDF, bank=grid)
        outs = play(ref, tokens, round_no=k + 1)
        if hints:
            expected = _wrong(p2, b2, v, d, PLAYER_CDF, grid)
        else:
            expected = not _tail_ok(p2, b2, [_value(t) for t in tokens[4:]], PLAYER_CDF,
                                    grid)
        got = devs(outs)
        assert len(got) == int(expected), (p2, b2, v, d, tokens, got)
        assert not [x for x in all_devs(outs) if x.code != "DRAW_RULE"]
        flagged += expected
        if hints and not expected and p2 < 8 and b2 < 8:
            notes = [o for g in outs for o in g if isinstance(o, Note) and o.kind == "option"]
            want = int(PLAYER_CDF[p2] == "O")
            want += int(bank_rule(grid, b2, v) == "O")
            assert len(notes) == want, (p2, b2, v, d, notes)
            assert round_note(outs).data["options"] == [
                {k2: n.data[k2] for k2 in ("side", "total", "against", "choice", "recorded")}
                for n in notes]
            options += want
    assert flagged and (options or not hints)


@pytest.mark.parametrize(("p2", "b2", "third"), [
    (5, 2, None),   # player's option declined
    (5, 2, 3),      # player's option taken
    (2, 3, 9),      # bank 3 against 9: option
    (0, 5, 4),      # bank 5 against 4: option
])
@pytest.mark.parametrize("bank_draws", [False, True])
def test_chemin_options_both_ways_never_flagged(p2: int, b2: int, third: int | None,
                                                bank_draws: bool) -> None:
    ref = referee(CHEMIN)
    tokens = _initial(p2, b2, 1)
    if third is None:
        tokens.append("stand")
    else:
        tokens.append(card_of(third, 2))
    option_bank = bank_rule(BANK_CDF, b2, third) == "O"
    if bank_draws:
        tokens.append(card_of(6, 3))
    elif option_bank or bank_rule(BANK_CDF, b2, third) == "S":
        tokens.append("stand")
    outs = play(ref, tokens)
    should_draw = bank_rule(BANK_CDF, b2, third)
    expected = (should_draw == "D" and not bank_draws) or (should_draw == "S" and bank_draws)
    assert len(devs(outs)) == int(expected)
    notes = [o for g in outs for o in g if isinstance(o, Note) and o.kind == "option"]
    assert notes, "an option is always logged"
    for n in notes:
        assert n.data["choice"] in ("draw", "stand") and n.data["recorded"]


def test_chemin_stand_where_the_player_must_draw_is_flagged_at_the_action() -> None:
    ref = referee(CHEMIN)
    outs = play(ref, [*_initial(4, 6, 0), "stand"])
    assert len(devs(outs)) == 1
    (dev,) = devs([outs[5]])  # the stand action itself
    assert dev.evidence["side"] == "punto" and dev.evidence["should"] == "draw"
    assert dev.evidence["card"] is None and dev.evidence["punto_total"] == 4


def test_stand_where_the_bank_must_draw_is_flagged_at_the_action() -> None:
    for name in (CHEMIN, "gr-banco-punto"):
        ref = referee(name)
        # player 7 stands, bank 5 must draw (001 §8η; 002 §2 3.5.1 iii); a stand for each
        outs = play(ref, [*_initial(7, 5, 0), "stand", "stand"])
        assert [len(devs([o])) for o in outs] == [0, 0, 0, 0, 0, 0, 1, 0], name
        assert devs(outs)[0].evidence["side"] == "banco"


@pytest.mark.parametrize("bank", [3, 4])
def test_chemin_player_stood_bank_3_4_follows_the_profile(bank: int) -> None:
    """001 §8 leaves the bank's 3–4 unstated when the player stood: the profile's
    ``bank_stood_3_4`` decides. ``draw``: a stand is DRAW_RULE; ``option``: the bank stands
    or draws unflagged, and the option is logged against no third card."""
    stood = [*_initial(6, bank, 0), "stand"]  # the player stands on 6, the bank has 3 or 4
    drew = [*stood, card_of(5, 3)]
    strict = referee(CHEMIN)  # the bundled profile: draw
    assert len(devs(play(strict, [*stood, "stand"]))) == 1
    assert len(devs(play(strict, stood))) == 1
    assert devs(play(strict, drew)) == []
    free = referee(with_baccarat(CHEMIN, bank_stood_3_4="option"))
    for tokens, choice, recorded in (([*stood, "stand"], "stand", True), (drew, "draw", True),
                                     (stood, "stand", False)):
        outs = play(free, tokens)
        assert all_devs(outs) == [], tokens
        (note,) = [o for g in outs for o in g if isinstance(o, Note) and o.kind == "option"]
        assert {k: note.data[k] for k in ("side", "total", "against", "choice", "recorded")} \
            == {"side": "banco", "total": bank, "against": None, "choice": choice,
                "recorded": recorded}


def test_chemin_player_stood_bank_six_stands_five_draws() -> None:
    """001 §8ζ–η: the player wants no card; the bank on 6 must stand, on 5 must draw."""
    ref = referee(CHEMIN)
    assert devs(play(ref, [*_initial(5, 6, 0), "stand"])) == []
    assert len(devs(play(ref, [*_initial(5, 6, 0), "stand", "4D"]))) == 1
    assert devs(play(ref, [*_initial(6, 5, 0), "5D"])) == []
    assert len(devs(play(ref, [*_initial(6, 5, 0)]))) == 1


@pytest.mark.parametrize("name", PUNTO_BANCO)
def test_the_deal_of_four_out_of_order_is_flagged_and_laid_as_dealt(name: str) -> None:
    # 001 BP §9, 002 §2 3.4.3: Punto, Banco, Punto, Banco. The reader saw 9H and KD go to
    # Punto, 2C and 3S to Banco: Punto 9 (a natural) against Banco 5, not Punto 1 must draw
    ref = referee(name)
    deal = [{"card": "9H", "to": "punto"}, {"card": "KD", "to": "punto"},
            {"card": "2C", "to": "banco"}, {"card": "3S", "to": "banco"}]
    outs = play(ref, list(deal))
    (dev,) = devs(outs, "DEAL_ORDER")
    assert dev in outs[2]  # at the second card, the first out of its place
    assert dev.evidence == {"round": 1, "card": "KD", "to": "punto", "position": 2,
                            "deal": ["9H", "KD"]}
    # the profile's rule is cited beside the message, not one game's law in the message of
    # every game (a review: live baccarat's read "(001 BP §9)" beside its 002 rule)
    assert dev.rule == prof(name).rule("baccarat") and "§" not in dev.message
    assert "Punto, Banco, Punto, Banco" in dev.message
    assert all_devs(outs) == [dev]  # once a round, and no DRAW_RULE: the hands as dealt
    data = round_note(outs).data
    assert (data["punto"], data["banco"], data["winner"]) == (9, 5, "Punto")
    in_order = [{"card": "9H", "to": "punto"}, {"card": "2C", "to": "banco"},
                {"card": "KD", "to": "punto"}, {"card": "3S", "to": "banco"}]
    assert all_devs(play(referee(name), in_order)) == []


@pytest.mark.parametrize("name", PUNTO_BANCO)
def test_the_engine_cites_the_baccarat_rule_for_a_deal_out_of_order(name: str) -> None:
    # DEAL_ORDER is stud's rule too: the engine names the profile's own game section
    # (a profile without [stud] once failed the output contract here)
    evs = [s.event for s in day(name, 0)]
    at = next(i for i, e in enumerate(evs) if e["type"] == "bets_closed")
    cards = [e for e in evs[at + 1:] if e["type"] == "card"][:4]
    for e, to in zip(cards, ("punto", "punto", "banco", "banco"), strict=True):
        e["to"] = to
    r = run(name, [*evs[:at + 1], *cards])  # Run.feed checks every deviation's rule
    (dev,) = [d for d in r.devs() if d.code == "DEAL_ORDER"]
    assert dev.rule == prof(name).rule("baccarat") == prof(name).rule("game")


def test_chemin_de_fer_has_no_dealing_order_to_judge_and_lays_a_named_card_where_it_went(
        ) -> None:
    # 001 §8 gives no order: no DEAL_ORDER. A card that names its hand is laid there, so
    # the hands are judged as dealt (a review: a deal player, player, bank, bank read as
    # alternating made a legal draw a DRAW_RULE): Punto 9H KD = 9, a natural
    outs = play(referee(CHEMIN), [{"card": "9H", "to": "punto"}, {"card": "KD", "to": "punto"},
                                  "2C", "3S"])
    assert all_devs(outs) == []
    data = round_note(outs).data
    assert (data["punto"], data["banco"], data["winner"]) == (9, 5, "Punto")
    # player K 4 = 4 draws a 7; the bank 6 Q = 6 draws against a 7 (§8β): legal
    bank_first = [{"card": c, "to": to} for c, to in
                  (("6D", "banco"), ("KS", "punto"), ("QC", "banco"), ("4H", "punto"),
                   ("7S", "punto"), ("2D", "banco"))]
    assert all_devs(play(referee(CHEMIN), bank_first)) == []


# ----------------------------------------------------------------------------- naturals


@pytest.mark.parametrize("name", [*PUNTO_BANCO, CHEMIN])
@pytest.mark.parametrize(("p2", "b2"), [(8, 0), (9, 5), (3, 8), (0, 9), (8, 8), (9, 8)])
def test_natural_stops_the_deal(name: str, p2: int, b2: int) -> None:
    ref = referee(name)
    outs = play(ref, _initial(p2, b2, 0))
    assert devs(outs) == []
    note = round_note(outs).data
    assert note["naturals"] == [s for s, t in (("punto", p2), ("banco", b2)) if t >= 8]
    # a third card (and a fourth) after the natural: one DRAW_RULE, at the first extra card
    outs = play(ref, [*_initial(p2, b2, 0), "4H", "5H"])
    assert len(devs(outs)) == 1
    (dev,) = devs([outs[5]])
    assert dev.evidence["problem"] == "natural" and dev.evidence["card"] == "4H"
    assert dev.evidence["should"] == "stand"
    assert dev.severity == "warning" and dev.rule == prof(name).rule("baccarat")


# ----------------------------------------------------------------------------- timing, evidence


def test_forbidden_card_flagged_when_it_arrives_missing_card_at_round_end() -> None:
    ref = referee("gr-banco-punto")
    # Punto 7 stands, Banco 7 stands: a fifth card is known to be wrong at once
    outs = play(ref, [*_initial(7, 7, 0), "3C"])
    (dev,) = devs([outs[5]])
    assert dev.evidence["card"] == "3C" and dev.evidence["should"] == "stand"
    assert dev.evidence["punto_total"] == 7 and dev.evidence["banco_total"] == 7
    # Punto 2 must draw; nothing came: flagged by round_end
    outs = play(ref, _initial(2, 7, 0))
    (dev,) = devs([outs[-1]])
    assert dev.evidence["side"] == "punto" and dev.evidence["card"] is None
    assert dev.evidence["should"] == "draw" and dev.evidence["problem"] == "missing"
    # Banco 4 against Punto's 5 must draw
    outs = play(ref, [*_initial(0, 4, 0), "5S"])
    (dev,) = devs([outs[-1]])
    assert dev.evidence["side"] == "banco" and dev.evidence["punto_third"] == 5
    init = _initial(0, 4, 0)
    assert dev.evidence["punto_cards"] == [init[0], init[2], "5S"]
    assert dev.evidence["banco_cards"] == [init[1], init[3]]
    assert dev.evidence["cards"] == [*init, "5S"]
    assert (dev.evidence["punto_total"], dev.evidence["banco_total"]) == (0, 4)


def test_banco_draws_when_it_must_stand() -> None:
    ref = referee("live-baccarat")
    # Banco 6 against Punto's third card 5 must stand (002 §2 3.5.1 v)
    outs = play(ref, [*_initial(1, 6, 0), "5S", "2H"])
    (dev,) = devs([outs[6]])
    assert dev.evidence["side"] == "banco" and dev.evidence["card"] == "2H"
    assert dev.evidence["should"] == "stand" and dev.evidence["punto_third"] == 5


def test_one_draw_rule_per_wrong_round() -> None:
    ref = referee("gr-banco-punto")
    outs = play(ref, [*_initial(7, 7, 0), "3C", "4C", "5C"])
    assert len(devs(outs)) == 1
    # Punto must draw but the stand is recorded, and Banco never draws either
    outs = play(ref, [*_initial(2, 0, 0), "stand"])
    assert len(devs(outs)) == 1


def test_incomplete_deal_and_undealt_round() -> None:
    ref = referee("live-baccarat")
    outs = play(ref, ["3H", "4H", "5H"])
    (dev,) = devs(outs)
    assert dev.evidence["problem"] == "deal-incomplete"
    assert round_note(outs).data["winner"] is None
    outs = play(ref, [])  # not dealt (the end card showed first in a no-round profile)
    assert devs(outs) == []
    assert round_note(outs).data["cards"] == []


def test_to_names_the_hand() -> None:
    ref = referee("gr-banco-punto")
    # Punto 3 must draw; the next card is declared Banco's: Punto's draw was skipped
    outs = play(ref, [*_initial(3, 1, 0), {"card": "4D", "to": "banco"}])
    (dev,) = devs([outs[5]])
    assert dev.evidence["side"] == "punto" and dev.evidence["should"] == "draw"
    # Punto 6, Banco 5: by order the fifth card is Banco's (correct) ...
    assert devs(play(ref, [*_initial(6, 5, 0), "4D"])) == []
    # ... declared Punto's, it is a draw on 6
    outs = play(ref, [*_initial(6, 5, 0), {"card": "4D", "to": "player"}])
    (dev,) = devs([outs[5]])
    assert dev.evidence["side"] == "punto" and dev.evidence["problem"] == "drew"


# ----------------------------------------------------------------------------- the round note


@pytest.mark.parametrize(("tokens", "punto", "banco", "winner", "naturals"), [
    (["9H", "KS", "KD", "2C"], 9, 2, "Punto", ["punto"]),
    (["3H", "4S", "TD", "2C", "KH"], 3, 6, "Banco", []),  # Punto 3 draws K; Banco 6 stands
    (["6H", "7S", "AD", "TC"], 7, 7, "Egalite", []),
    (["AH", "2S", "AD", "3C", "4H", "2D"], 6, 7, "Banco", []),  # Banco 5 against 4 draws
    (["8H", "8S", "KD", "QC"], 8, 8, "Egalite", ["punto", "banco"]),
])
def test_round_note_totals_naturals_winner(tokens: list[str], punto: int, banco: int,
                                           winner: str, naturals: list[str]) -> None:
    outs = play(referee("gr-banco-punto"), list(tokens))
    assert devs(outs) == []
    data = round_note(outs).data
    assert (data["punto"], data["banco"], data["winner"]) == (punto, banco, winner)
    assert data["naturals"] == naturals
    assert data["dummy"] is False and data["round"] == 1
    assert [c["card"] for c in data["cards"]] == tokens
    assert [c["to"] for c in data["cards"]][:4] == ["punto", "banco", "punto", "banco"]
    assert [c["why"] for c in data["cards"]] == ["deal"] * 4 + ["third"] * (len(tokens) - 4)


def _v(card: str) -> int:
    return 0 if card[0] in "TJQK" else "A23456789".index(card[0]) + 1


def test_round_note_third_cards_go_to_their_hands() -> None:
    data = round_note(play(referee("live-baccarat"), ["AH", "2S", "AD", "3C", "4H", "2D"])).data
    assert [(c["to"], c["why"]) for c in data["cards"]] == [
        ("punto", "deal"), ("banco", "deal"), ("punto", "deal"), ("banco", "deal"),
        ("punto", "third"), ("banco", "third")]
    # Punto 7 stands, Banco 3 draws: the fifth card is Banco's
    data = round_note(play(referee("live-baccarat"), ["4H", "2S", "3D", "AC", "5D"])).data
    assert data["cards"][4] == {"card": "5D", "to": "banco", "why": "third"}
    assert (data["punto"], data["banco"], data["winner"]) == (7, 8, "Banco")


def test_two_tableaux_records_cards_only() -> None:
    ref = referee("gr-baccarat-two-tableaux")
    outs = play(ref, ["9H", "9S", "9D", "9C", "5H", "5S", "5D", "5C", "KH"])
    assert all_devs(outs) == []
    data = round_note(outs).data
    assert len(data["cards"]) == 9 and data["winner"] is None
    assert data["punto"] is None and data["banco"] is None


# ----------------------------------------------------------------------------- exposed cards


def test_exposed_card_mid_round_is_used() -> None:
    ref = referee("gr-banco-punto")
    tokens: list[Token] = ["3H", "4S", {"card": "4D", "exposed": True}, "2C"]  # 7 - 6
    outs = play(ref, tokens)
    codes = [d.code for d in all_devs(outs)]
    assert codes == ["EXPOSED_CARD"]
    (dev,) = all_devs([outs[3]])
    assert dev.severity == "info" and dev.evidence["card"] == "4D"
    assert dev.rule == prof("gr-banco-punto").rule("exposed_card")
    data = round_note(outs).data
    assert data["cards"][2] == {"card": "4D", "to": "punto", "why": "exposed"}
    assert data["dummy"] is False and data["punto"] == 7 and data["banco"] == 6


@pytest.mark.parametrize("name", PUNTO_BANCO)
def test_exposed_first_card_makes_a_dummy_round(name: str) -> None:
    ref = referee(name)
    tokens: list[Token] = [{"card": "9H", "exposed": True}, "KS", "KD", "2C"]
    outs = play(ref, tokens)
    assert [d.code for d in all_devs(outs)] == ["EXPOSED_CARD", "DUMMY_HAND"]
    assert all(d.severity == "info" for d in all_devs(outs))
    assert {d.code for d in all_devs([outs[1]])} == {"EXPOSED_CARD", "DUMMY_HAND"}
    data = round_note(outs).data
    assert data["dummy"] is True
    assert (data["punto"], data["banco"], data["winner"]) == (9, 2, "Punto")
    # otherwise a normal round: a draw mistake in it is still flagged
    outs = play(ref, [{"card": "3H", "exposed": True}, "KS", "KD", "7C"])
    assert [d.code for d in all_devs(outs)] == ["EXPOSED_CARD", "DUMMY_HAND", "DRAW_RULE"]


def test_exposed_card_burned_where_the_profile_burns_it() -> None:
    """``exposed_card.handling = "burn"`` (no baccarat profile has it): the card is put
    aside and the next card takes its place in the hand."""
    p = prof("gr-banco-punto")
    p = dataclasses.replace(p, exposed_card=dataclasses.replace(
        p.exposed_card, handling="burn", first_card_of_round="continue"))
    ref = referee_for(p, factory(p))
    outs = play(ref, [{"card": "5H", "exposed": True}, "9H", "KS", "KD", "2C"])
    assert [d.code for d in all_devs(outs)] == ["EXPOSED_CARD"]
    data = round_note(outs).data
    assert data["cards"][0] == {"card": "5H", "to": "burn", "why": "exposed"}
    assert (data["punto"], data["banco"], data["winner"]) == (9, 2, "Punto")


def test_exposed_first_card_in_chemin_de_fer_is_no_dummy() -> None:
    outs = play(referee(CHEMIN), [{"card": "9H", "exposed": True}, "KS", "KD", "2C"])
    assert [d.code for d in all_devs(outs)] == ["EXPOSED_CARD"]
    assert round_note(outs).data["dummy"] is False


# ----------------------------------------------------------------------------- shoe passing

BANCO_WIN = ["KH", "9S", "KD", "QC"]   # P0, B9 natural
PUNTO_WIN = ["9H", "KS", "KD", "QC"]   # P9 natural, B0
EGALITE = ["6H", "7S", "AD", "TC"]     # 7 - 7


def test_shoe_passing_sequence() -> None:
    ref = referee("gr-banco-punto")
    results = [BANCO_WIN, PUNTO_WIN, EGALITE, PUNTO_WIN, BANCO_WIN, PUNTO_WIN]
    holders = []
    for n, tokens in enumerate(results, start=1):
        data = round_note(play(ref, list(tokens), round_no=n)).data
        holders.append((data["shoe_holder"]["before"], data["shoe_holder"]["after"]))
    assert holders == [(1, 1), (1, 2), (2, 2), (2, 3), (3, 3), (3, 4)]
    for n in range(7, 16):  # nine more Punto wins: 4 → 12, then back to seat 1
        data = round_note(play(ref, list(PUNTO_WIN), round_no=n)).data
    assert data["shoe_holder"] == {"before": 12, "after": 1}


@pytest.mark.parametrize("seats", [2, 7, 9])
def test_the_shoe_passes_round_the_profiles_seats(seats: int) -> None:
    # 001 BP §15 does not say how many seats a full table has: the profile's baccarat.seats
    ref = referee(with_baccarat("gr-banco-punto", seats=seats))
    holders = [round_note(play(ref, list(PUNTO_WIN), round_no=n)).data["shoe_holder"]
               for n in range(1, seats + 2)]
    assert [h["before"] for h in holders] == [*range(1, seats + 1), 1]
    assert holders[seats - 1] == {"before": seats, "after": 1}


@pytest.mark.parametrize("name", ["gr-banco-punto-shuffler", "live-baccarat", CHEMIN,
                                  "gr-baccarat-two-tableaux"])
def test_no_shoe_passing_where_the_profile_has_none(name: str) -> None:
    assert "shoe_holder" not in round_note(play(referee(name), list(PUNTO_WIN))).data


def test_shoe_holder_restarts_with_every_shoe() -> None:
    """The engine makes a new referee per shoe: every shoe starts with seat 1."""
    steps = table_day(prof("gr-banco-punto"), 4, DayPlan(shoes=2))
    r = Run.of("gr-banco-punto").feed_all(s.event for s in steps)
    notes = r.notes("round")
    in_first = sum(1 for s in steps if s.phase == "bets_closed" and s.shoe == 1)
    first, second = notes[:in_first], notes[in_first:]
    assert first and second
    assert first[0].data["shoe_holder"]["before"] == 1
    assert first[-1].data["shoe_holder"]["after"] != 1, "seed 4 ends shoe 1 away from seat 1"
    assert second[0].data["shoe_holder"]["before"] == 1
    for a, b in itertools.pairwise(first):
        assert a.data["shoe_holder"]["after"] == b.data["shoe_holder"]["before"]
        want = a.data["shoe_holder"]["before"] % 12 + 1 if a.data["winner"] == "Punto" \
            else a.data["shoe_holder"]["before"]
        assert a.data["shoe_holder"]["after"] == want


# ----------------------------------------------------------------------------- whole days


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
@pytest.mark.parametrize("name", FAMILY)
def test_correct_days_have_no_deviation(name: str, seed: int) -> None:
    steps = table_day(prof(name), seed)
    r = Run.of(name).feed_all(s.event for s in steps)
    assert r.codes() == Counter(), r.codes()
    notes = r.notes("round")
    assert len(notes) == sum(1 for s in steps if s.event["type"] == "bets_closed")
    if name != "gr-baccarat-two-tableaux":
        dealt = [n for n in notes if n.data["cards"]]
        assert dealt and all(n.data["winner"] in ("Punto", "Banco", "Egalite") for n in dealt)
    if name == CHEMIN:
        assert r.notes("option"), "options were taken or declined"


@pytest.mark.parametrize("seed", [0, 3])
def test_correct_chemin_days_with_the_banks_3_4_an_option_have_no_deviation(seed: int) -> None:
    # the simulated dealer takes or declines the option at random (simulators/games)
    profile = with_baccarat(CHEMIN, bank_stood_3_4="option")
    r = Run.of(profile).feed_all(s.event for s in table_day(profile, seed))
    assert r.codes() == Counter(), r.codes()
    stood_3_4 = [n.data["choice"] for n in r.notes("option")
                 if n.data["side"] == "banco" and n.data["against"] is None]
    assert "draw" in stood_3_4 and "stand" in stood_3_4, stood_3_4
    # the bundled reading flags those stands
    strict = Run.of(CHEMIN).feed_all(s.event for s in table_day(profile, seed))
    assert strict.codes()["DRAW_RULE"] >= stood_3_4.count("stand") > 0


def test_engine_flags_a_mutated_day_once_in_its_round() -> None:
    """A correct day with one Banco draw removed: one DRAW_RULE, in that round's round_end
    (the card missing from the stream also moves the measured cut card by one: a round
    short of a card may have had it drawn unread, and the cut card is in its place under
    that reading — not a second deviation)."""
    steps = table_day(prof("gr-banco-punto"), 5)
    thirds = [i for i, s in enumerate(steps) if s.phase == "third"]
    i = next(i for i in thirds if steps[i + 1].event["type"] == "round_end"
             and steps[i - 1].phase == "third")  # a Banco third card (Punto drew too)
    rnd = steps[i].round
    mutated = [s.event for j, s in enumerate(steps) if j != i]
    r = Run.of("gr-banco-punto").feed_all(mutated)
    assert r.codes() == Counter({"DRAW_RULE": 1}), r.codes()
    (dev,) = r.devs("DRAW_RULE")
    assert dev.evidence["round"] == rnd and dev.evidence["side"] == "banco"
    assert r.sent[r.at("DRAW_RULE")[0]]["type"] == "round_end"


# ----------------------------------------------------------------------------- property test


class ReferenceDealer:
    """Deals baccarat from a Table's stack by the grids above (not the simulator)."""

    def __init__(self, table: Table, chemin: bool, data: Any) -> None:
        self.t = table
        self.player = PLAYER_CDF if chemin else PUNTO_PB
        self.bank = BANK_CDF if chemin else BANCO_PB
        self.data = data

    def next(self) -> str:
        return self.t.stack[self.t.pos + sum(1 for x in self.pending if x != "stand")]

    def round(self, inject: str | None) -> tuple[list[Token], bool]:
        """The round's tokens and whether the injected mistake was applied."""
        self.pending: list[Token] = []
        vals: list[int] = []
        for _ in range(4):
            c = self.next()
            self.pending.append(c)
            vals.append(_v(c))
        p2, b2 = (vals[0] + vals[2]) % 10, (vals[1] + vals[3]) % 10
        drawn: list[tuple[int, str]] = []  # (index in pending, rule it was drawn under)
        if p2 < 8 and b2 < 8:
            third: int | None = None
            rule = self.player[p2]
            if rule == "D" or (rule == "O" and self.data.draw(st.booleans())):
                c = self.next()
                drawn.append((len(self.pending), rule))
                self.pending.append(c)
                third = _v(c)
            elif rule == "O":
                self.pending.append("stand")
            rule = bank_rule(self.bank, b2, third)
            if rule == "D" or (rule == "O" and self.data.draw(st.booleans())):
                drawn.append((len(self.pending), rule))
                self.pending.append(self.next())
            elif rule == "O":
                self.pending.append("stand")
        applied = False
        if inject == "remove" and drawn and drawn[-1][1] == "D":
            idx = drawn[-1][0]
            del self.pending[idx]
            applied = True
        elif inject == "extra":
            self.pending.append(self.next())
            applied = True
        return self.pending, applied


def _deal_round(t: Table, tokens: list[Token]) -> None:
    t.bets()
    for tok in tokens:
        if tok == "stand":
            t.send("action", action="stand")
        else:
            assert isinstance(tok, str)
            t.card(tok)
    t.send("round_end")
    if t.state == "return_discards":
        t.send("discards_returned", count=t.out)
        t.out = 0


@settings(max_examples=examples(100), deadline=None)
@given(name=st.sampled_from(["gr-banco-punto", "live-baccarat", CHEMIN]),
       seed=st.integers(0, 10_000), rounds=st.integers(1, 10), data=st.data(),
       inject=st.sampled_from([None, "extra", "remove"]))
def test_reference_dealer_rounds(name: str, seed: int, rounds: int, data: Any,
                                 inject: str | None) -> None:
    t = Table(name, seed=seed).prepare()
    dealer = ReferenceDealer(t, name == CHEMIN, data)
    target = data.draw(st.integers(1, rounds)) if inject else None
    first_round = t.engine.round + 1
    wrong_round: int | None = None
    for n in range(rounds):
        rnd = first_round + n
        tokens, applied = dealer.round(inject if n + 1 == target else None)
        if applied:
            wrong_round = rnd
        _deal_round(t, tokens)
    event(f"wrong round injected: {wrong_round is not None}")
    r = t.run
    draw = r.devs("DRAW_RULE")
    assert not [d for d in r.devs() if d.code in ("EXPOSED_CARD", "DUMMY_HAND")]
    if wrong_round is None:
        assert draw == []
    else:
        assert len(draw) == 1, draw
        assert draw[0].evidence["round"] == wrong_round
    assert len(r.notes("round")) == rounds
