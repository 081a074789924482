"""The baccarat board: bead plate and big road from round notes, against boards by hand."""

from __future__ import annotations

from typing import Any

from floor import roads


def note(n: int, winner: str, punto: list[str], banco: list[str], *,
         naturals: tuple[str, ...] = (), dummy: bool = False) -> dict[str, Any]:
    cards = [{"card": c, "to": "punto", "why": "deal"} for c in punto] + \
        [{"card": c, "to": "banco", "why": "deal"} for c in banco]
    return {"round": n, "winner": winner, "punto": 0, "banco": 0, "cards": cards,
            "naturals": list(naturals), "dummy": dummy}


# B B P T P P P P P P P B T T B, then a dummy hand and an unfinished deal (not coups)
SEQUENCE = ["Banco", "Banco", "Punto", "Egalite", "Punto", "Punto", "Punto", "Punto", "Punto",
            "Punto", "Punto", "Banco", "Egalite", "Egalite", "Banco"]


def notes() -> list[dict[str, Any]]:
    out = [note(i + 1, w, ["2C", "3D"], ["4H", "5S"]) for i, w in enumerate(SEQUENCE)]
    out[0] = note(1, "Banco", ["KH", "KS"], ["9C", "TD"], naturals=("banco",))  # punto pair
    out[2] = note(3, "Punto", ["8C", "AD"], ["7H", "7S"], naturals=("punto",))  # banco pair
    out.append(note(16, "Punto", ["2C", "3D"], ["4H", "5S"], dummy=True))
    out.append({"round": 17, "winner": None, "cards": []})
    return out


def test_bead_plate_by_hand() -> None:
    plate = roads.bead_plate(roads.coups(notes()))
    assert [[c.winner for c in col] for col in plate] == [
        ["B", "B", "P", "T", "P", "P"],
        ["P", "P", "P", "P", "P", "B"],
        ["T", "T", "B"],
    ]
    first, third = plate[0][0], plate[0][2]
    assert (first.punto_pair, first.banco_pair, first.natural) == (True, False, True)
    assert (third.punto_pair, third.banco_pair, third.natural) == (False, True, True)


def test_big_road_by_hand_with_a_dragon_tail_and_ties() -> None:
    grid = roads.big_road(roads.coups(notes()))
    drawn = {pos: (cell.coup.winner, cell.ties) for pos, cell in grid.items()}
    assert drawn == {
        (0, 0): ("B", 0), (0, 1): ("B", 0),
        # Punto's streak of eight: six down, then right along the bottom row; the tie after
        # its first coup marked on that coup's cell
        (1, 0): ("P", 1), (1, 1): ("P", 0), (1, 2): ("P", 0), (1, 3): ("P", 0),
        (1, 4): ("P", 0), (1, 5): ("P", 0), (2, 5): ("P", 0), (3, 5): ("P", 0),
        # Banco's streak starts in the next column, two ties on its first coup
        (2, 0): ("B", 2), (2, 1): ("B", 0),
    }


def test_ties_before_the_first_decision_wait_for_it() -> None:
    grid = roads.big_road(roads.coups([note(1, "Egalite", [], []), note(2, "Egalite", [], []),
                                       note(3, "Punto", [], [])]))
    assert {pos: (c.coup.winner, c.ties) for pos, c in grid.items()} == {(0, 0): ("P", 2)}


def test_a_streak_blocked_below_turns_right_early() -> None:
    seq = ["Banco"] * 8 + ["Punto"] + ["Banco"] * 7
    grid = roads.big_road(roads.coups([note(i, w, [], []) for i, w in enumerate(seq)]))
    cells = {pos: c.coup.winner for pos, c in grid.items()}
    # the first Banco streak tails along row 5 to column 2; Punto in column 1; the second
    # Banco streak starts in column 2 and, with (2, 5) taken, turns right at row 4
    assert [cells[(c, 5)] for c in range(3)] == ["B", "B", "B"]
    assert cells[(1, 0)] == "P"
    assert [cells.get((2, r)) for r in range(5)] == ["B"] * 5
    assert cells[(3, 4)] == "B" and cells[(4, 4)] == "B"
