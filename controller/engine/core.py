"""The procedure engine: one table's card-handling procedure as a state machine.

Inputs in, outputs out. :meth:`TableEngine.handle` takes one input event and
returns the outputs it caused: deviations and notes first, then the state
transition, then the dealer's next prompt. The engine reads no clock, does no
I/O and draws no random numbers; time arrives in events. So the audit log,
which holds every input, replays to exactly the same decisions.

The state graph is built per table from its profile: ``graph`` maps (event type,
state) to the destinations allowed, and a ``transitions`` :class:`~transitions.Machine`
(``auto_transitions=False``) is built from the same list, so the chart (``shoewarden
chart``) is drawn from the machine of the graph that runs. A handler method decides
the destination (and the deviations); the destination must be in ``graph`` for that
event and state, so one missing from the graph can never be reached by accident, and
the state is then set directly. The machine is not triggered per event: a trigger
cost ~9 µs, half of an event's whole cost, to pick the one transition the handler had
already chosen (docs/architecture.md, "Why the engine does not trigger its machine").
An event with no transition from the current state is an ``UNEXPECTED_EVENT``
deviation: never an exception, never dropped.

Skipped steps are flagged when a later step shows they were skipped (loading
without a shuffle raises ``SHUFFLE_MISSING`` at the load), and the procedure
moves on, so one mistake yields one deviation, not a cascade.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.cards import Card, burn_value, deck
from controller.deviations import CATALOG, Deviation
from controller.engine.graph import Graph, Procedure, build, states_for
from controller.engine.states import (
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
from controller.events import (
    ANCHOR_WRITE_FAILED,
    DEVICE_INFO_EVENTS,
    Action,
    BetsClosed,
    CardDrawn,
    CardReplaced,
    Cut,
    CutCardPlaced,
    CutCardSeen,
    DealerChange,
    DeckCheck,
    DeckLot,
    DeviceConnected,
    DeviceFault,
    DeviceOk,
    DeviceReport,
    DiscardsReturned,
    Event,
    PlayersLeft,
    RoundEnd,
    ShoeLoaded,
    Shuffle,
    StubCount,
    TableClose,
    TableOpen,
)
from controller.outputs import Note, Output, Prompt, Transition
from controller.profiles import Profile
from controller.rounds import referee_for

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
REFEREE_SECTIONS = frozenset({"baccarat", "blackjack", "stud", "exposed_card"})


class _Reject(Exception):
    """An event the graph allows in this state but whose content makes it invalid here."""


@dataclass(frozen=True, slots=True)
class Accounting:
    """Where every card of the pack is, as far as the engine can know (for display and logs)."""

    pack: int
    in_shoe: int
    dealt: int
    burned: int
    behind_cut_card: int | None
    cut_card_out: bool

    def to_record(self) -> dict[str, Any]:
        return {
            "pack": self.pack, "in_shoe": self.in_shoe, "dealt": self.dealt,
            "burned": self.burned, "behind_cut_card": self.behind_cut_card,
            "cut_card_out": self.cut_card_out,
        }


SABOT_ROTATION_K = 3
"""Default K: a sabot on the same table at its last K openings is flagged (001 §3)."""


Opening = tuple[str | None, str | None]
"""(date, sabot) of one table opening."""


def _openings_from(history: Mapping[str, Sequence[Any]] | None) -> dict[str, list[Opening]]:
    """``{table: [{"date": "YYYY-MM-DD", "sabot": "S-07"}, …]}`` (oldest first) as (date, sabot)."""
    out: dict[str, list[Opening]] = {}
    if history is None:
        return out
    if not isinstance(history, Mapping):
        raise ValueError("sabot_history must map table ids to lists of openings")
    for table, openings in history.items():
        if not isinstance(openings, Sequence) or isinstance(openings, str):
            raise ValueError(f"sabot_history[{table!r}] must be a list of openings")
        rows: list[Opening] = []
        for i, item in enumerate(openings):
            if not isinstance(item, Mapping) or not set(item) <= {"date", "sabot"}:
                raise ValueError(f"sabot_history[{table!r}][{i}] must be "
                                 "{'date': 'YYYY-MM-DD', 'sabot': id}")
            date, sabot = item.get("date"), item.get("sabot")
            if date is not None and not isinstance(date, str):
                raise ValueError(f"sabot_history[{table!r}][{i}].date must be a string")
            if sabot is not None and not isinstance(sabot, str):
                raise ValueError(f"sabot_history[{table!r}][{i}].sabot must be a string")
            rows.append((date, sabot))
        out[str(table)] = rows
    return out


class TableEngine:
    """The procedure of one table for one table day. Feed it events with :meth:`handle`.

    ``sabot_history``: the sabots placed at the table's earlier openings,
    ``{table: [{"date": "YYYY-MM-DD", "sabot": id}, …]}`` oldest first (from the
    logs of earlier days; the engine reads no files). A ``table_open`` with the
    sabot of each of the table's last ``sabot_rotation_k`` openings is
    ``SABOT_ROTATION``. Openings seen by this engine are added to the history.
    """

    def __init__(self, profile: Profile, *,
                 sabot_history: Mapping[str, Sequence[Any]] | None = None,
                 sabot_rotation_k: int = SABOT_ROTATION_K) -> None:
        if type(sabot_rotation_k) is not int or sabot_rotation_k < 1:
            raise ValueError(f"sabot_rotation_k must be an integer >= 1, got {sabot_rotation_k!r}")
        self.profile = profile
        self.sabot_rotation_k = sabot_rotation_k
        self._openings = _openings_from(sabot_history)
        self.states = states_for(profile)
        self._state: str = CLOSED.value
        self._model = Procedure(self._get_state, self._set_state)
        self.graph: Graph
        self.graph, self.machine = build(profile, self.states, self._model)
        # Open faults outlive the table day: a device broken overnight is still broken.
        self._faults: dict[tuple[str, str], str | None] = {}
        self._resume: str | None = None
        self._fault_flagged = False
        #: the slip being resynchronised from: (its deviation code, the procedure state it
        #: happened in, the type of the event that raised it); see :meth:`handle`
        self._episode: tuple[str, str, str] | None = None
        self._reset_day()

    # ------------------------------------------------------------------ graph

    def _get_state(self) -> str:
        return self._state

    def _set_state(self, value: str) -> None:
        self._state = value

    def valid_events(self, state: str | None = None) -> list[str]:
        state = state or self.state
        return sorted({t for (t, s) in self.graph if s == state})

    # ------------------------------------------------------------------ public view

    @property
    def state(self) -> str:
        """The current state's value (``State(engine.state)`` is its member)."""
        return self._state

    @property
    def open_faults(self) -> dict[tuple[str, str], str | None]:
        return dict(self._faults)

    def context(self) -> dict[str, Any]:
        """What every audit record carries: table, shoe cycle, round and state."""
        return {"table": self.table, "shoe": self.shoe, "round": self.round, "state": self.state}

    def accounting(self) -> Accounting:
        behind: int | None = None
        if self.cut_card_out:
            behind = self.in_shoe
        elif self.declared_behind is not None:
            behind = min(self.declared_behind, self.in_shoe)
        return Accounting(self.pack_size, self.in_shoe, self.dealt, self.burned, behind,
                          self.cut_card_out)

    def prompt(self) -> Prompt:
        return Prompt(self.state, self._prompt_text())

    # ------------------------------------------------------------------ state

    def _reset_day(self) -> None:
        self.table: str | None = None
        self.decks = self.profile.decks.max
        self.sabot: str | None = None
        self.open_date: dt.date | None = None
        self.dealer: str | None = None
        self.lots: tuple[DeckLot, ...] = ()
        self.lots_used_before: set[str] = set()
        self.checked_open = False
        self.checked_since_shoe = False
        self.shoe = 0
        self.round = 0
        self._end_shoe()

    def _finish_shoe(self) -> None:
        """The last hand is over: the next shoe needs every step again; counts stay on view."""
        self.shoe_active = False
        self.shuffled = self.cut_done = self.cut_card_set = self.loaded = False
        self.burn_pending = self.burn_just_finished = self.next_round_last = False
        self.void_round = False

    def _end_shoe(self) -> None:
        """Forget everything about the current shoe (shoe finished, withdrawn or closed)."""
        self.shoe_active = False
        self.shuffled = False
        self.cut_done = False
        self.cut_card_set = False
        self.loaded = False
        self.pack_size = self.decks * 52
        self.in_shoe = 0
        self.dealt = 0
        self.burned = 0
        self.shoe_rounds = 0
        self.seen: Counter[Card] = Counter()
        self.out_since_return = 0
        self.declared_behind: int | None = None
        self.cut_card_out = False
        self.next_round_last = False
        self.after_last = False
        self.void_round = False
        self.burn_due: int | None = 0
        self.burn_done = 0
        self.burn_reason = ""
        self.burn_pending = False
        self.burn_just_finished = False
        self.change_burn_pending = 0
        self.referee = referee_for(self.profile, self._make)
        self.round_cards = 0

    # ------------------------------------------------------------------ entry point

    def handle(self, event: Event) -> list[Output]:
        """Apply one input event; return its outputs. Never raises for any event value.

        One slip, one deviation: after a deviation the engine resynchronises. Until the
        procedure moves on (its state changes), what follows from the same slip — the same
        code again, an event the slip made invalid (``UNEXPECTED_EVENT``), the cards of a
        round whose bets look open because it was ended early (``CARD_BEFORE_BETS_CLOSED``),
        play after the last hand — is recorded as a ``consequence`` note naming the slip,
        not as another deviation. A deviation of another kind (a duplicate card, a device
        fault, a deck that does not count) is never grouped away."""
        procedure = self._procedure_state()
        if self._episode is not None and self._episode[1] != procedure:
            self._episode = None  # the procedure moved on: the slip is over
        before = self._episode
        out = self._resync(event, self._handle(event))
        if before is not None and event.type == "round_end":
            self._episode = None  # the round played on is over: a new slip counts again
        return out

    def _procedure_state(self) -> str:
        return self._resume if self.state == DEVICE_FAULT and self._resume else self.state

    def _resync(self, event: Event, out: list[Output]) -> list[Output]:
        result: list[Output] = []
        for o in out:
            if not isinstance(o, Deviation):
                result.append(o)
                continue
            episode = self._episode
            if episode is not None and self._follows_from(episode[0], episode[2], o.code,
                                                          event.type):
                result.append(Note("consequence", f"{o.code}: {o.message} (a consequence of "
                                   f"the {episode[0]} above, not counted again)",
                                   {"code": o.code, "severity": str(o.severity),
                                    "slip": episode[0], "evidence": dict(o.evidence)}))
                continue
            if episode is None:
                self._episode = (o.code, self._procedure_state(), event.type)
            result.append(o)
        return result

    @staticmethod
    def _follows_from(slip: str, slip_event: str, code: str, event_type: str) -> bool:
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

    def _handle(self, event: Event) -> list[Output]:
        out: list[Output] = []
        if self.state == DEVICE_FAULT and event.type not in ("device_fault", "device_ok",
                                                             *DEVICE_INFO_EVENTS):
            if event.type in PLAY_EVENTS and not self._fault_flagged:
                self._fault_flagged = True
                faults = [f"{d}:{c}" for (d, c) in self._faults]
                out.append(self._make(
                    "DEVICE_FAULT",
                    f"{event.type} while a device fault is open ({', '.join(faults)})",
                    faults=faults, event=event.type, resume_state=self._resume,
                ))
            assert self._resume is not None
            self._state = self._resume  # the interrupted state, for this event only
            inner = self._dispatch(event)
            self._resume = self.state
            self._state = DEVICE_FAULT.value
            for o in inner:
                if isinstance(o, Transition):
                    out.append(Transition(o.source, o.dest, o.trigger, under_fault=True))
                elif not isinstance(o, Prompt):
                    out.append(o)
            return out
        return out + self._dispatch(event)

    def _dispatch(self, event: Event) -> list[Output]:
        out: list[Output] = []
        before = self.state
        if (event.type, before) not in self.graph:
            return [self._unexpected(event)]
        handler: Callable[[Any, list[Output]], State | None] = getattr(self, "_on_" + event.type)
        try:
            target = handler(event, out)
        except _Reject as why:
            return [self._unexpected(event, str(why))]
        if target not in self.graph[(event.type, before)]:  # pragma: no cover - graph bug guard
            out.append(self._unexpected(event, f"no transition to {target}"))
            return out
        if target is not None:
            self._state = target._value_  # in the graph: checked above; the plain value
            out.append(Transition(before, self.state, event.type))
            out.append(self.prompt())
        return out

    # ------------------------------------------------------------------ deviations

    def _make(self, code: str, message: str, section: str | None = None,
              **evidence: Any) -> Deviation:
        spec = CATALOG[code]
        section = spec.section if section is None else section
        return Deviation(code, spec.severity, message, self.profile.rule(section), evidence)

    def _unexpected(self, event: Event, why: str = "") -> Deviation:
        expected = self.valid_events(self._resume if self.state == DEVICE_FAULT and
                                     self._resume else self.state)
        text = f"{event.type} is not valid while {STATE_DESCRIPTIONS[self.state]}"
        if why:
            text += f": {why}"
        return self._make("UNEXPECTED_EVENT", text, event=event.type, state=self.state,
                          expected=expected, **({"why": why} if why else {}))

    # ------------------------------------------------------------------ skipped steps

    def _begin_shoe(self, out: list[Output]) -> None:
        """A new shoe cycle starts (first shuffle, or a later step standing in for it)."""
        if self.shoe_active:
            return
        self._end_shoe()
        self.shoe_active = True
        self.shoe += 1
        self.checked_since_shoe = False
        if self.profile.deck_lifecycle.new_cards_every_shoe and self.lots:
            reused = sorted(lot.id for lot in self.lots if lot.id in self.lots_used_before)
            if reused:
                out.append(self._make(
                    "DECK_EXPIRED",
                    f"lot(s) {', '.join(reused)} already used in an earlier sequence; every "
                    f"sequence needs new cards",
                    lots=reused, shoe=self.shoe,
                ))
            self.lots_used_before.update(lot.id for lot in self.lots)

    def _catch_up(self, out: list[Output], through: str) -> None:
        """Flag, once each, every mandatory step skipped before ``through``.

        ``through`` is ``"shoe_loaded"`` (flags up to the cut card; the caller loads)
        or ``"play"`` (also implies the load and flags an unfinished burn).
        """
        p = self.profile
        what = "stack loaded" if through == "shoe_loaded" else "cards dealt"
        if p.inspection.opening_check and not self.checked_open:
            self.checked_open = True
            out.append(self._make("CHECK_MISSING", f"{what} without the opening count of "
                                  "the pack", step=through))
        self._begin_shoe(out)
        if not self.shuffled:
            self.shuffled = True
            out.append(self._make("SHUFFLE_MISSING", f"{what} without a shuffle since the "
                                  "last shoe", step=through))
        if p.cut.required and not self.cut_done:
            self.cut_done = True
            out.append(self._make("CUT_MISSING", f"{what} without a cut", step=through))
        if p.has_cut_card and not self.cut_card_set:
            self.cut_card_set = True
            out.append(self._make("CUT_CARD_MISSING", f"{what} without the cut card",
                                  step=through))
        if through == "shoe_loaded":
            return
        if not self.loaded:
            if p.card_source == "hand":
                self.loaded = True
                self.in_shoe = self.pack_size
            else:
                self._load(out, implied=True)
        if self.burn_pending:
            self._burn_short(out)

    def _load(self, out: list[Output], implied: bool = False) -> None:
        self.loaded = True
        self.in_shoe = self.pack_size
        if implied:
            out.append(Note("load_implied", "stack taken as loaded (no shoe_loaded event)",
                            {"cards": self.pack_size}))
        self._start_burn(out, "shoe", self.profile.burn.mode)

    def _start_burn(self, out: list[Output], reason: str, mode: str, count: int = 0) -> None:
        if mode == "none" and not count:
            self.burn_pending = False
            return
        self.burn_pending = True
        self.burn_reason = reason
        self.burn_done = 0
        self.burn_due = 5 if mode == "five" else (None if mode == "by-value" else count)

    def _burn_short(self, out: list[Output]) -> None:
        due = self.burn_due
        out.append(self._make(
            "BURN_COUNT",
            f"{self.burn_done} card(s) burned, "
            + (f"{due} required" if due is not None else "the first card was never drawn")
            + (" after the dealer change" if self.burn_reason == "dealer_change" else ""),
            burned=self.burn_done, required=due, reason=self.burn_reason,
            mode=self._burn_mode_name(),
        ))
        self.burn_pending = False

    def _burn_mode_name(self) -> str:
        return "dealer_change" if self.burn_reason == "dealer_change" else self.profile.burn.mode

    # ------------------------------------------------------------------ deck checks

    def _judge_lots(self, lots: Iterable[DeckLot], out: list[Output],
                    on: dt.date | None = None) -> None:
        """Judge lots on ``on`` (the date of the event that brought them; default the opening)."""
        rule = self.profile.deck_lifecycle
        judged_on = on or self.open_date
        if judged_on is None:
            out.append(Note("lots_not_judged", "deck lots not judged: table_open has no time",
                            {"lots": [lot.id for lot in lots]}))
            return
        for lot in lots:
            age = (judged_on - lot.first_use).days
            if age < 0:
                out.append(self._make(
                    "DECK_EXPIRED",
                    f"lot {lot.id}: first use {lot.first_use} is after the opening date "
                    f"{judged_on}; its age cannot be trusted",
                    lot=lot.id, kind=lot.kind, first_use=str(lot.first_use),
                    opened=str(judged_on)))
            elif lot.kind == "plastic":
                days = age + 1 if rule.plastic_day_count == "calendar" else age
                if days > rule.plastic_max_days:
                    out.append(self._make(
                        "DECK_EXPIRED",
                        f"plastic lot {lot.id} first used {lot.first_use}: {days} days, more "
                        f"than {rule.plastic_max_days}",
                        lot=lot.id, kind=lot.kind, first_use=str(lot.first_use),
                        opened=str(judged_on), days=days,
                        max_days=rule.plastic_max_days))
            elif rule.paper_same_day_only and age > 0:
                out.append(self._make(
                    "DECK_EXPIRED",
                    f"paper lot {lot.id} opened {lot.first_use} reused on {judged_on}",
                    lot=lot.id, kind=lot.kind, first_use=str(lot.first_use),
                    opened=str(judged_on)))

    def _check_composition(self, event: DeckCheck, out: list[Output]) -> None:
        got = Counter(event.cards)
        missing = Counter({c: self.decks - got[c] for c in deck() if got[c] < self.decks})
        extra = Counter({c: n - self.decks for c, n in got.items() if n > self.decks})
        if missing:
            names = sorted(str(c) for c in missing.elements())
            out.append(self._make(
                "DECK_INCOMPLETE", f"{len(names)} card(s) missing: {', '.join(names)}",
                missing=names, counted=len(event.cards) + len(event.foreign),
                expected=self.decks * 52))
        if extra:
            names = sorted(str(c) for c in extra.elements())
            out.append(self._make(
                "DECK_EXTRA_CARD",
                f"{len(names)} card(s) more than {self.decks} deck(s) hold: {', '.join(names)}",
                extra=names, decks=self.decks))
        if event.foreign:
            out.append(self._make(
                "DECK_FOREIGN_CARD",
                f"{len(event.foreign)} card(s) not of the 52: {', '.join(event.foreign)}",
                foreign=list(event.foreign)))

    # ------------------------------------------------------------------ handlers
    # Each returns the destination state (None: stay, internal) or raises _Reject.

    def _on_table_open(self, e: TableOpen, out: list[Output]) -> State | None:
        self._reset_day()
        self.table = e.table
        self.decks = e.decks
        self.sabot = e.sabot
        self.pack_size = e.decks * 52
        self.open_date = e.time.date() if e.time else None
        self._check_sabot(e, out)
        d = self.profile.decks
        if not d.min <= e.decks <= d.max:
            span = f"{d.min}" if d.min == d.max else f"{d.min}–{d.max}"
            out.append(self._make("DECK_COUNT", f"{e.decks} deck(s); the game needs {span}",
                                  decks=e.decks, min=d.min, max=d.max))
        if e.deck_lots:
            self.lots = e.deck_lots
            self._judge_lots(e.deck_lots, out)
        return OPENING_CHECK if self.profile.inspection.opening_check else SHUFFLE

    def _check_sabot(self, e: TableOpen, out: list[Output]) -> None:
        """001 §3: the same sabot must not be put on the same table systematically."""
        past = self._openings.setdefault(e.table, [])
        k = self.sabot_rotation_k
        last = past[-k:]
        if e.sabot is not None and len(last) == k and all(s == e.sabot for _, s in last):
            dates = [d for d, _ in last]
            out.append(self._make(
                "SABOT_ROTATION",
                f"sabot {e.sabot} is on table {e.table} again: it was placed there at the "
                f"table's last {k} openings; sabots must not go to the same table "
                "systematically (001 §3)",
                sabot=e.sabot, table=e.table, openings=dates, k=k))
        past.append((self.open_date.isoformat() if self.open_date else None, e.sabot))

    def _on_deck_check(self, e: DeckCheck, out: list[Output]) -> State | None:
        self._check_composition(e, out)
        if e.deck_lots is not None:
            self.lots = e.deck_lots
            self._judge_lots(e.deck_lots, out, on=e.time.date() if e.time else None)
        self.checked_since_shoe = True
        if self.state == OPENING_CHECK:
            self.checked_open = True
            return SHUFFLE
        if self.state == SHUFFLE:
            self.checked_open = True
            return None
        self._end_shoe()
        return CLOSING_CHECK if self.state != CLOSING_CHECK else None

    def _on_shuffle(self, e: Shuffle, out: list[Output]) -> State | None:
        if self.profile.inspection.opening_check and not self.checked_open:
            self.checked_open = True
            out.append(self._make("CHECK_MISSING", "shuffled without the opening count of the "
                                  "pack", step="shuffle"))
        if self.state in (READY, RETURN_DISCARDS, SHOE_COMPLETE, CLOSING_CHECK, SUSPENDED):
            self.shoe_active = False
        self._begin_shoe(out)
        self.shuffled = True
        self.cut_done = False
        self.cut_card_set = False
        return CUT

    def _on_cut(self, e: Cut, out: list[Output]) -> State | None:
        size = self.decks * 52
        if e.offset > size:
            raise _Reject(f"offset {e.offset} is more than the {size} cards of the pack")
        if self.state in (READY, RETURN_DISCARDS):
            self._end_shoe()  # cards gathered and re-cut between rounds: a new shoe begins
        self._begin_shoe(out)
        need = self.profile.cut.min_each_side
        self.cut_done = True
        if need and (e.offset < need or size - e.offset < need):
            out.append(self._make(
                "CUT_TOO_SHALLOW",
                f"cut at {e.offset} of {size}: {e.offset} and {size - e.offset} cards each "
                f"side, at least {need} required",
                offset=e.offset, pack=size, top=e.offset, bottom=size - e.offset,
                min_each_side=need))
        if self.profile.card_source == "hand":
            self.loaded = True
            self.in_shoe = size
            return READY
        return CUT_CARD if self.profile.has_cut_card else LOAD

    def _cut_card_window_check(self, position: int, how: str, out: list[Output]) -> None:
        window = self.profile.cut_card.window()
        assert window is not None
        lo, hi = window
        if not lo <= position <= hi:
            want = f"{lo}" if lo == hi else f"{lo}–{hi}"
            out.append(self._make(
                "CUT_CARD_POSITION",
                f"cut card {how} with {position} card(s) behind it; the rule is {want}",
                position=position, measured=how == "came out", window=[lo, hi]))

    def _on_cut_card_placed(self, e: CutCardPlaced, out: list[Output]) -> State | None:
        if not self.profile.has_cut_card:
            out.append(self._make("CUT_CARD_UNEXPECTED",
                                  "a cut card was placed; this game uses none",
                                  event="cut_card_placed"))
            return None
        if self.state != CUT_CARD:
            self._begin_shoe(out)
            if self.profile.cut.required and not self.cut_done:
                self.cut_done = True
                out.append(self._make("CUT_MISSING", "the cut card was placed without a cut",
                                      step="cut_card_placed"))
        self.cut_card_set = True
        self.declared_behind = e.behind
        if e.behind is not None:
            self._cut_card_window_check(e.behind, "placed", out)
        return LOAD

    def _on_shoe_loaded(self, e: ShoeLoaded, out: list[Output]) -> State | None:
        self.loaded = False
        self._catch_up(out, "shoe_loaded")
        self._load(out)
        return BURN if self.burn_pending else READY

    def _count_card(self, card: Card, out: list[Output]) -> None:
        """Every card that left the shoe: accounting and the duplicate check."""
        self.seen[card] += 1
        self.out_since_return += 1
        if self.in_shoe > 0:
            self.in_shoe -= 1
        if self.seen[card] > self.decks:
            scope = ("since the discards last went back" if self.profile.shuffler_mode
                     else "in this shoe")
            out.append(self._make(
                "CARD_DUPLICATE",
                f"{card} seen {self.seen[card]} times {scope}; {self.decks} deck(s) hold "
                f"{self.decks}: a foreign card is in play",
                card=str(card), seen=self.seen[card], decks=self.decks))

    def _on_card(self, e: CardDrawn, out: list[Output]) -> State | None:
        state = self.state
        self._count_card(e.card, out)
        if state == BURN:
            self.burned += 1
            self.burn_done += 1
            if self.burn_due is None:
                self.burn_due = burn_value(e.card, self.profile.burn.ten_value)
                out.append(Note("burn_by_value", f"{e.card} drawn: burn {self.burn_due} "
                                "card(s), this one included",
                                {"card": str(e.card), "burn": self.burn_due}))
            if self.burn_done >= self.burn_due:
                self.burn_pending = False
                self.burn_just_finished = True
                return READY
            return None
        if state == LAST_ROUND and self.void_round:
            self.dealt += 1
            out.append(self._make(
                "PLAY_AFTER_LAST_HAND", f"{e.card} dealt after the end card showed: no further "
                "round may be played", card=str(e.card), round=self.round))
            return None
        if state in (ROUND, LAST_ROUND):
            self.dealt += 1
            self.round_cards += 1
            out.extend(self.referee.card(e))
            return None
        if state == READY and self.burn_just_finished:
            self.burned += 1
            out.append(self._make(
                "BURN_COUNT", f"{e.card} burned after the burn was complete: "
                f"{self.burn_done + 1} burned, {self.burn_due} required",
                burned=self.burn_done + 1, required=self.burn_due, card=str(e.card),
                reason=self.burn_reason, mode=self._burn_mode_name()))
            self.burn_done += 1
            return None
        if state == SHOE_COMPLETE and not self.profile.shuffle.every_round:
            self.dealt += 1
            out.append(self._make(
                "PLAY_AFTER_LAST_HAND", f"{e.card} drawn after the last hand, before a "
                "reshuffle", card=str(e.card)))
            return None
        self.dealt += 1
        if not self.profile.dealing.bets_close_before_cards:
            return None
        out.append(self._make(
            "CARD_BEFORE_BETS_CLOSED", f"{e.card} drawn before bets were closed",
            card=str(e.card), state=state))
        return None

    def _on_cut_card(self, e: CutCardSeen, out: list[Output]) -> State | None:
        if not self.profile.has_cut_card:
            out.append(self._make("CUT_CARD_UNEXPECTED",
                                  "the reader saw a cut card; this game uses none",
                                  event="cut_card"))
            return None
        if self.cut_card_out:
            raise _Reject("the cut card already came out in this shoe")
        self.cut_card_out = True
        self._cut_card_window_check(self.in_shoe, "came out", out)
        no_round = self.profile.cut_card.first_card_of_round == "no-round"
        if self.state == ROUND:
            if self.round_cards == 0 and no_round:
                self.void_round = True
                out.append(Note("last_hand", "cut card before the first card: no further "
                                "round; this round is not dealt", {"round": self.round}))
                return LAST_ROUND
            out.append(Note("last_hand", f"cut card out: round {self.round} is the last "
                            "hand of the shoe", {"round": self.round}))
            return LAST_ROUND
        if no_round:
            out.append(Note("last_hand", "cut card out: no further round in this shoe", {}))
            self._finish_shoe()
            return SHOE_COMPLETE
        self.next_round_last = True
        out.append(Note("last_hand", "cut card out: the next round is the last hand", {}))
        return None

    def _on_bets_closed(self, e: BetsClosed, out: list[Output]) -> State | None:
        state = self.state
        self.burn_just_finished = False
        if state == BURN:
            self._burn_short(out)
        elif state == RETURN_DISCARDS:
            out.append(self._make(
                "DISCARDS_NOT_RETURNED",
                f"round started before the {self.out_since_return} card(s) of the last round "
                "went back into the shuffler", outstanding=self.out_since_return,
                returned=None))
        elif state == SHOE_COMPLETE and not self.profile.shuffle.every_round:
            out.append(self._make(
                "PLAY_AFTER_LAST_HAND",
                "a new round after the last hand of the shoe, before a reshuffle",
                shoe=self.shoe, rounds_in_shoe=self.shoe_rounds))
            self.after_last = True
        else:
            self._catch_up(out, "play")
        self.round += 1
        self.shoe_rounds += 1
        self.round_cards = 0
        out.extend(self.referee.begin(self.round, e))
        if self.next_round_last:
            self.next_round_last = False
            return LAST_ROUND
        return ROUND

    def _on_action(self, e: Action, out: list[Output]) -> State | None:
        out.extend(self.referee.action(e.action))
        return None

    def _on_stub_count(self, e: StubCount, out: list[Output]) -> State | None:
        out.extend(self.referee.stub_count(e.count))
        return None

    def _on_round_end(self, e: RoundEnd, out: list[Output]) -> State | None:
        out.extend(self.referee.end())
        if self.state == LAST_ROUND or self.after_last or self.profile.shuffle.every_round:
            self.after_last = False
            self._finish_shoe()
            return SHOE_COMPLETE
        if self.profile.shuffler_mode and self.profile.shuffler.discards_every_round:
            return RETURN_DISCARDS
        if self.change_burn_pending:
            self._start_burn(out, "dealer_change", "count", self.change_burn_pending)
            self.change_burn_pending = 0
            return BURN
        return READY

    def _on_discards_returned(self, e: DiscardsReturned, out: list[Output]) -> State | None:
        expected = self.out_since_return
        if e.count != expected:
            out.append(self._make(
                "DISCARDS_NOT_RETURNED",
                f"{e.count} card(s) went back into the shuffler; {expected} were out",
                returned=e.count, outstanding=expected))
        self.out_since_return = 0
        self.seen.clear()
        self.in_shoe = self.pack_size
        if self.change_burn_pending:
            self._start_burn(out, "dealer_change", "count", self.change_burn_pending)
            self.change_burn_pending = 0
            return BURN
        return READY if self.state != READY else None

    def _on_dealer_change(self, e: DealerChange, out: list[Output]) -> State | None:
        previous, self.dealer = self.dealer, e.dealer
        n = self.profile.burn.on_dealer_change
        out.append(Note("dealer_change", f"dealer {e.dealer} takes over",
                        {"dealer": e.dealer, "previous": previous, "burn": n}))
        if not n or not self.loaded:
            return None  # before the shoe is loaded the start-of-shoe burn covers it
        if self.state == READY:
            self.burn_just_finished = False
            self._start_burn(out, "dealer_change", "count", n)
            return BURN
        if self.state == BURN and self.burn_due is not None:
            self.burn_due += n
            return None
        self.change_burn_pending = n
        return None

    def _on_players_left(self, e: PlayersLeft, out: list[Output]) -> State | None:
        out.append(Note("players_left", "no players: cards withdrawn and stacked",
                        {"shoe": self.shoe, "rounds_in_shoe": self.shoe_rounds}))
        self._end_shoe()
        return SUSPENDED

    def _on_card_replaced(self, e: CardReplaced, out: list[Output]) -> State | None:
        out.append(Note("card_replaced", f"damaged {e.card} replaced from a new deck",
                        {"card": str(e.card)}))
        return None

    def _on_device_fault(self, e: DeviceFault, out: list[Output]) -> State | None:
        key = (e.device, e.code)
        self._faults[key] = e.detail
        out.append(Note("device_fault", f"{e.device}: {e.code}" + (f" ({e.detail})"
                        if e.detail else ""), {"device": e.device, "code": e.code}))
        if self.state == DEVICE_FAULT:
            return None
        self._resume = self.state
        self._fault_flagged = False
        return DEVICE_FAULT

    def _on_device_ok(self, e: DeviceOk, out: list[Output]) -> State | None:
        key = (e.device, e.code)
        if key not in self._faults:
            raise _Reject(f"no open fault {e.device}:{e.code}")
        del self._faults[key]
        out.append(Note("device_ok", f"{e.device}: {e.code} cleared",
                        {"device": e.device, "code": e.code}))
        if self._faults:
            return None
        resume, self._resume = self._resume, None
        return None if resume is None else State(resume)

    def _on_device_connected(self, e: DeviceConnected, out: list[Output]) -> State | None:
        who = " ".join(x for x in (e.model, e.serial) if x) or "a device"
        text = f"{e.device}: {who}" + (f" firmware {e.firmware}" if e.firmware else "") + \
            (f" on {e.port}" if e.port else "") + (f" ({e.driver})" if e.driver else "")
        data = {k: v for k, v in e.to_record().items() if k not in ("type", "t")}
        out.append(Note("device_connected", text, data))
        return None

    def _on_device_diagnostic(self, e: DeviceReport, out: list[Output]) -> State | None:
        evidence: dict[str, Any] = {k: v for k, v in e.to_record().items()
                                    if k not in ("type", "t", "code")}
        if e.code == "PROTOCOL_ERROR":
            what = e.kind or "malformed traffic"
            count = f"{e.count} " if e.count else ""
            total = f"; {e.total} so far on this device" if e.total else ""
            out.append(self._make(
                "PROTOCOL_ERROR", f"{e.device}: {count}{what} on the link{total}"
                + (f" ({e.detail})" if e.detail else ""), **evidence))
        elif e.code == ANCHOR_WRITE_FAILED:
            out.append(self._make(
                ANCHOR_WRITE_FAILED, "the audit log's anchors cannot be written: "
                + (e.detail or "no detail") + "; the log goes on, but until anchors are "
                "written again a cut of its tail would go unnoticed", **evidence))
        elif e.code == "DEVICE_IDENTITY":
            out.append(self._make(
                "DEVICE_IDENTITY", f"{e.device} refused: "
                + (e.detail or f"its identity differs ({e.kind or 'identity'})"), **evidence))
        else:
            out.append(Note("device_diagnostic", f"{e.device}: {e.code}"
                            + (f" {e.kind}" if e.kind else "")
                            + (f": {e.detail}" if e.detail else ""), {"code": e.code, **evidence}))
        return None

    def _on_table_close(self, e: TableClose, out: list[Output]) -> State | None:
        if self.profile.inspection.closing_check and not self.checked_since_shoe:
            out.append(self._make("CHECK_MISSING", "table closed without counting the pack "
                                  "after the last shoe", step="table_close"))
        self._end_shoe()
        return CLOSED

    # ------------------------------------------------------------------ prompts

    def _prompt_text(self) -> str:
        p = self.profile
        s = self.state
        if s == CLOSED:
            return "Table closed. Open the table to start."
        if s == OPENING_CHECK:
            return f"Count and verify the {self.decks} deck(s) before play."
        if s == SHUFFLE:
            return "Shuffle the cards in view of a player."
        if s == CUT:
            need = p.cut.min_each_side
            return ("Offer the cut" + (f": at least {need} cards each side." if need > 1
                                       else ": anywhere."))
        if s == CUT_CARD:
            lo, hi = p.cut_card.window() or (0, 0)
            span = f"{lo}" if lo == hi else f"{lo}–{hi}"
            return f"Place the cut card with {span} cards behind it."
        if s == LOAD:
            return ("Load the stack into the shuffler." if p.shuffler_mode
                    else "Load the stack into the shoe as it is.")
        if s == BURN:
            if self.burn_reason == "dealer_change":
                return f"Dealer change: burn {self.burn_due} card(s)."
            if self.burn_due is None:
                return "Burn by value: draw one card and burn as many as its value."
            return f"Burn {self.burn_due} card(s) unseen."
        if s == READY:
            return "Bets open." + (" Next round is the LAST HAND." if self.next_round_last
                                   else " Close bets before dealing.")
        if s == ROUND:
            return f"Deal round {self.round}."
        if s == LAST_ROUND:
            return f"Last hand: finish round {self.round}, then reshuffle."
        if s == RETURN_DISCARDS:
            return f"Return the round's {self.out_since_return} card(s) to the shuffler."
        if s == SHOE_COMPLETE:
            return ("Shuffle and cut for the next round." if p.shuffle.every_round
                    else "Shoe complete: reshuffle, or count the cards to close.")
        if s == CLOSING_CHECK:
            return "Pack counted: close the table, or shuffle to play on."
        if s == SUSPENDED:
            return "Cards withdrawn. When a player arrives, restart at the shuffle."
        faults = ", ".join(f"{d}:{c}" for (d, c) in self._faults)
        return f"DEVICE FAULT ({faults}): stop play until it is cleared."
