"""The procedure engine: one table's card-handling procedure as a state machine.

The modules follow a card through the engine:

- :mod:`~controller.engine.states` — the states of a table day (:class:`State`), what
  each means, which events are play;
- :mod:`~controller.engine.graph` — which states a profile's table has, where each event
  may move it, the ``transitions`` machine built from that, and :func:`mermaid_chart`;
- :mod:`~controller.engine.core` — :class:`TableEngine`: ``handle`` looks the event up in
  the graph and runs its ``_on_<type>`` handler, from the layers below it:
  :mod:`~controller.engine.day` (the table day's state, the public view, how a deviation
  is made), :mod:`~controller.engine.preparation` (open, count, shuffle, cut, cut card,
  load, burn, close), :mod:`~controller.engine.dealing` (the rounds: cards, bets, actions,
  round end, the cut card out, discards returned, dealer change, players leaving) and
  :mod:`~controller.engine.device_events` (device faults and reports);
- :mod:`~controller.engine.shoe` — the current shoe's card accounting (:class:`Shoe`,
  :class:`Accounting`): a new shoe is a new object;
- :mod:`~controller.engine.checks` — the per-step checks (deck composition, lots, sabot
  rotation, cut-card window);
- :mod:`~controller.engine.resync` — one slip, one deviation: what follows from a slip
  is a ``consequence`` note;
- :mod:`~controller.engine.prompts` — the dealer's next prompt.

Everything callers use is importable from here, as it was from ``controller/engine.py``.
"""

from controller.engine.checks import SABOT_ROTATION_K, Opening
from controller.engine.core import TableEngine
from controller.engine.graph import mermaid_chart
from controller.engine.resync import PLAYED_ON, REFEREE_SECTIONS, REPEATS, ROUND_EVENTS, RUN_ON
from controller.engine.shoe import Accounting, Shoe
from controller.engine.states import (
    ALL_STATES,
    BURN,
    CLOSED,
    CLOSING_CHECK,
    CUT,
    CUT_CARD,
    DEVICE_FAULT,
    LAST_ROUND,
    LOAD,
    OPENING_CHECK,
    PLAY_EVENTS,
    READY,
    RETURN_DISCARDS,
    ROUND,
    SHOE_COMPLETE,
    SHUFFLE,
    STATE_DESCRIPTIONS,
    SUSPENDED,
    State,
)

__all__ = [
    "ALL_STATES",
    "BURN",
    "CLOSED",
    "CLOSING_CHECK",
    "CUT",
    "CUT_CARD",
    "DEVICE_FAULT",
    "LAST_ROUND",
    "LOAD",
    "OPENING_CHECK",
    "PLAYED_ON",
    "PLAY_EVENTS",
    "READY",
    "REFEREE_SECTIONS",
    "REPEATS",
    "RETURN_DISCARDS",
    "ROUND",
    "ROUND_EVENTS",
    "RUN_ON",
    "SABOT_ROTATION_K",
    "SHOE_COMPLETE",
    "SHUFFLE",
    "STATE_DESCRIPTIONS",
    "SUSPENDED",
    "Accounting",
    "Opening",
    "Shoe",
    "State",
    "TableEngine",
    "mermaid_chart",
]
