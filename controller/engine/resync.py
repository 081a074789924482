"""One slip, one deviation: what follows from a slip is a ``consequence`` note.

After a deviation the engine resynchronises (:meth:`TableEngine.handle
<controller.engine.core.TableEngine.handle>`). Until the procedure moves on (its state
changes), what follows from the same slip is recorded as a note naming the slip, not
as another deviation. A deviation of another kind (a duplicate card, a device fault, a
deck that does not count) is never grouped away.
"""

from __future__ import annotations

from typing import NamedTuple

from controller.deviations import CATALOG, Deviation, Severity
from controller.outputs import Output, consequence

# What a slip makes follow from it, grouped with it (as notes) while the procedure's state
# stays (TableEngine.handle). A round played on where no round is in play — after an early
# round_end (the referee judged the cut-short round), before bets closed, after the last
# hand — raises its cards' and actions' deviations once; a slip that repeats (a burn too
# long) once. Everything else is always a deviation of its own.
RUN_ON = frozenset({"CARD_BEFORE_BETS_CLOSED", "PLAY_AFTER_LAST_HAND"})
REPEATS = RUN_ON | {"BURN_COUNT"}
# a round event refused where no round is in play, or a burn run into the round's cards
# (bets_closed missed): the round goes on from there
PLAYED_ON = frozenset({"UNEXPECTED_EVENT", "BURN_COUNT"})
ROUND_EVENTS = frozenset({"card", "action", "round_end", "stub_count", "discards_returned",
                          "cut_card", "card_replaced"})
REFEREE_SECTIONS = frozenset({"baccarat", "blackjack", "stud", "game", "exposed_card"})


class Slip(NamedTuple):
    """The slip being resynchronised from."""

    code: str  #: its deviation code
    state: str  #: the procedure state it happened in
    event: str  #: the type of the event that raised it


def follows_from(slip: str, slip_event: str, code: str, event_type: str) -> bool:
    """Whether a deviation ``code`` raised by an ``event_type`` follows from ``slip``:
    the same slip going on (another card burned too many, dealt before bets closed,
    or after the last hand), or the rest of a round played on where the procedure
    says no round is in play (its cards, actions and end)."""
    if code == slip and code in REPEATS:
        return True
    run_on = (slip in RUN_ON
              or (CATALOG[slip].section in REFEREE_SECTIONS and slip_event == "round_end")
              or (slip in PLAYED_ON and slip_event in ROUND_EVENTS))
    if not (run_on and event_type in ROUND_EVENTS):
        return False
    # a second end of the same round (the one played on after an early end) judges it
    # again: its count, its draw, its hands
    return (code in (*RUN_ON, "UNEXPECTED_EVENT")
            or (code == slip and event_type == slip_event == "round_end"))


def resync(out: list[Output], slip: Slip | None, event_type: str, procedure: str
           ) -> tuple[list[Output], Slip | None]:
    """``out`` with what follows from ``slip`` turned into notes, and the slip from now on
    (the first deviation starts one when none is open; ``procedure``: the state it
    happened in). ``out`` itself when it holds no deviation (most events)."""
    for o in out:
        if isinstance(o, Deviation):
            break
    else:
        return out, slip
    result: list[Output] = []
    for o in out:
        if not isinstance(o, Deviation):
            result.append(o)
            continue
        if slip is not None and follows_from(slip[0], slip[2], o.code, event_type):
            result.append(consequence(o, slip[0]))
            continue
        if (slip is None and o.severity != Severity.INFO) \
                or (slip is not None and o.code in REPEATS and o.code != slip[0]):
            # (a slip that repeats card by card takes over from an earlier one of another
            # kind: its further cards are grouped with it. An info — an exposed card, a
            # dummy hand: a fact, no slip — starts none: it held the round's episode, so a
            # round_end missing there was two deviations where it is one, a review's
            # independent dealer)
            slip = Slip(o.code, procedure, event_type)
        result.append(o)
    return result, slip
