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

This module holds the entry point (``handle``, the fault overlay, a round left open);
the handlers live with the part of the shoe cycle they judge, each module a layer of
one class: :class:`~.day.DayState` (the day, its public view, how a deviation is made)
→ :class:`~.preparation.Preparation` (open, count, shuffle, cut, cut card, load, burn,
close) → :class:`~.dealing.Dealing` (the rounds) → :class:`~.device_events.DeviceEvents`
→ :class:`TableEngine`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from controller.deviations import Deviation
from controller.engine.checks import SABOT_ROTATION_K
from controller.engine.day import Refused
from controller.engine.device_events import DeviceEvents
from controller.engine.resync import resync
from controller.engine.states import (
    BURN,
    CLOSED,
    DEVICE_FAULT,
    LAST_ROUND,
    OPENING_CHECK,
    PLAY_EVENTS,
    READY,
    RETURN_DISCARDS,
    ROUND,
    SHOE_COMPLETE,
    SHUFFLE,
    STATE_DESCRIPTIONS,
    State,
)
from controller.events import (
    DEVICE_INFO_EVENTS,
    Cut,
    DeckCheck,
    DiscardsReturned,
    Event,
    RoundEnd,
    Shuffle,
    TableOpen,
)
from controller.outputs import Note, Output, Prompt, Transition, consequence, transition
from controller.profiles import Profile

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


class TableEngine(DeviceEvents):
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
        super().__init__(profile, sabot_history=sabot_history,
                         sabot_rotation_k=sabot_rotation_k)
        #: the graph with each pair's handler: one look-up per event instead of two
        self._routes: dict[tuple[str, str], tuple[_Handler, tuple[str | None, ...]]] = {
            key: (getattr(TableEngine, "_on_" + key[0]), dests)
            for key, dests in self.graph.items()
        }

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
            procedure = self.procedure_state
            if episode[0] == "PLAY_AFTER_LAST_HAND":
                if procedure not in _PLAYED_ON_STATES or self.shoe != self._episode_shoe:
                    episode = None  # a new shoe, a count, the close: play after it is over
            elif episode[1] != procedure:
                episode = None  # the procedure moved on: the slip is over
        before = episode
        if event.t:
            self.last_t = event.t  # (the latest time read: an event without one is later)
        if self._shoe.early_cards and event.type not in _BEFORE_BETS:
            self._shoe.early_cards = []  # (no round opened after them: they were its own)
            self._shoe.early_unburned = 0
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
                out.append(transition(o.source, o.dest, o.trigger, under_fault=True))
            elif not isinstance(o, Prompt):
                out.append(o)
        return out

    def _dispatch(self, event: Event) -> list[Output]:
        before = self._state
        route = self._routes.get((event.type, before))
        if route is None:
            if before == BURN and self._shoe.burn_reason == "dealer_change" \
                    and not self._shoe.burn_done and (event.type, READY.value) in self._routes:
                if event.type in ("shuffle", "cut"):
                    return self._change_burn_moot(event)
                if event.type == "card_replaced":  # (between rounds: the burn still owed)
                    self._state = READY.value
                    replaced = self._dispatch(event)
                    self._state = BURN.value
                    return replaced
            if before == BURN and not self._shoe.rounds:
                if isinstance(event, Shuffle):  # (a shoe's: the next step says what it was)
                    self._shoe.shuffle_in_burn = event
                    return [Note("shuffle_in_burn", "shuffle during the start burn: a new "
                                 "shoe if the cut follows; a stray step if the burn goes on",
                                 {"state": before})]
                pending = self._shoe.shuffle_in_burn
                if pending is not None and event.type in ("cut", "cut_card_placed",
                                                          "shoe_loaded"):
                    self._shoe.shuffle_in_burn = None
                    return self._reshuffled_in_burn(pending, event)
            late = (self.late_return(event) if isinstance(event, DiscardsReturned)
                    else self.late_cut(event) if isinstance(event, Cut)
                    else self.late_shuffle(event) if isinstance(event, Shuffle)
                    else self.late_count(event) if isinstance(event, DeckCheck) else None)
            if late is not None:
                return late
            if self.ends_open_round(event.type, event):
                return self._round_left_open(event, before)
            if event.type == "round_end" and self._burn_read is not None:
                late = self.late_change_burn()
                if late is not None:
                    return late
            if event.type == "round_end" and self._late_round_end():
                return [self._late_round_end_note()]
            if before == CLOSED and self._opens_a_day(event):
                return self._open_implied(event)
            if isinstance(event, TableOpen) and self._implied_by is not None \
                    and not (self._shoe.dealt or self._shoe.burned or self.round):
                return self._open_late(event, before)
            if before == CLOSED:
                return self._refused_while_closed(event)
            return [self._unexpected(event)]
        handler, dests = route
        out: list[Output] = []
        try:
            target = handler(self, event, out)
        except Refused as why:
            return [self._unexpected(event, str(why))]
        if target not in dests:  # pragma: no cover - graph bug guard
            out.append(self._unexpected(event, f"no transition to {target}"))
            return out
        if target is None:
            return out
        self._state = target._value_  # in the graph: checked above; the plain value
        out.append(transition(before, self._state, event.type))
        out.append(self.prompt())
        return out

    def _change_burn_moot(self, event: Event) -> list[Output]:
        """A ``shuffle`` (or a cut between rounds) while the burn a dealer change owes has
        not begun: the burn is owed because play goes on in the shoe (004 §3.8, "игра
        продолжается, но сжигается одна карта"), and a re-shuffle after any hand is the
        casino's (PROCEDURES §2.13, 002 3.2.3) — the new shoe's own start burn follows, and
        the change's is not owed (a note). Refused, the new shoe's shuffle, cut, cut card
        and load were four ``UNEXPECTED_EVENT`` and its burn's second card a burn too many
        of the change's (a review's independent dealer: five deviations on a correct day;
        a count, a close or players leaving there were already taken). A damaged card
        replaced there is taken as between rounds, the burn still owed (000 §1: before the
        next shuffle; refused, it was an ``UNEXPECTED_EVENT`` on a correct day)."""
        before = self._state
        self._shoe.burn_pending = False
        self._state = READY.value
        out: list[Output] = [Note("change_burn_moot", f"{event.type} before the dealer change's "
                                  "burn: the shoe ends, and the new shoe's burn is the one owed",
                                  {"event": event.type})]
        for o in self._dispatch(event):
            if not isinstance(o, Transition | Prompt):  # (one transition for the two)
                out.append(o)
        if self._state != before:
            out.append(transition(before, self._state, event.type))
            out.append(self.prompt())
        return out

    def _reshuffled_in_burn(self, shuffle: Shuffle, event: Event) -> list[Output]:
        """A ``shuffle`` during a shoe's start burn (a shoe, not a continuous shuffler's:
        its own mixing is a note, Preparation._machine_shuffle), followed by a cut (or the
        cut card, or the load): the dealer gathered the stack and shuffled again — a new
        shoe begins at the shuffle, as a re-shuffle between rounds begins one (002 3.2.2),
        and the burn left short is one ``BURN_COUNT`` (none when no card was drawn yet:
        the stack came back out whole). Refused, the new shoe's shuffle, cut, cut card and
        load were four ``UNEXPECTED_EVENT`` and its burn a burn too many of the old shoe
        (a review's independent dealer: 5 deviations, the burn's named backwards). Taken
        at once, a stray ``shuffle`` with the burn going on was four (a review): a burn
        card next makes it one ``UNEXPECTED_EVENT`` (Dealing._on_card), the bets next
        too (Dealing._on_bets_closed)."""
        before = self._state
        out: list[Output] = []
        if self._shoe.burn_done:
            self._burn_short(out)
        self._state = READY.value
        for o in (*self._dispatch(shuffle), *self._dispatch(event)):
            if not isinstance(o, Transition | Prompt):  # (one transition for the two)
                out.append(o)
        out.append(transition(before, self._state, event.type))
        out.append(self.prompt())
        return out

    def _opens_a_day(self, event: Event) -> bool:
        """Is ``event``, refused while the table is closed, the first step of a day whose
        ``table_open`` is missing: a count of about a whole pack (nine in ten of the
        smallest pack's cards or more: a few cards counted are a stray count), or the first
        shuffle where the profile counts no pack at the opening? (After a close, a count
        is first taken as that day's closing count recorded late, :meth:`late_count`.)"""
        if isinstance(event, DeckCheck):
            return len(event.cards) * 10 >= 9 * 52 * self.profile.decks.min
        return event.type == "shuffle" and not self.profile.inspection.opening_check

    def _open_implied(self, event: Event) -> list[Output]:
        """A day's first step — its opening count (or its first shuffle, where the profile
        counts no pack at the opening) — before the table was ever opened: the stream's
        ``table_open`` is missing. One ``UNEXPECTED_EVENT`` naming it, and the table taken
        as opened there — with the decks the count holds, or the profile's most — so that
        the day is judged: refused, every step of it was (one deviation per kind, the
        day's every slip unseen: a review's sweep) — on the first day and after a close
        alike. Any other event while the table is closed is refused as a stray one
        (:meth:`_refused_while_closed`); a ``table_open`` after an implied one, before any
        card, starts the day again (:meth:`_open_late`)."""
        decks = self.profile.decks
        n = decks.max
        if isinstance(event, DeckCheck):  # (a count of most of a pack: _opens_a_day)
            n = min(max(round(len(event.cards) / 52), decks.min), decks.max)
        out: list[Output] = [self._make(
            "UNEXPECTED_EVENT", f"{event.type} before the table was opened: its table_open is "
            f"missing; taken as opened here with {n} deck(s)", event=event.type,
            state=CLOSED.value, missing="table_open", decks=n)]
        implied = self._dispatch(TableOpen(table="", decks=n, t=event.t))
        self._implied_by = event  # (after the opening, which starts the day afresh)
        for o in (*implied, *self._dispatch(event)):
            if not isinstance(o, Transition | Prompt):
                out.append(o)
        out.append(transition(CLOSED.value, self._state, event.type))
        out.append(self.prompt())
        return out

    def _open_late(self, event: TableOpen, before: str) -> list[Output]:
        """The ``table_open`` after a day taken as opened without it (:meth:`_open_implied`),
        before any card of it: the day starts again here, as that opening says (its table,
        decks and lots) — the missing opening was flagged once; a note here. A count that
        opened the day implied, with nothing after it, is the day's opening count recorded
        before its opening: applied again, its findings notes (they were raised); anything
        else before was a stray step. (Once a card is out, a table_open is refused, as in
        any open day: a review — a stray one restarted a day mid-round.)"""
        implied_by = self._implied_by
        self._state = CLOSED.value
        out: list[Output] = [Note("late_table_open", "table_open after the table was taken as "
                                  "opened: the day starts again here", {"state": before})]
        for o in self._dispatch(event):
            if not isinstance(o, Transition | Prompt):
                out.append(o)
        if isinstance(implied_by, DeckCheck) and before == SHUFFLE.value \
                and self._state == OPENING_CHECK.value:
            for o in self._dispatch(implied_by):
                if isinstance(o, Deviation):
                    out.append(consequence(o, o.code))
                elif not isinstance(o, Transition | Prompt):
                    out.append(o)
        out.append(transition(before, self._state, event.type))
        out.append(self.prompt())
        return out

    def _refused_while_closed(self, event: Event) -> list[Output]:
        """An event refused while the table is closed: the first of its kind is an
        ``UNEXPECTED_EVENT``, a later one a ``consequence`` note. A day whose
        ``table_open`` was lost raised one deviation per event (over a thousand); now one per
        kind of event (a stray shuffle and a stray cut are still two)."""
        self._count_owed = False  # (a count after this is no closing count recorded late)
        dev = self._unexpected(event)
        if event.type not in self._closed_refused:
            self._closed_refused.add(event.type)
            return [dev]
        return [consequence(dev, dev.code)]

    def ends_open_round(self, kind: str, event: Event | None = None) -> bool:
        """Whether an event of type ``kind`` (``event``, where known), refused in the current
        state, is taken as the end of an open round whose ``round_end`` is missing
        (:meth:`_round_left_open`): it comes only after a round (:data:`_AFTER_ROUND`), a
        round is open (for the next ``bets_closed``: with cards dealt in it, or not dealt
        after the end card, 001 §2), the state after its end takes it — and it is not more
        likely a late reading of an earlier step or a stray one: a shuffle or a count in a
        shoe's first round (of a stud round, before two hands of five are out); a return of
        the discards that holds none of this round's cards (the last round's, returned
        late). A round opened after the shoe's last hand is ended by any of them."""
        before = self._state
        shoe = self._shoe
        if kind == "card_replaced" and shoe.void_round and not shoe.round_cards \
                and (kind, before) not in self._routes:
            # a round the end card left undealt (001 §2) has no cards to collect: a damaged
            # card replaced then comes after it, as a count or a shuffle does (a review: it
            # alone was refused there)
            return (kind, self._after_round_end().value) in self._routes
        if kind == "card_replaced" and before in (ROUND, LAST_ROUND) and shoe.round_cards \
                and shoe.aside is None and (kind, before) not in self._routes \
                and shoe.referee.complete():
            # a damaged card is replaced between rounds (000 §1, 001 BP §1): once the
            # round's every card is dealt, the replacement comes after it, its round_end
            # missing (a review: refused, then the next bets_closed ended the round — two
            # deviations for one missing round_end); while a card is still due it is
            # refused, as a replacement during a hand
            return (kind, self._after_round_end().value) in self._routes
        if before not in (ROUND, LAST_ROUND) or kind not in _AFTER_ROUND \
                or (kind, before) in self._routes:
            return False
        if shoe.after_last and kind != "bets_closed":
            # a round opened after the shoe's last hand (PLAY_AFTER_LAST_HAND), dealt or
            # not: the shoe is over, so its reshuffle, count or close ends it — refused, the
            # next shoe's every card was counted against this one (a review: 412
            # deviations for one stray bets_closed)
            return (kind, self._after_round_end().value) in self._routes
        if not (shoe.round_cards or shoe.void_round) and kind == "bets_closed":
            return False  # (bets closed twice: the second is judged where it stands)
        if kind == "bets_closed" and self.profile.shuffle.every_round:
            return False  # (a round that has its own shuffle: that shuffle ends the last one)
        if before == ROUND and kind in ("shuffle", "deck_check") and (
                shoe.round_cards < 10 if self.profile.shuffle.every_round else
                shoe.rounds <= 1):
            return False  # (a shuffle or count in a shoe's first round is more likely a late
            # reading of the shoe's own; later in the shoe it ends the round — a reshuffle
            # after any hand is the casino's to order, 002 §2 3.2.3, and a table may close
            # mid-shoe: refused, the next shoe's every card was counted against this one, or
            # the closing count lost and a missing card not flagged (a review))
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
        self._left_open = None  # (the round_end dispatched below is not a late one: a review)
        shoe = self._shoe
        out: list[Output] = []
        if shoe.void_round and shoe.round_cards == 0:
            out.append(Note("round_not_dealt", f"{event.type}: round {self.round}, not dealt "
                            "after the end card, is closed without a round_end",
                            {"round": self.round, "event": event.type}))
        elif shoe.after_last and shoe.round_cards == 0:  # (its slip was flagged: one)
            out.append(Note("round_not_dealt", f"{event.type}: round {self.round}, opened "
                            "after the shoe's last hand and not dealt, is closed without a "
                            "round_end", {"round": self.round, "event": event.type}))
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
            out.append(transition(before, self._state, event.type))
            out.append(self.prompt())
        self._left_open = (self.shoe, self.round, self._state) \
            if isinstance(out[0], Deviation) else None
        return out
