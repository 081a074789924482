"""The procedure engine: one table's card-handling procedure as a state machine.

Inputs in, outputs out. :meth:`TableEngine.handle` takes one input event and
returns the outputs it caused: deviations and notes first, then the state
transition, then the dealer's next prompt. The engine reads no clock, does no
I/O and draws no random numbers; time arrives in events. So the audit log,
which holds every input, replays to exactly the same decisions.

The state graph is built per table from its profile: ``graph`` maps (event type,
state) to the destinations allowed, and a ``transitions`` :class:`~transitions.Machine`
(``auto_transitions=False``) is built from that graph when first asked for, so the chart
(``shoewarden chart``) is drawn from the machine of the graph that runs. A handler method decides
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

import copy
import datetime as dt
import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from transitions import Machine

from controller.cards import Card, burn_value, parse_card
from controller.deviations import CATALOG, Deviation, DeviationCode
from controller.engine.checks import (
    SABOT_ROTATION_K,
    check_composition,
    check_cut,
    check_cut_card_window,
    check_sabot,
    judge_lots,
    openings_from,
)
from controller.engine.graph import Graph, build, machine_for, states_for
from controller.engine.prompts import prompt_text
from controller.engine.resync import Slip, consequence, resync
from controller.engine.shoe import Accounting, Shoe
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
    DeviceDiagnostic,
    DeviceFault,
    DeviceOk,
    DiscardsReturned,
    Event,
    PlayersLeft,
    RoundEnd,
    ShoeLoaded,
    Shuffle,
    StubCount,
    TableClose,
    TableOpen,
    WitnessCheckpoint,
)
from controller.outputs import Note, Output, Prompt, Transition
from controller.profiles import Profile, ShuffleScreenRule
from controller.rounds import CardLedger, referee_for
from controller.screening import Finding, ScreenSettings, ShuffleScreen
from controller.validation import printable

_DEVICE_FAULT = DEVICE_FAULT.value
"""The state's plain value: the engine's state is compared with it on every event."""

_FAULT_OWN = frozenset({"device_fault", "device_ok", "witness_checkpoint",
                        *DEVICE_INFO_EVENTS})
"""Events a device fault does not hold back: applied in ``device_fault`` itself."""

_AFTER_ROUND = frozenset({"shuffle", "deck_check", "table_close", "players_left",
                          "discards_returned", "bets_closed"})
"""Events that come only after a round: arriving while a round is still open (its
``round_end`` missing) once cards were dealt in it, they end it
(:meth:`TableEngine._round_left_open`). Not the cut, the cut card or the load: arriving in a
round, they are more likely a late reading of this shoe's own (refused, as before) than
the next shoe's, which a shuffle begins."""

_BEFORE_BETS = frozenset({"card", "bets_closed", "cut_card", "device_fault", "device_ok",
                          "device_connected", "device_diagnostic", "witness_checkpoint"})
"""What may come between a card read before the bets closed and the ``bets_closed`` that
opens its round (``Shoe.early_cards``): more such cards, the cut card coming out, and the
devices' own reports."""

_PLAYED_ON_STATES = frozenset({READY, BURN, ROUND, LAST_ROUND, SHOE_COMPLETE,
                               RETURN_DISCARDS})
"""Where rounds go on being dealt after a shoe's last hand: the one slip (no reshuffle)
lasts until the shoe is reshuffled, counted or closed — one PLAY_AFTER_LAST_HAND, however
many rounds are dealt before that (:meth:`TableEngine.handle`)."""

_Handler = Callable[[Any, Any, list[Output]], "State | None"]
"""``TableEngine._on_<type>``, unbound: (engine, event, outputs) → destination or None."""


class _Reject(Exception):
    """An event the graph allows in this state but whose content makes it invalid here."""


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
        self._openings = openings_from(sabot_history)
        self._orphaned: list[Output] = []  # (see _end_shoe)
        #: paper lots (id, first use) in play when a table closed (destroyed then: 000 §1,
        #: 001 BP §1, 003 §1), where the profile's ``paper_until_close`` says so
        self._paper_closed: set[tuple[str, dt.date]] = set()
        self.states = states_for(profile)
        #: the current state, as its plain value (what every record holds)
        self._state: str = CLOSED.value
        self.graph: Graph = build(profile, self.states)
        #: the graph with each pair's handler: one look-up per event instead of two
        self._routes: dict[tuple[str, str], tuple[_Handler, tuple[str | None, ...]]] = {
            key: (getattr(TableEngine, "_on_" + key[0]), dests)
            for key, dests in self.graph.items()
        }
        # Open faults outlive the table day: a device broken overnight is still broken.
        self._faults: dict[tuple[str, str], str | None] = {}
        self._resume: str | None = None
        self._fault_flagged = False
        #: the slip being resynchronised from, and the shoe it began in; see :meth:`handle`
        self._episode: Slip | None = None
        self._episode_shoe = 0
        sc = profile.shuffle_screen
        #: the shuffle screen (controller/screening): fed every card, round end and shoe
        self.screen = ShuffleScreen(screen_settings(sc), profile.decks.max)
        self._screen = self.screen if sc.enabled else None  # the card path asks this
        self._screen_ok = True  # False from a fault in the screen to the next shoe
        self._hand_piles = sc.enabled and sc.previous_shoe and sc.hand_piles
        self._shoe: Shoe
        self._reset_day()

    # ------------------------------------------------------------------ graph

    @functools.cached_property
    def machine(self) -> Machine:
        """The ``transitions`` machine of :attr:`graph`, built when first asked for (the
        chart draws it; the engine never triggers it)."""
        return machine_for(self.graph, self.states)

    def valid_events(self, state: str | None = None) -> list[str]:
        state = state or self.state
        return sorted({t for (t, s) in self.graph if s == state})

    # ------------------------------------------------------------------ public view

    @property
    def state(self) -> str:
        """The current state's value (``State(engine.state)`` is its member)."""
        return self._state

    @property
    def current_shoe(self) -> Shoe:
        """The shoe being played (or the last one, its counts still on view)."""
        return self._shoe

    @property
    def seen(self) -> Counter[Card]:
        """How often each card left the current shoe (since the discards last went back)."""
        return self._shoe.seen

    @property
    def cut_card_out(self) -> bool:
        return self._shoe.cut_card_out

    @property
    def open_faults(self) -> dict[tuple[str, str], str | None]:
        return dict(self._faults)

    def context(self) -> dict[str, Any]:
        """What every audit record carries: table, shoe cycle, round and state."""
        return {"table": self.table, "shoe": self.shoe, "round": self.round, "state": self._state}

    def context_key(self) -> tuple[str | None, int, int, str]:
        """:meth:`context`'s values as one tuple, in the order table, shoe, round, state (a
        replay compares it with each record's, where a dict would be built per input)."""
        return self.table, self.shoe, self.round, self._state

    def accounting(self) -> Accounting:
        return self._shoe.accounting()

    def prompt(self) -> Prompt:
        return Prompt(self._state, prompt_text(self))

    # ------------------------------------------------------------------ state

    def _reset_day(self) -> None:
        self.table: str | None = None
        self.decks = self.profile.decks.max
        self.sabot: str | None = None
        self.open_date: dt.date | None = None
        self.dealer: str | None = None
        self.lots: tuple[DeckLot, ...] = ()
        self.lots_used_before: set[str] = set()
        #: new cards every sequence (001 §2), judged when a sequence is loaded
        #: (_judge_sequence_lots): the lots the stream names for the next one (its pack's
        #: count's, or the opening's single lot), whether a pack was counted since the last
        #: load, whether the cards were withdrawn (players left: the same sequence goes on)
        #: and the last sequence's lots
        self._named_lots: tuple[DeckLot, ...] | None = None
        self._counted_for_next = False
        self._withdrawn = False
        self._sequence_lots: tuple[DeckLot, ...] = ()
        self.checked_open = False
        self._counted = False  # a deck_check since the table opened (the late opening count)
        #: the kinds of event refused while the table was closed (after this day's close)
        self._closed_refused: set[str] = set()
        self.checked_since_shoe = False
        self.shoe = 0
        self.round = 0
        self._end_shoe()

    def _finish_shoe(self) -> None:
        """The last hand is over: the next shoe needs every step again; counts stay on view."""
        self._shoe.finish()

    def _end_shoe(self) -> None:
        """Forget everything about the current shoe (shoe finished, withdrawn or closed)
        — but what its round's referee said while a round judged both ways was open
        (``Shoe.held``: it comes out with this event's outputs, :meth:`handle`)."""
        if getattr(self, "_shoe", None) is not None and self._shoe.aside is not None:
            self._orphaned.extend(self._shoe.held)
        self._shoe = Shoe(self.decks * 52,
                          referee_for(self.profile, self._make, self.decks * 52))

    # ------------------------------------------------------------------ entry point

    def handle(self, event: Event) -> list[Output]:
        """Apply one input event; return its outputs. Never raises for any event value.

        One slip, one deviation: after a deviation the engine resynchronises. Until the
        procedure moves on (its state changes), what follows from the same slip — the same
        code again, an event the slip made invalid (``UNEXPECTED_EVENT``), the cards of a
        round whose bets look open because it was ended early (``CARD_BEFORE_BETS_CLOSED``),
        play after the last hand — is recorded as a ``consequence`` note naming the slip,
        not as another deviation. A deviation of another kind (a duplicate card, a device
        fault, a deck that does not count) is never grouped away (:mod:`.resync`)."""
        state = self._state
        episode = self._episode
        if episode is not None:
            procedure = self._resume if state == _DEVICE_FAULT and self._resume else state
            if episode[0] == "PLAY_AFTER_LAST_HAND":
                if procedure not in _PLAYED_ON_STATES or self.shoe != self._episode_shoe:
                    episode = None  # a new shoe, a count, the close: play after it is over
            elif episode[1] != procedure:
                episode = None  # the procedure moved on: the slip is over
        before = episode
        if self._shoe.early_cards and event.type not in _BEFORE_BETS:
            self._shoe.early_cards = []  # (no round opened after them: they were its own)
        out = (self._handle_under_fault(event) if state == _DEVICE_FAULT
               else self._dispatch(event))
        if self._orphaned:  # (a round judged both ways, left without its end)
            out[:0], self._orphaned = self._orphaned, []
        state = self._state
        procedure = self._resume if state == _DEVICE_FAULT and self._resume else state
        out, self._episode = resync(out, episode, event.type, procedure)
        if self._episode is not episode:
            self._episode_shoe = self.shoe  # (where a slip began: play after the last hand)
        if before is not None and event.type == "round_end" \
                and before[0] != "PLAY_AFTER_LAST_HAND":
            self._episode = None  # the round played on is over: a new slip counts again
        return out

    def _handle_under_fault(self, event: Event) -> list[Output]:
        """In ``device_fault`` every other event is applied to the interrupted state (so no
        card is lost); the first play event of the fault episode is ``DEVICE_FAULT``."""
        if event.type in _FAULT_OWN:
            return self._dispatch(event)
        out: list[Output] = []
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
        self._resume = self._state
        self._state = _DEVICE_FAULT
        for o in inner:
            if isinstance(o, Transition):
                out.append(Transition(o.source, o.dest, o.trigger, under_fault=True))
            elif not isinstance(o, Prompt):
                out.append(o)
        return out

    def _dispatch(self, event: Event) -> list[Output]:
        before = self._state
        route = self._routes.get((event.type, before))
        if route is None:
            if self.ends_open_round(event.type, event):
                return self._round_left_open(event, before)
            if before == CLOSED:
                return self._refused_while_closed(event)
            return [self._unexpected(event)]
        handler, dests = route
        out: list[Output] = []
        try:
            target = handler(self, event, out)
        except _Reject as why:
            return [self._unexpected(event, str(why))]
        if target not in dests:  # pragma: no cover - graph bug guard
            out.append(self._unexpected(event, f"no transition to {target}"))
            return out
        if target is None:
            return out
        self._state = target._value_  # in the graph: checked above; the plain value
        out.append(Transition(before, self._state, event.type))
        out.append(self.prompt())
        return out

    def _refused_while_closed(self, event: Event) -> list[Output]:
        """An event refused while the table is closed: the first of its kind is an
        ``UNEXPECTED_EVENT``, a later one a ``consequence`` note. A day whose
        ``table_open`` was lost raised one deviation per event (over a thousand); now one per
        kind of event (a stray shuffle and a stray cut are still two)."""
        dev = self._unexpected(event)
        if event.type not in self._closed_refused:
            self._closed_refused.add(event.type)
            return [dev]
        return [consequence(dev, dev.code)]

    def ends_open_round(self, kind: str, event: Event | None = None) -> bool:
        """Whether an event of type ``kind`` (``event``, where known), refused in the current
        state, is taken as the end of an open round whose ``round_end`` is missing
        (:meth:`_round_left_open`): it comes only after a round (:data:`_AFTER_ROUND`), a
        round is open with cards dealt in it (or not dealt after the end card: 001 §2), the
        state after its end takes it — and it is not more likely a late reading of an
        earlier step or a stray one: a shuffle or a count in a shoe's first round (of a stud
        round, before two hands of five are out) or, where a cut card ends the shoe, in any
        round but its last; a return of the discards that holds none of this round's cards
        (the last round's, returned late)."""
        before = self._state
        shoe = self._shoe
        if before not in (ROUND, LAST_ROUND) or kind not in _AFTER_ROUND \
                or (kind, before) in self._routes or not (shoe.round_cards or shoe.void_round):
            return False
        if kind == "bets_closed" and self.profile.shuffle.every_round:
            return False  # (a round that has its own shuffle: that shuffle ends the last one)
        if before == ROUND and kind != "bets_closed" and (
                shoe.round_cards < 10 if self.profile.shuffle.every_round else
                shoe.rounds <= 1 or (kind in ("shuffle", "deck_check")
                                     and self.profile.has_cut_card)):
            return False  # (a shoe with a cut card is reshuffled or counted after its last
            # round: a shuffle or count inside another is more likely stray)
        if isinstance(event, DiscardsReturned) and event.count <= (
                shoe.to_return(self.profile.shuffler.burns_returned) - shoe.round_cards):
            return False
        return (kind, self._after_round_end().value) in self._routes

    def _round_left_open(self, event: Event, before: str) -> list[Output]:
        """What comes only after a round (the next round's bets, the return of the discards,
        the next shoe, the close) came while a round was open: the round is ended there
        and then, and the event applied after it — not refused, with the next round's
        cards laid on this one, or every card of the next shoe counted against this shoe
        (tens to hundreds of deviations for one missing ``round_end``). A round not dealt
        because the end card came before its first card (001 §2; ``first_card_of_round =
        "no-round"``) had nothing to end: a note. Any other is one ``UNEXPECTED_EVENT``
        naming the missing ``round_end``, and the round is judged as its ``round_end``
        would judge it."""
        shoe = self._shoe
        out: list[Output] = []
        if shoe.void_round and shoe.round_cards == 0:
            out.append(Note("round_not_dealt", f"{event.type}: round {self.round}, not dealt "
                            "after the end card, is closed without a round_end",
                            {"round": self.round, "event": event.type}))
        else:
            out.append(self._make(
                "UNEXPECTED_EVENT", f"{event.type} while {STATE_DESCRIPTIONS[before]}: "
                f"round {self.round}'s round_end is missing; the round is taken as ended "
                "there", event=event.type, state=before, missing="round_end",
                round=self.round))
        # the round's end and the event, as one step: one transition and one prompt
        for o in (*self._dispatch(RoundEnd(t=event.t)), *self._dispatch(event)):
            if not isinstance(o, Transition | Prompt):
                out.append(o)
        if self._state != before:
            out.append(Transition(before, self._state, event.type))
            out.append(self.prompt())
        return out

    def _referee_says(self, call: Callable[[CardLedger], list[Output]],
                      early: bool = False) -> list[Output]:
        """A step of the round, judged by its referee. In a round opened by cards read
        before its bets closed, both readings judge it (``Shoe.aside``: those cards set
        aside; ``early``: a step of those cards, which that reading does not take) and
        what they say waits for the round's end (:meth:`_round_ended`) — the cards say
        which reading is true only as the round goes on, and a reading chosen at the
        first step the other flags hid real slips later in the round (a review)."""
        shoe = self._shoe
        out = call(shoe.referee)
        if shoe.aside is None:
            return out
        shoe.held.extend(out)
        if not early:
            shoe.held_aside.extend(call(shoe.aside))
        return []

    def _round_ended(self) -> list[Output]:
        """The referee's ``end``; in a round judged both ways, the reading with fewer
        deviations (the round's own cards where they tie) goes on, and what it said during
        the round comes out now."""
        shoe = self._shoe
        ended = shoe.referee.end()
        if shoe.aside is None:
            return ended
        aside_ended = shoe.aside.end()
        mine = [*shoe.held, *ended]
        theirs = [*shoe.held_aside, *aside_ended]

        def count(outs: list[Output]) -> int:
            return sum(isinstance(o, Deviation) for o in outs)

        if count(theirs) < count(mine):
            shoe.referee, mine = shoe.aside, theirs
        shoe.aside, shoe.held, shoe.held_aside = None, [], []
        return mine

    # ------------------------------------------------------------------ deviations

    def _make(self, code: DeviationCode, message: str, **evidence: Any) -> Deviation:
        spec = CATALOG[code]
        return Deviation(code, spec.severity, message, self.profile.rule(spec.section), evidence)

    def _suspect(self, finding: Finding) -> Deviation:
        """SHUFFLE_SUSPECT from the screen's finding (docs/shuffle-screening.md)."""
        return self._make("SHUFFLE_SUSPECT", finding.message(), shoe=self.shoe,
                          **finding.evidence())

    def _screen_failed(self, exc: Exception, out: list[Output]) -> None:
        """The shuffle screen raised: a fault in the screen (a bug), never in the procedure.
        The screen is advisory (docs/shuffle-screening.md): it is off for the rest of this
        shoe, every procedure check goes on, and the note tells the pit and the auditor
        that this shoe was not screened. The next shoe starts it again. Deterministic, as
        the rest of the engine: a replay of the log meets the same fault at the same card."""
        self._screen = None
        self._screen_ok = False
        out.append(Note("screen_off", f"the shuffle screen stopped on an internal fault "
                        f"({type(exc).__name__}); shoe {self.shoe} is not screened from here",
                        {"shoe": self.shoe, "error": type(exc).__name__,
                         "detail": printable(str(exc))[:200]}))

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
        if self._shoe.active:
            return
        self._end_shoe()
        self._shoe.active = True
        self.shoe += 1
        self.checked_since_shoe = False
        self._screen_ok = True
        self._screen = self.screen if self.profile.shuffle_screen.enabled else None
        try:
            self.screen.start_shoe(self.shoe, self.decks)
        except Exception as exc:  # (a fault in the screen: _screen_failed)
            self._screen_failed(exc, out)

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
        if not self._shoe.shuffled:
            self._shoe.shuffled = True
            out.append(self._make("SHUFFLE_MISSING", f"{what} without a shuffle since the "
                                  "last shoe", step=through))
        if p.cut.required and not self._shoe.cut_done:
            self._shoe.cut_done = True
            out.append(self._make("CUT_MISSING", f"{what} without a cut", step=through))
        if p.has_cut_card and not self._shoe.cut_card_set:
            self._shoe.cut_card_set = True
            out.append(self._make("CUT_CARD_MISSING", f"{what} without the cut card",
                                  step=through))
        if through == "shoe_loaded":
            return
        if not self._shoe.loaded:
            if p.card_source == "hand":
                self._shoe.loaded = True
                self._shoe.in_shoe = self._shoe.pack_size
            else:
                self._load(out, implied=True)
        if self._shoe.burn_pending:
            self._burn_short(out)

    def _judge_sequence_lots(self, out: list[Output]) -> None:
        """New cards every sequence (001 §2; two tableaux), judged when a sequence's cards
        are loaded — a reshuffle never dealt from (before the close) is no sequence. Its
        lots: those the stream names for it (its pack's count's, or the opening's single
        lot); with none named, the last sequence's where no pack was counted since and
        the cards were not withdrawn (players left: the sequence goes on after the
        restart). A pack counted without lots, or a table opened with the day's several
        lots and no count naming one, is not judged: the stream does not say (judging
        the lots named before flagged correct days: a review's false alarms)."""
        named, self._named_lots = self._named_lots, None
        counted, self._counted_for_next = self._counted_for_next, False
        withdrawn, self._withdrawn = self._withdrawn, False
        if not self.profile.deck_lifecycle.new_cards_every_shoe:
            return
        lots = named or (None if counted or withdrawn else self._sequence_lots)
        if not lots:
            return
        reused = sorted(lot.id for lot in lots if lot.id in self.lots_used_before)
        if reused:
            out.append(self._make(
                "DECK_EXPIRED",
                f"lot(s) {', '.join(reused)} already used in an earlier sequence; every "
                f"sequence needs new cards",
                lots=reused, shoe=self.shoe,
            ))
        self.lots_used_before.update(lot.id for lot in lots)
        self._sequence_lots = lots

    def _load(self, out: list[Output], implied: bool = False) -> None:
        self._judge_sequence_lots(out)
        self._shoe.loaded = True
        self._shoe.in_shoe = self._shoe.pack_size
        self._shoe.in_holder = 0
        if implied:
            out.append(Note("load_implied", "stack taken as loaded (no shoe_loaded event)",
                            {"cards": self._shoe.pack_size}))
        self._start_burn(out, "shoe", self.profile.burn.mode)

    def _start_burn(self, out: list[Output], reason: str, mode: str, count: int = 0) -> None:
        if mode == "none" and not count:
            self._shoe.burn_pending = False
            return
        self._shoe.burn_pending = True
        self._shoe.burn_reason = reason
        self._shoe.burn_done = 0
        self._shoe.burn_due = 5 if mode == "five" else (None if mode == "by-value" else count)

    def _burn_short(self, out: list[Output]) -> None:
        due = self._shoe.burn_due
        out.append(self._make(
            "BURN_COUNT",
            f"{self._shoe.burn_done} card(s) burned, "
            + (f"{due} required" if due is not None else "the first card was never drawn")
            + (" after the dealer change" if self._shoe.burn_reason == "dealer_change" else ""),
            burned=self._shoe.burn_done, required=due, reason=self._shoe.burn_reason,
            mode=self._burn_mode_name(),
        ))
        self._shoe.burn_pending = False

    def _burn_mode_name(self) -> str:
        reason = self._shoe.burn_reason
        return "dealer_change" if reason == "dealer_change" else self.profile.burn.mode

    # ------------------------------------------------------------------ handlers
    # Each returns the destination state (None: stay, internal) or raises _Reject.

    def _on_table_open(self, e: TableOpen, out: list[Output]) -> State | None:
        self._reset_day()
        self.table = e.table
        self.decks = e.decks
        self.sabot = e.sabot
        self._shoe.pack_size = self._shoe.referee.pack = e.decks * 52
        self.open_date = e.local_date  # the day on the table's clock (deck lots: PROCEDURES §2.1)
        check_sabot(self._openings.setdefault(e.table, []), self.sabot_rotation_k, e,
                    self.open_date, self._make, out)
        d = self.profile.decks
        if not d.min <= e.decks <= d.max:
            span = f"{d.min}" if d.min == d.max else f"{d.min}–{d.max}"
            out.append(self._make("DECK_COUNT", f"{e.decks} deck(s); the game needs {span}",
                                  decks=e.decks, min=d.min, max=d.max))
        if e.deck_lots:
            self.lots = e.deck_lots
            if len(e.deck_lots) == 1:  # (several: the day's stock, not one sequence's)
                self._named_lots = e.deck_lots
            judge_lots(self.profile, e.deck_lots, self.open_date, self._make, out,
                       self._paper_closed)
        return OPENING_CHECK if self.profile.inspection.opening_check else SHUFFLE

    def _on_deck_check(self, e: DeckCheck, out: list[Output]) -> State | None:
        check_composition(e, self.decks, self._make, out)
        # the opening count made late, after the first shoe's shuffle (CHECK_MISSING then):
        # the count of this pack, not its closing — the shoe goes on, its steps done
        late_opening = (self.profile.inspection.opening_check and not self._counted
                        and self.shoe <= 1 and self.round == 0
                        and self.state not in (OPENING_CHECK, SHUFFLE))
        self._counted = True
        self._counted_for_next = True
        if e.deck_lots is not None:
            self.lots = self._named_lots = e.deck_lots
            self._judge_new_lots(e, out)
        if late_opening:
            out.append(Note("late_opening_count", "the pack was counted after the shuffle, "
                            "before any round: taken as the opening count (CHECK_MISSING "
                            "above); the shoe goes on", {"state": self.state}))
            return None
        if self._screen_ok:
            try:
                self.screen.deck_check()
            except Exception as exc:  # (a fault in the screen: _screen_failed)
                self._screen_failed(exc, out)
        self.checked_since_shoe = True
        if self.state == OPENING_CHECK:
            self.checked_open = True
            return SHUFFLE
        if self.state == SHUFFLE:
            self.checked_open = True
            return None
        self._end_shoe()
        return CLOSING_CHECK if self.state != CLOSING_CHECK else None

    def _judge_new_lots(self, e: DeckCheck, out: list[Output]) -> None:
        """A count's lots, judged on the table day (the opening's date) and on the count's
        own date, where they differ (a count after midnight): a lot dated either way is
        taken, and flagged only when both days flag it."""
        assert e.deck_lots is not None
        verdicts: list[list[Output]] = []
        days: list[dt.date | None] = [
            d for d in dict.fromkeys((self.open_date, e.local_date)) if d is not None]
        for day in days or [None]:
            judged: list[Output] = []
            judge_lots(self.profile, e.deck_lots, day, self._make, judged, self._paper_closed)
            verdicts.append(judged)
        out.extend(min(verdicts, key=lambda v: sum(isinstance(o, Deviation) for o in v)))

    def _on_shuffle(self, e: Shuffle, out: list[Output]) -> State | None:
        if self.profile.inspection.opening_check and not self.checked_open:
            self.checked_open = True
            out.append(self._make("CHECK_MISSING", "shuffled without the opening count of the "
                                  "pack", step="shuffle"))
        if self.state in (READY, RETURN_DISCARDS, SHOE_COMPLETE, CLOSING_CHECK, SUSPENDED):
            self._shoe.active = False
        self._begin_shoe(out)
        self._shoe.shuffled = True
        self._shoe.cut_done = False
        self._shoe.cut_card_set = False
        return CUT

    def _on_cut(self, e: Cut, out: list[Output]) -> State | None:
        size = self.decks * 52
        if e.offset > size:
            raise _Reject(f"offset {e.offset} is more than the {size} cards of the pack")
        if self.state in (READY, RETURN_DISCARDS):
            self._end_shoe()  # cards gathered and re-cut between rounds: a new shoe begins
        self._begin_shoe(out)
        need = self.profile.cut.min_each_side
        self._shoe.cut_done = True
        check_cut(e.offset, size, need, self._make, out)
        if self.profile.card_source == "hand":
            self._shoe.loaded = True
            self._shoe.in_shoe = size
            return READY
        return CUT_CARD if self.profile.has_cut_card else LOAD

    def _on_cut_card_placed(self, e: CutCardPlaced, out: list[Output]) -> State | None:
        if not self.profile.has_cut_card:
            out.append(self._make("CUT_CARD_UNEXPECTED",
                                  "a cut card was placed; this game uses none",
                                  event="cut_card_placed"))
            return None
        if self.state != CUT_CARD:
            self._begin_shoe(out)
            if self.profile.cut.required and not self._shoe.cut_done:
                self._shoe.cut_done = True
                out.append(self._make("CUT_MISSING", "the cut card was placed without a cut",
                                      step="cut_card_placed"))
        self._shoe.cut_card_set = True
        self._shoe.declared_behind = e.behind
        if e.behind is not None:
            check_cut_card_window(self.profile, e.behind, "placed", self._make, out)
            window = self.profile.cut_card.window()
            assert window is not None
            # past both the place declared and the rule's lowest: a reading one card late
            # is still measured (CUT_CARD_POSITION), not implied
            self._shoe.implied_at = min(e.behind, window[0]) - 1
        return LOAD

    def _on_shoe_loaded(self, e: ShoeLoaded, out: list[Output]) -> State | None:
        self._shoe.loaded = False
        self._catch_up(out, "shoe_loaded")
        self._load(out)
        return BURN if self._shoe.burn_pending else READY

    def _on_card(self, e: CardDrawn, out: list[Output]) -> State | None:
        state = self._state
        if state == LOAD:  # no shoe_loaded came: the stack is in the shoe (load_implied)
            self._catch_up(out, "shoe_loaded")
            self._load(out, implied=True)
            self._state = state = (BURN if self._shoe.burn_pending else READY).value
            return self._on_card(e, out) or State(state)
        shoe = self._shoe
        if shoe.in_shoe <= shoe.implied_at and not shoe.cut_card_out and state in (
                ROUND, READY):
            return self._card_behind_cut_card(e, out)
        card = e.card
        # Every card that left the shoe: accounting and the duplicate check.
        seen = shoe.seen
        times = seen[card] + 1  # (a card's hash is a Python call: taken twice, not thrice)
        seen[card] = times
        shoe.out_since_return += 1
        if shoe.in_shoe > 0:
            shoe.in_shoe -= 1
        decks = self.decks
        if times > decks:
            scope = ("since the discards last went back" if self.profile.shuffler_mode
                     else "in this shoe")
            out.append(self._make(
                "CARD_DUPLICATE",
                f"{card} seen {times} times {scope}; {decks} deck(s) hold "
                f"{decks}: a foreign card is in play",
                card=str(card), seen=times, decks=decks))
        screen = self._screen
        if screen is not None:  # ShuffleScreen.card, in line (the screen's cost per card)
            pending = screen.pending
            pending.append(card)
            if len(pending) >= screen.due:
                try:
                    finding = screen.flush()
                    if finding is not None:
                        out.append(self._suspect(finding))
                except Exception as exc:  # (a fault in the screen: _screen_failed)
                    self._screen_failed(exc, out)
        if state == BURN:
            shoe.burned += 1
            shoe.burned_since_return += 1
            shoe.burn_done += 1
            if shoe.burn_due is None:
                shoe.burn_due = burn_value(card, self.profile.burn.ten_value)
                out.append(Note("burn_by_value", f"{card} drawn: burn {shoe.burn_due} "
                                "card(s), this one included",
                                {"card": str(card), "burn": shoe.burn_due}))
            if shoe.burn_done >= shoe.burn_due:
                shoe.burn_pending = False
                shoe.burn_just_finished = True
                return READY
            return None
        if state == LAST_ROUND and shoe.void_round:
            shoe.dealt += 1
            out.append(self._make(
                "PLAY_AFTER_LAST_HAND", f"{card} dealt after the end card showed: no further "
                "round may be played", card=str(card), round=self.round))
            return None
        if state in (ROUND, LAST_ROUND):
            shoe.dealt += 1
            shoe.round_cards += 1
            out.extend(shoe.referee.card(e) if shoe.aside is None  # (the card path)
                       else self._referee_says(lambda r: r.card(e)))
            return None
        if state == READY and shoe.burn_just_finished:
            shoe.burned += 1  # (the holder may keep it with the burns: it may be a round's)
            shoe.extra_since_return += 1
            out.append(self._make(
                "BURN_COUNT", f"{card} burned after the burn was complete: "
                f"{shoe.burn_done + 1} burned, {shoe.burn_due} required",
                burned=shoe.burn_done + 1, required=shoe.burn_due, card=str(card),
                reason=shoe.burn_reason, mode=self._burn_mode_name()))
            shoe.burn_done += 1
            return None
        if state == SHOE_COMPLETE and not self.profile.shuffle.every_round:
            shoe.dealt += 1
            out.append(self._make(
                "PLAY_AFTER_LAST_HAND", f"{card} drawn after the last hand, before a "
                "reshuffle", card=str(card)))
            return None
        shoe.dealt += 1
        if not self.profile.dealing.bets_close_before_cards:
            return None
        out.append(self._make(
            "CARD_BEFORE_BETS_CLOSED", f"{card} drawn before bets were closed",
            card=str(card), state=state))
        if state == READY:
            shoe.early_cards.append(e)  # (the next round's first card: _on_bets_closed)
        return None

    def _card_behind_cut_card(self, e: CardDrawn, out: list[Output]) -> State | None:
        """A card read from behind the cut card's place (past both the place declared and
        the rule's lowest, by more than a card), and no cut card read: the cut card
        came out unread (or the reading was lost). It is taken as having come out before
        this card — a note, no deviation: a dealer who finishes the round and reshuffles
        did what the rule asks (PROCEDURES §2.10), and one who plays on is judged as
        after any cut card (``PLAY_AFTER_LAST_HAND``). Without this, dealing past the cut
        card with no reading was never judged (a review's mutation sweep)."""
        shoe = self._shoe
        out.append(Note("cut_card_implied", f"{e.card} read with {shoe.in_shoe} card(s) "
                        f"left, from behind the cut card's place ({shoe.declared_behind} "
                        "behind it), and no cut card read: it is taken as having come out "
                        "before this card", {"card": str(e.card), "left": shoe.in_shoe,
                                             "declared_behind": shoe.declared_behind}))
        moved = self._on_cut_card(CutCardSeen(t=e.t), out, measured=False)
        if moved is not None:
            self._state = moved.value
        return self._on_card(e, out) or moved

    def _on_cut_card(self, e: CutCardSeen, out: list[Output], measured: bool = True
                     ) -> State | None:
        if not self.profile.has_cut_card:
            out.append(self._make("CUT_CARD_UNEXPECTED",
                                  "the reader saw a cut card; this game uses none",
                                  event="cut_card"))
            return None
        if self._shoe.cut_card_out:
            raise _Reject("the cut card already came out in this shoe")
        self._shoe.cut_card_out = True
        if measured:  # (where it came out, when a reader saw it)
            check_cut_card_window(self.profile, self._shoe.in_shoe, "came out", self._make,
                                  out)
        no_round = self.profile.cut_card.first_card_of_round == "no-round"
        if self.state == ROUND:
            if self._shoe.round_cards == 0 and no_round:
                self._shoe.void_round = True
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
        self._shoe.next_round_last = True
        out.append(Note("last_hand", "cut card out: the next round is the last hand", {}))
        return None

    def _on_bets_closed(self, e: BetsClosed, out: list[Output]) -> State | None:
        state = self.state
        self._shoe.burn_just_finished = False
        if state == BURN:
            self._burn_short(out)
        elif state == RETURN_DISCARDS:
            out.append(self._make(
                "DISCARDS_NOT_RETURNED",
                f"round started before the {self._shoe.out_since_return} card(s) of the last round "
                "went back into the shuffler", outstanding=self._shoe.out_since_return,
                returned=None))
        elif state == SHOE_COMPLETE and not self.profile.shuffle.every_round:
            out.append(self._make(
                "PLAY_AFTER_LAST_HAND",
                "a new round after the last hand of the shoe, before a reshuffle",
                shoe=self.shoe, rounds_in_shoe=self._shoe.rounds))
            self._shoe.after_last = True
        else:
            self._catch_up(out, "play")
        self.round += 1
        self._shoe.rounds += 1
        self._shoe.round_cards = 0
        shoe = self._shoe
        early, shoe.early_cards = shoe.early_cards, []
        if early:  # read before the bets closed (flagged then): the round's first cards, or
            # cards drawn and set aside before it was dealt afresh — both judged (a copy:
            # it keeps what the referee carries from round to round, the shoe's holder)
            shoe.aside = copy.copy(shoe.referee)
            shoe.held_aside = list(shoe.aside.begin(self.round, e))
        out.extend(shoe.referee.begin(self.round, e))
        for card in early:
            shoe.round_cards += 1
            out.extend(self._referee_says(lambda r: r.card(card), early=True))  # noqa: B023
        if self._shoe.next_round_last:
            self._shoe.next_round_last = False
            return LAST_ROUND
        return ROUND

    def _on_action(self, e: Action, out: list[Output]) -> State | None:
        out.extend(self._referee_says(lambda r: r.action(e.action)))
        return None

    def _on_stub_count(self, e: StubCount, out: list[Output]) -> State | None:
        out.extend(self._referee_says(lambda r: r.stub_count(e.count)))
        return None

    def _on_round_end(self, e: RoundEnd, out: list[Output]) -> State | None:
        ended = self._round_ended()
        out.extend(ended)
        after = self._after_round_end()
        shoe_over = after == SHOE_COMPLETE
        if self._screen_ok:
            try:
                self.screen.round_end(_hands_of(ended) if self._hand_piles else None)
                if shoe_over:
                    finding = self.screen.end_shoe()  # the shoe's last cards are judged now
                    if finding is not None:
                        out.append(self._suspect(finding))
            except Exception as exc:  # (a fault in the screen: _screen_failed)
                self._screen_failed(exc, out)
        if shoe_over:
            self._shoe.after_last = False
            self._finish_shoe()
        elif after == BURN:
            self._start_burn(out, "dealer_change", "count", self._shoe.change_burn_pending)
            self._shoe.change_burn_pending = 0
        return after

    def _after_round_end(self) -> State:
        """Where the round's end leads from here: the finished shoe (its last hand, a round
        played after it, or a game that shuffles every round), the return of the discards
        (a shuffler), the burn a dealer change owes (004 §3.8), or the next round's bets."""
        if (self._state == LAST_ROUND or self._shoe.after_last
                or self.profile.shuffle.every_round):
            return SHOE_COMPLETE
        if self.profile.shuffler_mode and self.profile.shuffler.discards_every_round:
            return RETURN_DISCARDS
        if self._shoe.change_burn_pending:
            return BURN
        return READY

    def _on_discards_returned(self, e: DiscardsReturned, out: list[Output]) -> State | None:
        shoe = self._shoe
        out_now = shoe.out_since_return
        kept = shoe.kept_out(self.profile.shuffler.burns_returned)
        expected = shoe.to_return(self.profile.shuffler.burns_returned)
        # a card burned too many (BURN_COUNT already) stays with the burns where they stay
        # in the holder (001 BP §20δ(3)), or goes back as the round's card it may have been
        extra = shoe.extra_since_return if kept else 0
        if e.count not in (expected, out_now, expected - extra):
            # (the burns too: early, but no card lost)
            held = f" ({kept} burned card(s) stay in the discard holder)" if kept else ""
            out.append(self._make(
                "DISCARDS_NOT_RETURNED",
                f"{e.count} card(s) went back into the shuffler; {expected} were out{held}",
                returned=e.count, outstanding=expected))
        shoe.out_since_return = 0
        shoe.burned_since_return = 0
        shoe.extra_since_return = 0
        shoe.seen.clear()
        if e.count == expected:
            shoe.in_holder += kept
        elif e.count == expected - extra:
            shoe.in_holder += kept + extra
        shoe.in_shoe = shoe.pack_size - shoe.in_holder
        if self._shoe.change_burn_pending:
            self._start_burn(out, "dealer_change", "count", self._shoe.change_burn_pending)
            self._shoe.change_burn_pending = 0
            return BURN
        return READY if self.state != READY else None

    def _on_dealer_change(self, e: DealerChange, out: list[Output]) -> State | None:
        previous, self.dealer = self.dealer, e.dealer
        n = self.profile.burn.on_dealer_change
        out.append(Note("dealer_change", f"dealer {e.dealer} takes over",
                        {"dealer": e.dealer, "previous": previous, "burn": n}))
        if not n or not self._shoe.loaded:
            return None  # before the shoe is loaded the start-of-shoe burn covers it
        if self.state == READY:
            self._shoe.burn_just_finished = False
            self._start_burn(out, "dealer_change", "count", n)
            return BURN
        if self.state == BURN and self._shoe.burn_due is not None:
            self._shoe.burn_due += n
            return None
        self._shoe.change_burn_pending = n
        return None

    def _on_players_left(self, e: PlayersLeft, out: list[Output]) -> State | None:
        out.append(Note("players_left", "no players: cards withdrawn and stacked",
                        {"shoe": self.shoe, "rounds_in_shoe": self._shoe.rounds}))
        self._end_shoe()
        self._withdrawn = True
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

    def _on_witness_checkpoint(self, e: WitnessCheckpoint, out: list[Output]) -> State | None:
        """Recorded, never judged: the floor's signed word on the chain so far."""
        return None

    def _on_device_diagnostic(self, e: DeviceDiagnostic, out: list[Output]) -> State | None:
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
        if self.profile.deck_lifecycle.paper_until_close:
            self._paper_closed.update((lot.id, lot.first_use) for lot in self.lots
                                      if lot.kind == "paper")
        self._end_shoe()
        return CLOSED


def screen_settings(rule: ShuffleScreenRule) -> ScreenSettings:
    """The screen's settings from a profile's ``[shuffle_screen]`` (every key the header
    records, so that a replay screens as the table did)."""
    return ScreenSettings(
        enabled=rule.enabled, false_alarm_one_in=rule.false_alarm_one_in,
        run_test=rule.run_test, continuation_test=rule.continuation_test,
        previous_shoe=rule.previous_shoe, shelf_test=rule.shelf_test,
        hand_piles=rule.hand_piles, packet_test=rule.packet_test,
        packet_predictor=rule.packet_predictor, hand_order=rule.hand_order,
        early_batch=rule.early_batch, packet_stop=rule.packet_stop)


def _hands_of(ended: Sequence[Output]) -> list[tuple[int, object]] | None:
    """The round's cards as (face, hand) in the order dealt, from the referee's round note
    (the shuffle screen's hand piles); None when the referee placed none."""
    for o in ended:
        if isinstance(o, Note) and o.kind == "round":
            cards = o.data.get("cards") or ()
            try:
                return [(parse_card(str(c["card"])).deck_index, c.get("to")) for c in cards]
            except (KeyError, TypeError, ValueError):
                return None
    return None
