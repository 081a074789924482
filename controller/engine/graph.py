"""A table's state graph: which states its profile gives it, which events move it where,
the ``transitions`` machine built from that, and the chart drawn from the machine.

``graph`` maps (event type, state) to the destinations allowed (``None``: the event is
handled and the state stays). The :class:`~transitions.Machine` (``auto_transitions=False``)
is built from that graph, so the chart (``shoewarden chart``) is drawn from the machine
of the graph that runs. The engine looks its decisions up in ``graph`` and does not
trigger the machine (docs/architecture.md, "Why the engine does not trigger its machine").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from transitions import Machine

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
    READY,
    RETURN_DISCARDS,
    ROUND,
    SHOE_COMPLETE,
    SHUFFLE,
    SUSPENDED,
    State,
)
from controller.profiles import Profile

if TYPE_CHECKING:
    from controller.engine.core import TableEngine

Graph = dict[tuple[str, str], tuple[str | None, ...]]
"""(event type, state) → the destinations allowed; ``None`` = stay (an internal transition)."""


def states_for(p: Profile) -> tuple[State, ...]:
    """The states a table with profile ``p`` has, in the order of a table day."""
    skip: set[State] = set()
    if p.card_source == "hand":
        skip |= {LOAD, BURN}
    if not p.has_cut_card:
        skip |= {CUT_CARD, LAST_ROUND}
    if not (p.shuffler_mode and p.shuffler.discards_every_round):
        skip.add(RETURN_DISCARDS)
    if not p.has_cut_card and not p.shuffle.every_round:
        skip.add(SHOE_COMPLETE)
    if p.burn.mode == "none" and not p.burn.on_dealer_change:
        skip.add(BURN)
    if not p.inspection.opening_check:
        skip.add(OPENING_CHECK)
    return tuple(s for s in ALL_STATES if s not in skip)


def transitions_for(p: Profile, states: tuple[State, ...]
                    ) -> list[tuple[str, list[State], list[Any]]]:
    """Every (trigger, sources, destinations) the profile's table may take."""

    def only(*names: State) -> list[State]:
        return [s for s in names if s in states]

    open_states = [s for s in states if s not in (CLOSED, DEVICE_FAULT)]
    pre_play = only(OPENING_CHECK, SHUFFLE, CUT, CUT_CARD, LOAD)
    between = only(READY, RETURN_DISCARDS)
    after_cut = only(CUT_CARD) if p.has_cut_card else (
        only(LOAD) if p.card_source != "hand" else only(READY))
    loaded_dest = only(BURN, READY)
    if p.shuffle.every_round:
        round_end_dest = only(SHOE_COMPLETE)
    else:
        round_end_dest = only(READY, RETURN_DISCARDS, *([SHOE_COMPLETE] * p.has_cut_card))
        if p.burn.on_dealer_change:
            round_end_dest += only(BURN)
    g: list[tuple[str, list[State], list[Any]]] = [
        ("table_open", [CLOSED], only(OPENING_CHECK) or only(SHUFFLE)),
        ("deck_check", only(OPENING_CHECK), only(SHUFFLE)),
        ("deck_check", only(SHUFFLE), [None]),
        # (a count once the next shoe's shuffle, cut or cut card is under way: §16 repeats
        # the shuffle after the last hand, and the table may close before the load, 001 BP
        # §6, §16 — the count ends that shoe, as at any other time)
        ("deck_check", only(SHOE_COMPLETE, SUSPENDED, READY, RETURN_DISCARDS, BURN, CUT,
                            CUT_CARD, LOAD), only(CLOSING_CHECK)),
        ("deck_check", only(CLOSING_CHECK), [None]),
        # the opening count made late, after the first shoe's shuffle, before any round:
        # the shoe goes on (TableEngine._on_deck_check)
        ("deck_check", only(CUT, CUT_CARD, LOAD, BURN, READY), [None]),
        ("shuffle", only(OPENING_CHECK, SHUFFLE, CUT, CUT_CARD, LOAD, SHOE_COMPLETE,
                         CLOSING_CHECK, SUSPENDED, *between), only(CUT)),
        # (None: this shoe's own cut, flagged missing, read late: Preparation.late_cut)
        ("cut", only(CUT, OPENING_CHECK, SHUFFLE, SHOE_COMPLETE, SUSPENDED, CLOSING_CHECK,
                     *between), [None, *after_cut]),
        ("bets_closed", only(READY, BURN, RETURN_DISCARDS, SHOE_COMPLETE, SUSPENDED,
                             CLOSING_CHECK, *pre_play), only(ROUND, LAST_ROUND)),
        ("card", only(BURN), [None, *only(READY)]),
        # the stack's first card read with no shoe_loaded: the load is implied, as when
        # the bets close first (no deviation: loading is not a step a dealer can skip)
        ("card", only(LOAD), only(BURN, READY)),
        ("card", only(ROUND, LAST_ROUND, READY, RETURN_DISCARDS, SHOE_COMPLETE), [None]),
        ("action", only(ROUND, LAST_ROUND), [None]),
        ("stub_count", only(ROUND, LAST_ROUND), [None]),
        # (None: the last round's round_end, one step late — after the bets_closed that
        # ended it, no card of the new round out yet: TableEngine._late_round_end)
        ("round_end", only(ROUND), [None, *round_end_dest]),
        ("round_end", only(LAST_ROUND), [None, *only(SHOE_COMPLETE)]),
        ("dealer_change", open_states, [None]),
        ("dealer_change", only(READY), only(BURN)),
        ("players_left", only(OPENING_CHECK, SHUFFLE, CUT, CUT_CARD, LOAD, BURN, READY,
                              RETURN_DISCARDS, SHOE_COMPLETE, CLOSING_CHECK), only(SUSPENDED)),
        # a card damaged during a hand is replaced before the next shuffle (000 §1, 001 BP
        # §1, 003 §1: "and play continues normally"): between rounds too, not only once the
        # shoe is over; with a shuffler before the next round (001 BP §20δ(1)). Where every
        # round has its own shuffle (stud), ready comes after that shuffle: too late
        ("card_replaced", only(OPENING_CHECK, SHUFFLE, SHOE_COMPLETE, CLOSING_CHECK, SUSPENDED,
                               *(between if p.shuffler_mode else
                                 [] if p.shuffle.every_round else only(READY))), [None]),
        ("device_fault", [s for s in states if s != DEVICE_FAULT], [DEVICE_FAULT]),
        ("device_fault", [DEVICE_FAULT], [None]),
        ("device_ok", [DEVICE_FAULT], [None, *[s for s in states if s != DEVICE_FAULT]]),
        ("table_close", [s for s in open_states if s not in (ROUND, LAST_ROUND)], [CLOSED]),
        ("device_connected", list(states), [None]),
        ("device_diagnostic", list(states), [None]),
        ("witness_checkpoint", list(states), [None]),
    ]
    if p.card_source != "hand":
        g.append(("shoe_loaded", only(LOAD, CUT_CARD, CUT, OPENING_CHECK, SHUFFLE,
                                      SHOE_COMPLETE, SUSPENDED, CLOSING_CHECK), loaded_dest))
        # a card read before the stack was loaded: the steps skipped are flagged and the
        # load implied, as shoe_loaded there would (TableEngine._on_card); or (None) the
        # last shoe's last card read late (TableEngine._late_last_card)
        g.append(("card", only(CUT_CARD, CUT, OPENING_CHECK, SHUFFLE), [None, *loaded_dest]))
        g.append(("card", only(LOAD), [None]))
    if p.has_cut_card:
        g.append(("cut_card_placed", only(CUT_CARD, CUT, OPENING_CHECK, SHUFFLE, SHOE_COMPLETE,
                                          SUSPENDED, CLOSING_CHECK), only(LOAD)))
        no_round = p.cut_card.first_card_of_round == "no-round"
        # (no state change where the round's cards were all dealt: the cut card is the next
        # round's first card, 001 BP §16 — TableEngine._on_cut_card)
        g.append(("cut_card", only(ROUND),
                  only(LAST_ROUND) + ([] if no_round else [None])))
        # a card read from behind the cut card's place with no cut card read: it came out
        # unread, before that card (TableEngine._card_behind_cut_card)
        g.append(("card", only(ROUND), only(LAST_ROUND)))
        g.append(("card", only(READY), [None] if not no_round else only(SHOE_COMPLETE)))
        g.append(("cut_card", only(READY, BURN), [None] if not no_round else only(SHOE_COMPLETE)))
    else:
        # A cut card in a game without one is flagged, not refused: CUT_CARD_UNEXPECTED.
        g.append(("cut_card_placed", open_states, [None]))
        g.append(("cut_card", open_states, [None]))
    if p.shuffler.continuous:
        # the shuffler's own mixing, reported between rounds or before the start burn: the
        # hands go on (001 BP §20γ, §20δ(6)) — TableEngine._on_shuffle
        g.append(("shuffle", only(READY, RETURN_DISCARDS, BURN), [None]))
        # …unless the stack is loaded next: that shuffle began a new cycle, its cut missing
        g.append(("shoe_loaded", only(READY, RETURN_DISCARDS), loaded_dest))
    if p.shuffler_mode and p.shuffler.discards_every_round:
        g.append(("discards_returned", only(RETURN_DISCARDS), only(READY, BURN)))
        g.append(("discards_returned", only(READY), [None]))
    return g


def build(profile: Profile, states: tuple[State, ...]) -> Graph:
    """The graph of ``profile``'s table: (event type, state) → the destinations allowed,
    each pair's destinations in the order :func:`transitions_for` lists them."""
    graph: Graph = {}
    for trigger, sources, dests in transitions_for(profile, states):
        for source in sources:
            for dest in dests:
                key = (trigger, source.value)
                to = None if dest is None else dest.value
                if to not in graph.get(key, ()):
                    graph[key] = (*graph.get(key, ()), to)
    return graph


def machine_for(graph: Graph, states: tuple[State, ...]) -> Machine:
    """The ``transitions`` machine of ``graph``: every pair's destinations as transitions,
    ``auto_transitions=False``. It has no model: the engine keeps its state and never
    triggers the machine, which is there to be drawn (:func:`mermaid_chart`). Built on
    demand (``TableEngine.machine``): a machine took 1.5 ms to build, 90 % of an engine's
    construction, and only the chart reads it.

    States enter as their plain values: ``transitions`` names an ``Enum`` state by the
    member's *name* (``BURN``), and the graph is keyed by the engine's state, a ``str``."""
    machine = Machine(
        model=None,
        states=[s.value for s in states],
        initial=CLOSED.value,
        auto_transitions=False,
        ignore_invalid_triggers=False,
    )
    for (trigger, source), dests in graph.items():
        for to in dests:
            machine.add_transition(trigger, source, to)
    return machine


def mermaid_chart(engine: TableEngine) -> str:
    """The machine as a Mermaid ``stateDiagram-v2``, read from the machine's own transitions.

    Fault edges (every state to ``device_fault`` and back to the interrupted state)
    are summarised in a note instead of drawn 2 × N times.
    """
    lines = ["stateDiagram-v2", f"    %% profile {engine.profile.name}: generated from the "
             "running machine", f"    [*] --> {CLOSED}"]
    edges: dict[tuple[str, str], list[str]] = {}
    for name, event in engine.machine.events.items():
        for source, transitions in event.transitions.items():
            for t in transitions:
                if t.dest is None or DEVICE_FAULT in (source, t.dest):
                    continue
                names = edges.setdefault((source, t.dest), [])
                if name not in names:
                    names.append(name)
    for (source, dest), names in edges.items():
        lines.append(f"    {source} --> {dest}: {', '.join(names)}")
    fault_in = sorted({s for (t, s), d in engine.graph.items()
                       if t == "device_fault" and DEVICE_FAULT in d and s != DEVICE_FAULT})
    lines.append(f"    {CLOSED} --> [*]")
    lines.append(f"    note right of {DEVICE_FAULT}: entered on device_fault from "
                 f"{len(fault_in)} states; device_ok returns to the interrupted state")
    return "\n".join(lines) + "\n"
