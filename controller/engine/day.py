"""The table day the engine keeps, and how it makes a deviation: :class:`DayState`.

The base of :class:`~controller.engine.core.TableEngine`: the day (table, decks, lots,
sabot, shoe and round numbers), the current :class:`~controller.engine.shoe.Shoe`, the
shuffle screen, the open device faults, the graph and its ``transitions`` machine; the
engine's public view of them; and the one way a deviation is made (:meth:`_make`, the
rule's section from the profile). The step handlers build on it, one module per part of
the shoe cycle: :mod:`.preparation` (open, count, shuffle, cut, cut card, load, burn,
close), :mod:`.dealing` (the rounds), :mod:`.device_events` (the devices' reports) and
:mod:`.core` (``handle``: the graph's look-up, the fault overlay, one slip one deviation).
Each layer calls only the ones below it, so the chain is one class to the interpreter and
to the type checker (a method's look-up is cached per class: the card path pays nothing
for it)."""

from __future__ import annotations

import datetime as dt
import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from transitions import Machine

from controller.cards import Card
from controller.deviations import CATALOG, Deviation, DeviationCode
from controller.engine.checks import SABOT_ROTATION_K, openings_from
from controller.engine.graph import Graph, build, machine_for, states_for
from controller.engine.prompts import prompt_text
from controller.engine.resync import Slip
from controller.engine.shoe import Accounting, Shoe
from controller.engine.states import CLOSED, DEVICE_FAULT, READY, ROUND, STATE_DESCRIPTIONS
from controller.events import DeckLot, Event
from controller.outputs import Note, Output, Prompt, prompt_of
from controller.profiles import Profile, ShuffleScreenRule
from controller.rounds import referee_for
from controller.screening import Finding, ScreenSettings, ShuffleScreen
from controller.validation import printable


class Refused(Exception):
    """An event the graph allows in this state but whose content makes it invalid here."""


class DayState:
    """The state of one table for one table day, and its public view (see the module
    docstring). ``sabot_history`` and ``sabot_rotation_k``: :class:`TableEngine`."""

    #: the open round ended where its ``round_end`` is missing, then the event applied:
    #: the dispatcher's (``TableEngine._round_left_open``), which the card path calls
    _round_left_open: Callable[[Event, str], list[Output]]

    def __init__(self, profile: Profile, *,
                 sabot_history: Mapping[str, Sequence[Any]] | None = None,
                 sabot_rotation_k: int = SABOT_ROTATION_K) -> None:
        if type(sabot_rotation_k) is not int or sabot_rotation_k < 1:
            raise ValueError(f"sabot_rotation_k must be an integer >= 1, got {sabot_rotation_k!r}")
        self.profile = profile
        self.sabot_rotation_k = sabot_rotation_k
        self._openings = openings_from(sabot_history)
        self._orphaned: list[Output] = []  # (see _end_shoe)
        self.last_t: str | None = None  # the latest event time read (TableEngine.handle)
        #: paper lots (id, first use) in play when a table closed (destroyed then: 000 §1,
        #: 001 BP §1, 003 §1), where the profile's ``paper_until_close`` says so
        self._paper_closed: set[tuple[str, dt.date]] = set()
        self.states = states_for(profile)
        #: the current state, as its plain value (what every record holds)
        self._state: str = CLOSED.value
        self.graph: Graph = build(profile, self.states)
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
    def procedure_state(self) -> str:
        """The state play is judged in: during a device fault, the state the fault
        interrupted (every event but the fault's own is applied there), else ``state``."""
        return self._resume if self._state == DEVICE_FAULT and self._resume else self._state

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
        return prompt_of(self._state, prompt_text(self))

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
        #: the opening's several lots (the day's stock), and whether the last sequence was
        #: loaded with lots the stream did not name (from that stock, or a count without lots)
        self._stock: tuple[DeckLot, ...] = ()
        self._unknown_sequence = False
        #: a sequence was dealt with its lots unnamed while the day had a stock: from it
        self._stock_dealt = False
        self.checked_open = False
        self._counted = False  # a deck_check since the table opened (the late opening count)
        #: the cards the last count found more often than the decks hold (DECK_EXTRA_CARD
        #: then): dealt on, they are that slip's, not a CARD_DUPLICATE each
        self._extra_cards: Counter[Card] = Counter()
        #: the last count's cards, where they were whole decks more than the table opened
        #: with (pack_cards); else None
        self._counted_pack: int | None = None
        #: the kinds of event refused while the table was closed (after this day's close)
        self._closed_refused: set[str] = set()
        #: the event that opened the day without its table_open (TableEngine._open_implied);
        #: None: the day opened with its own
        self._implied_by: Event | None = None
        #: the closing count was flagged missing at the close (TableEngine.late_count)
        self._count_owed = False
        #: (shoe, round, state) after a round was ended where its round_end was missing
        #: (TableEngine._round_left_open): a round_end that comes next, nothing moved since,
        #: is that one, late (TableEngine._late_round_end)
        self._left_open: tuple[int, int, str] | None = None
        #: (shoe, round, burned) after a card taken as a dealer change's burn, the round
        #: complete and its round_end missing (TableEngine.late_change_burn)
        self._burn_read: tuple[int, int, int] | None = None
        #: (shoe, round) of a shoe's last round when it ended short of a card: a card before
        #: the next shoe's load is that one, late (TableEngine._late_last_card)
        self._short_round: tuple[int, int] | None = None
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
        pack = self.pack_cards
        self._shoe = Shoe(pack, referee_for(self.profile, self._make, pack))

    @property
    def pack_cards(self) -> int:
        """The cards of the pack: the decks', or the last count's where it found whole
        decks more (a 9th deck at an 8-deck table is dealt from: its cut, its cut card's
        place and its stock are those of 468 cards — taken as 416, one slip raised 103
        deviations). A few cards more are not taken as in the pack: a scanner that read a
        card twice would move every count after it."""
        return self._counted_pack or self.decks * 52

    # ------------------------------------------------------------------ deviations

    def _make(self, code: DeviationCode, message: str, **evidence: Any) -> Deviation:
        spec = CATALOG[code]
        if code in _CARD_COUNT_UNSURE and self._shoe.aside is None:  # (one reading only: a
            # round judged both ways makes deviations it may drop)
            shoe = self._shoe
            unread, twice = shoe.unsure_since_return
            how = _card_unsure(code, evidence)
            if how < 0:
                shoe.short_rounds.add(self.round)
                shoe.unsure_since_return = (True, twice)
            elif how > 0:
                shoe.unsure_since_return = (unread, True)
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
        expected = self.valid_events(self.procedure_state)
        text = f"{event.type} is not valid while {STATE_DESCRIPTIONS[self.state]}"
        if why:
            text += f": {why}"
        return self._make("UNEXPECTED_EVENT", text, event=event.type, state=self.state,
                          expected=expected, **({"why": why} if why else {}))

    def _late_round_end(self) -> bool:
        """Is a ``round_end`` the one whose absence :meth:`_round_left_open` flagged, come
        late — nothing since moved the table (the same shoe, round and state) and the round
        opened since has no card yet, or not all of its first deal (the game's referee says
        so: no round of it ends there)? (A review: it ended the round the next
        ``bets_closed`` had just opened, and that round's next card was a critical
        ``CARD_BEFORE_BETS_CLOSED``.)"""
        left = self._left_open
        self._left_open = None
        shoe = self._shoe
        # (or the step that ended it took the table back to between rounds — a shuffler's
        # return of the discards — and the next bets opened the round now open: the sweep,
        # a shuffler round's round_end two steps late was a CARD_BEFORE_BETS_CLOSED too)
        between = left == (self.shoe, self.round - 1, READY.value) and self._state == ROUND
        return (left == (self.shoe, self.round, self._state) or between) and (
            not shoe.round_cards or (shoe.aside is None and shoe.referee.dealing()))

    def _late_round_end_note(self) -> Note:
        return Note("late_round_end", "round_end after the next step: the last round's, whose "
                    "end was taken there (UNEXPECTED_EVENT above); nothing more ends",
                    {"round": self.round, "state": self._state})


_CARD_COUNT_UNSURE = frozenset({"DRAW_RULE", "DEALER_DRAW_RULE", "HAND_CARD_MISSING",
                                "CARD_TO_FINISHED_HAND"})


def _card_unsure(code: str, evidence: Mapping[str, Any]) -> int:
    """Does a referee's deviation say the round's cards were one short (-1) — a card the
    rules wanted, which may have left the shoe unread (baccarat: a draw missing at the end,
    Punto's third card missing before Banco's, the deal of four incomplete; blackjack: the
    dealer stood short of 17, a hand without its double's or split's card) — or one too
    many (+1: a draw where the rule stands, after a natural or beyond the tableau, the
    dealer's draw on 17 or more, a card to a finished hand: maybe one card read twice)? 0:
    neither (a recorded stand where the rule draws: every card was read)."""
    if code == "DRAW_RULE":
        problem = evidence.get("problem")
        return (-1 if problem in ("missing", "deal-incomplete", "punto-missing") else
                1 if problem in ("drew", "natural", "extra") else 0)
    if code == "DEALER_DRAW_RULE":
        return -1 if evidence.get("drew") is False else 1
    return -1 if code == "HAND_CARD_MISSING" else 1


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
