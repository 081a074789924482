"""The table's steps around play (:class:`Preparation`): the opening, the count of the
pack, the shuffle, the cut, the cut card's place, the load and the burn (PROCEDURES §2
steps 1–8), the close; and the steps a later one shows were skipped (:meth:`_catch_up`:
each flagged once, where the procedure moves on)."""

from __future__ import annotations

import dataclasses
import datetime as dt

from controller.deviations import Deviation
from controller.engine.checks import (
    check_composition,
    check_cut,
    check_cut_card_window,
    check_sabot,
    judge_lots,
)
from controller.engine.day import DayState, Refused
from controller.engine.states import (
    BURN,
    CLOSED,
    CLOSING_CHECK,
    CUT,
    CUT_CARD,
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
from controller.events import (
    Cut,
    CutCardPlaced,
    DeckCheck,
    ShoeLoaded,
    Shuffle,
    TableClose,
    TableOpen,
    written_date,
)
from controller.outputs import Note, Output, consequence


class Preparation(DayState):
    """The preparation of a shoe and the table's opening and close (module docstring)."""


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

    def _catch_up(self, out: list[Output], through: str, what: str = "") -> None:
        """Flag, once each, every mandatory step skipped before ``through``.

        ``through`` is ``"shoe_loaded"`` (flags up to the cut card; the caller loads)
        or ``"play"`` (also implies the load and flags an unfinished burn). ``what``: the
        messages' subject (by default the stack loaded, or the cards dealt).
        """
        p = self.profile
        what = what or ("stack loaded" if through == "shoe_loaded" else "cards dealt")
        if p.inspection.opening_check and not self.checked_open:
            self.checked_open = True
            out.append(self._make("CHECK_MISSING", f"{what} without the opening count of "
                                  "the pack", step=through))
        self._begin_shoe(out)
        resumed = False
        if not self._shoe.shuffled:
            self._shoe.shuffled = True
            # play resumed from the shoe the players left (000 §9, 001 BP §17: the restart
            # skipped): what is left of it, not a pack
            resumed = self._shoe.unshuffled = self.state == SUSPENDED
            if resumed:
                # one slip, the restart skipped: its steps are named, not each flagged (a
                # review: the shuffle, cut, cut card and burn, four for one slip)
                skipped = ["shuffle", *(["cut"] * p.cut.required),
                           *(["cut card"] * p.has_cut_card),
                           *(["burn"] * (p.burn.mode != "none" and p.card_source != "hand"
                                         and through == "play"))]  # (a load: its burn next)
                skip = self._make(
                    "SHUFFLE_MISSING", f"{what} from the shoe the players left, without "
                    f"the restart ({', '.join(skipped)})", step=through, skipped=skipped)
                if p.shuffle.restart_source:  # (the players-left paragraph, not the shuffle's)
                    skip = dataclasses.replace(skip, rule=f"{p.name} {p.shuffle.restart_source}")
                out.append(skip)
                self._shoe.cut_done = self._shoe.cut_card_set = True
            else:
                self._shoe.shuffle_flagged = True
                out.append(self._make("SHUFFLE_MISSING", f"{what} without a shuffle since "
                                      "the last shoe", step=through))
        if p.cut.required and not self._shoe.cut_done:
            self._shoe.cut_done = self._shoe.cut_flagged = True
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
        if self._shoe.burn_pending and resumed:
            self._shoe.burn_pending = False  # (named in the restart skipped, above)
        elif self._shoe.burn_pending:
            self._burn_short(out)

    def _judge_sequence_lots(self, out: list[Output]) -> None:
        """New cards every sequence (001 §2; two tableaux), judged when a sequence's cards
        are loaded — a reshuffle never dealt from (before the close) is no sequence. Its
        lots: those the stream names for it (its pack's count's, or the opening's single
        lot); with none named, the last sequence's where no pack was counted since and
        the cards were not withdrawn (players left: the sequence goes on after the
        restart). A pack counted without lots, or a table opened with the day's several
        lots and no count naming one, is not judged: the stream does not say (judging
        the lots named before flagged correct days: a review's false alarms) — except
        that a sequence after such a one whose count names every lot of the stock deals
        from the lot that one used."""
        named, self._named_lots = self._named_lots, None
        counted, self._counted_for_next = self._counted_for_next, False
        withdrawn, self._withdrawn = self._withdrawn, False
        unknown, self._unknown_sequence = self._unknown_sequence, False
        if not self.profile.deck_lifecycle.new_cards_every_shoe:
            return
        lots = named or (None if counted or withdrawn else self._sequence_lots)
        if not lots:
            # (not judged: a new sequence's cards brought from the day's stock unnamed and
            # uncounted read the same as the last one's loaded again — a review's false
            # alarms; but a later count naming the whole stock is judged, below). Cards
            # withdrawn and dealt again are the same sequence, known or not.
            self._unknown_sequence = unknown if withdrawn else True
            self._stock_dealt = self._stock_dealt or bool(self._stock)
            return
        reused = sorted(lot.id for lot in lots if lot.id in self.lots_used_before)
        if reused:
            out.append(self._make(
                "DECK_EXPIRED",
                f"lot(s) {', '.join(reused)} already used in an earlier sequence; every "
                f"sequence needs new cards",
                lots=reused, shoe=self.shoe,
            ))
        elif self._stock_dealt and self._stock and ({lot.id for lot in self._stock}
                                                    <= {lot.id for lot in lots}):
            # an earlier sequence was dealt from the day's stock, lots unnamed: a sequence
            # naming every lot of it deals one of them again, the next one or any later
            # (reviews: clean before; then caught only right after it)
            stock = sorted(lot.id for lot in self._stock)
            out.append(self._make(
                "DECK_EXPIRED",
                f"lot(s) {', '.join(stock)}: the whole of the day's stock, from which an "
                "earlier sequence was dealt; every sequence needs new cards",
                lots=stock, shoe=self.shoe,
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
    # Each returns the destination state (None: stay, internal) or raises Refused.

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
            else:
                self._stock = e.deck_lots
            judge_lots(self.profile, e.deck_lots, self.open_date, self._make, out,
                       self._paper_closed)
        return OPENING_CHECK if self.profile.inspection.opening_check else SHUFFLE

    def _judge_count(self, e: DeckCheck, out: list[Output]) -> None:
        """The pack a count found (check_composition), in place or recorded late: its
        surplus cards (the same surplus as the last count's: that slip's, a note), and the
        pack's size where it holds whole decks more (pack_cards)."""
        before, at = self._extra_cards, len(out)
        self._extra_cards = extra = check_composition(e, self.decks, self._make, out)
        self._counted_pack = None
        if extra and len(extra) == 52 and len(set(extra.values())) == 1 \
                and len(e.cards) == (self.decks + next(iter(extra.values()))) * 52:
            self._counted_pack = len(e.cards)  # whole decks more (see pack_cards)
        if before and extra and not extra - before:
            # the same extra cards as the last count found, still in the pack: that slip's
            out[at:] = [consequence(o, o.code) if isinstance(o, Deviation)
                        and o.code == "DECK_EXTRA_CARD" else o for o in out[at:]]
        if not self._shoe.loaded:  # (the pack counted before its shoe is loaded: its size)
            self._shoe.pack_size = self._shoe.referee.pack = self.pack_cards

    def _on_deck_check(self, e: DeckCheck, out: list[Output]) -> State | None:
        self._judge_count(e, out)
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
        # a count without its own time came no earlier than the last event that had one
        # (a review: new lots counted after midnight were judged on the opening's day)
        own = e.local_date or (written_date(self.last_t) if self.last_t else None)
        days: list[dt.date | None] = [
            d for d in dict.fromkeys((self.open_date, own)) if d is not None]
        for day in days or [None]:
            judged: list[Output] = []
            judge_lots(self.profile, e.deck_lots, day, self._make, judged, self._paper_closed)
            verdicts.append(judged)
        out.extend(min(verdicts, key=lambda v: sum(isinstance(o, Deviation) for o in v)))

    def _on_shuffle(self, e: Shuffle, out: list[Output]) -> State | None:
        if self._machine_shuffle(e, out):
            return None
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
        size = self.pack_cards
        if e.offset > size:
            raise Refused(f"offset {e.offset} is more than the {size} cards of the pack")
        if self.state in (READY, RETURN_DISCARDS):
            late = self.late_cut(e)
            if late is not None:  # (this shoe's own cut, flagged missing: not a new shoe —
                out.extend(late)  # a review: SHUFFLE_MISSING and CUT_CARD_MISSING as well)
                return None
            if self._shoe.machine_shuffle:
                self._new_block(out)
            else:
                self._end_shoe()  # cards gathered and re-cut between rounds: a new shoe
        self._begin_shoe(out)
        need = self.profile.cut.min_each_side
        self._shoe.cut_done = True
        check_cut(e.offset, size, need, self._make, out)
        if self.profile.card_source == "hand":
            self._shoe.loaded = True
            self._shoe.in_shoe = size
            return READY
        return CUT_CARD if self.profile.has_cut_card else LOAD

    def late_count(self, e: DeckCheck) -> list[Output] | None:
        """A count read right after the step that flagged it missing — the closing count
        after the table's close, the opening count once the first round's bets closed
        (CHECK_MISSING there; no card of the round out): that count, late — a note, the pack
        judged as in place — not refused as well (a review: two deviations for one late
        count). None when ``e`` is not that."""
        owed, self._count_owed = self._count_owed, False
        closing = owed and self.state == CLOSED
        opening = (self.state == ROUND and self.profile.inspection.opening_check
                   and not self._counted and self.shoe <= 1 and self.round == 1
                   and not self._shoe.round_cards and self._shoe.rounds == 1)
        if not (closing or opening):
            return None
        out: list[Output] = [Note("late_count", "the pack counted after the step that flagged "
                                  "the count missing (CHECK_MISSING above): taken as "
                                  + ("the closing count" if closing else "the opening count"),
                                  {"state": self.state})]
        self._judge_count(e, out)
        self._counted = True
        return out

    def late_cut(self, e: Cut) -> list[Output] | None:
        """A cut read after the step that flagged it missing (``CUT_MISSING``: the cut card
        placed, the load, the bets — the same shoe), before any card left the shoe: that
        cut, recorded late — a note, its depth judged (the cut rule's paragraph) — not
        refused as well (a review: two deviations for one late cut). None when ``e`` is
        not that."""
        shoe = self._shoe
        size = self.pack_cards
        if not shoe.cut_flagged or shoe.dealt > 1 or shoe.burn_done or e.offset > size:
            return None  # (after a round's first card too: stud deals no burn, the sweep)
        shoe.cut_flagged = False
        out: list[Output] = [Note("late_cut", f"cut at {e.offset} read after the step that "
                                  "flagged it missing (CUT_MISSING above): taken as late",
                                  {"offset": e.offset, "state": self.state})]
        check_cut(e.offset, size, self.profile.cut.min_each_side, self._make, out)
        return out

    def late_shuffle(self, e: Shuffle) -> list[Output] | None:
        """A shuffle read after the bets that flagged it missing (``SHUFFLE_MISSING``: a
        stud round's, the same shoe), before any card left the shoe: that shuffle,
        recorded late — a note, not refused as well (the sweep: a stud round's shuffle
        written after its cut and bets was SHUFFLE_MISSING and UNEXPECTED_EVENT). None
        when ``e`` is not that."""
        shoe = self._shoe
        if not shoe.shuffle_flagged or shoe.dealt or shoe.burn_done or self.state != ROUND:
            return None  # (in a round not dealt yet; before it, a shuffle is the stack's
            # again — a new shoe: TableEngine._reshuffled_in_burn)
        shoe.shuffle_flagged = False
        return [Note("late_shuffle", "shuffle read after the step that flagged it missing "
                     "(SHUFFLE_MISSING above): taken as late", {"state": self.state})]

    def _new_block(self, out: list[Output]) -> None:
        """A cut or a load right after a shuffle read as the continuous shuffler's own: that
        shuffle was the hand shuffle of a new block (001 BP §20δ(6)), which begins here."""
        self._end_shoe()
        self._begin_shoe(out)
        self._shoe.shuffled = True

    def _machine_shuffle(self, e: Shuffle, out: list[Output]) -> bool:
        """A ``shuffle`` a continuous shuffler reports of its own mixing — between rounds, or
        once the stack is in it before the start burn's first card — is no new cycle: the
        hands follow one another without a cut or a burn (001 BP §20γ, §20δ(6); the driver
        turns the device's SHUFFLE_DONE into ``shuffle``). A note; a cut right after it
        begins a new cycle with it as its shuffle. Read as a hand shuffle, every later round
        was CUT_MISSING and BURN_COUNT (a review)."""
        if not self.profile.shuffler.continuous:
            return False
        shoe = self._shoe
        state = self.state
        if state == BURN:
            if shoe.burn_done:
                # during the start burn no shuffler reports: unless the burn stopped there,
                # short (the bets close next: BURN_COUNT, and this the machine's report
                # after it — refused, one slip was two deviations, a review), the next burn
                # card makes this an UNEXPECTED_EVENT (Dealing._on_card)
                shoe.shuffle_in_burn = e
                out.append(Note("machine_shuffle", "shuffle during the start burn: the "
                                "machine's own if the burn stopped here (short); the next "
                                "burn card says it did not", {"state": state}))
                return True
            where = "the stack loaded, before the start burn"
        elif state in (READY, RETURN_DISCARDS) and shoe.loaded:
            shoe.machine_shuffle = True
            where = "between rounds"
        else:
            return False
        out.append(Note("machine_shuffle", f"shuffle {where}: read as the continuous "
                        "shuffler's own, the hands following without a cut or a burn"
                        + ("" if state == BURN else "; a cut or a load next makes it a new "
                           "block's shuffle"), {"state": state}))
        return True

    def _on_cut_card_placed(self, e: CutCardPlaced, out: list[Output]) -> State | None:
        if not self.profile.has_cut_card:
            out.append(self._make("CUT_CARD_UNEXPECTED",
                                  "a cut card was placed; this game uses none",
                                  event="cut_card_placed"))
            return None
        if self.state != CUT_CARD:
            self._begin_shoe(out)
            if self.profile.cut.required and not self._shoe.cut_done:
                self._shoe.cut_done = self._shoe.cut_flagged = True
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
        if self.state in (READY, RETURN_DISCARDS):  # (a continuous shuffler: the graph)
            if not self._shoe.machine_shuffle:
                raise Refused("")  # (not valid here, as any load between rounds)
            self._new_block(out)
        self._shoe.loaded = False
        self._catch_up(out, "shoe_loaded")
        self._load(out)
        return BURN if self._shoe.burn_pending else READY

    def _on_table_close(self, e: TableClose, out: list[Output]) -> State | None:
        if self.profile.inspection.closing_check and not self.checked_since_shoe:
            out.append(self._make("CHECK_MISSING", "table closed without counting the pack "
                                  "after the last shoe", step="table_close"))
            self._count_owed = True
        if self.profile.deck_lifecycle.paper_until_close:
            self._paper_closed.update((lot.id, lot.first_use) for lot in self.lots
                                      if lot.kind == "paper")
        self._end_shoe()
        return CLOSED
