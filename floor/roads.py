"""The baccarat results board: the bead plate and the big road, from the round notes.

The result of each coup is the round referee's (the ``round`` note in the log: which card
went to which hand, both totals, the naturals, the winner), so nobody keys it in; the
pairs are read from the first two cards of each hand. The board starts again at each new
shoe. Pure functions: the same board on the dealer display and the floor's table page.

- **Bead plate**: one cell per coup, in columns of six, top to bottom then left to right.
- **Big road**: one column per streak of the same winner (Banco or Punto), top to bottom;
  a streak longer than the column (or blocked by an earlier one) turns right along its
  last row (the "dragon tail"); a tie is marked on the cell of the coup before it (ties
  before the first decided coup wait for it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

ROWS = 6
BANCO, PUNTO, TIE = "B", "P", "T"
_WINNER = {"Banco": BANCO, "Punto": PUNTO, "Egalite": TIE}


@dataclass(frozen=True)
class Coup:
    round: int
    winner: str  # B, P or T
    punto: int | None
    banco: int | None
    natural: bool
    punto_pair: bool
    banco_pair: bool


@dataclass
class RoadCell:
    coup: Coup
    ties: int = 0


def _rank(card: Any) -> str | None:
    return card[:-1] if isinstance(card, str) and len(card) >= 2 else None


def coup_of(data: dict[str, Any]) -> Coup | None:
    """The coup a baccarat round note holds; None for a dummy hand or an unfinished deal."""
    winner = _WINNER.get(str(data.get("winner")))
    if winner is None or data.get("dummy"):
        return None
    cards = data.get("cards") if isinstance(data.get("cards"), list) else []
    assert isinstance(cards, list)
    hands: dict[str, list[str | None]] = {"punto": [], "banco": []}
    for c in cards:
        if isinstance(c, dict) and c.get("to") in hands:
            hands[str(c["to"])].append(_rank(c.get("card")))
    pair = {side: len(h) >= 2 and h[0] is not None and h[0] == h[1]
            for side, h in hands.items()}
    rnd = data.get("round")
    punto, banco = data.get("punto"), data.get("banco")
    return Coup(rnd if type(rnd) is int else 0, winner,
                punto if type(punto) is int else None, banco if type(banco) is int else None,
                bool(data.get("naturals")), pair["punto"], pair["banco"])


def coups(notes: Iterable[dict[str, Any] | None]) -> list[Coup]:
    return [c for c in (coup_of(d) for d in notes if isinstance(d, dict)) if c is not None]


def bead_plate(played: list[Coup], rows: int = ROWS) -> list[list[Coup]]:
    """Columns of ``rows`` coups each, in order."""
    return [played[i:i + rows] for i in range(0, len(played), rows)]


def big_road(played: list[Coup], rows: int = ROWS) -> dict[tuple[int, int], RoadCell]:
    """(column, row) → cell."""
    grid: dict[tuple[int, int], RoadCell] = {}
    last: tuple[int, int] | None = None
    streak_col = -1
    pending_ties = 0
    tailing = False  # the streak has turned right: it goes on right, never down again
    for coup in played:
        if coup.winner == TIE:
            if last is None:
                pending_ties += 1
            else:
                grid[last].ties += 1
            continue
        if last is not None and grid[last].coup.winner == coup.winner:
            col, row = last
            below = (col, row + 1)
            if not tailing and row + 1 < rows and below not in grid:
                at = below
            else:
                at, tailing = (col + 1, row), True
        else:
            tailing = False
            streak_col += 1
            while (streak_col, 0) in grid:  # a dragon tail ran under this column's head
                streak_col += 1
            at = (streak_col, 0)
        grid[at] = RoadCell(coup, pending_ties)
        pending_ties = 0
        last = at
    return grid


def road_columns(grid: dict[tuple[int, int], RoadCell], rows: int = ROWS,
                 min_columns: int = 12) -> list[list[RoadCell | None]]:
    """The big road as columns of ``rows`` cells (None: empty), for a table to render."""
    width = max([c for c, _ in grid] + [min_columns - 1]) + 1
    return [[grid.get((c, r)) for r in range(rows)] for c in range(width)]
