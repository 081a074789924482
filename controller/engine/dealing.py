"""The rounds (:class:`Dealing`): every card that leaves the shoe (its accounting, the
shuffle screen's batch, the round's referee), the bets closing, the players' actions, the
stub count, the round's end, the cut card coming out (the last hand), the discards going
back into a shuffler, a dealer change, players leaving, a damaged card replaced
(PROCEDURES §2 steps 9–14). A round opened by cards read before its bets closed is judged
both ways until its end (:meth:`_referee_says`, :meth:`_round_ended`)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from controller.cards import NEW_DECK, Card, burn_value, parse_card
from controller.deviations import Deviation, Severity
from controller.engine.checks import check_cut_card_window, window_holds
from controller.engine.day import _CARD_COUNT_UNSURE, Refused, _card_unsure
from controller.engine.preparation import Preparation
from controller.engine.states import (
    BURN,
    CUT,
    CUT_CARD,
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
from controller.events import (
    Action,
    BetsClosed,
    CardDrawn,
    CardReplaced,
    CutCardSeen,
    DealerChange,
    DiscardsReturned,
    PlayersLeft,
    RoundEnd,
    StubCount,
)
from controller.outputs import Note, Output, consequence
from controller.rounds import CardLedger

#: the states before the stack is loaded: a card read there implies the load
_BEFORE_LOAD = frozenset((LOAD.value, CUT_CARD.value, CUT.value, SHUFFLE.value,
                          OPENING_CHECK.value))


class Dealing(Preparation):
    """The rounds of a shoe (module docstring)."""

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

    def _late_last_card(self, e: CardDrawn) -> Note | None:
        """A card before the next shoe's load, no card of it out yet, when the shoe's last
        round ended short of a card (its referee said so: the dealer stood short of 17, a
        draw missing): that card, read late — a note, no card of the next shoe. (A review's
        sweep: the next shoe's burn and load taken as begun, its cut, cut card and load then
        refused: up to eight deviations for one card read late.) None when not that."""
        shoe_no, round_no = self._short_round or (0, 0)
        self._short_round = None
        shoe = self._shoe
        if shoe_no != self.shoe - 1 or round_no != self.round or shoe.dealt \
                or shoe.burn_done or shoe.loaded:
            return None
        return Note("late_card", f"{e.card}: the last shoe's last round's card, read after "
                    "it ended (the round short of a card)", {"card": str(e.card),
                                                              "round": round_no})

    def _round_ended(self) -> list[Output]:
        """The referee's ``end``; in a round judged both ways, the reading with fewer
        deviations (the round's own cards where they tie) goes on, and what it said during
        the round comes out now. The info ones (an exposed card, a dummy hand: facts, no
        slip) count only between readings with as many slips: a Banco Punto card exposed
        before the bets, the round's first (used: a dummy hand, 001 BP §5), was read as set
        aside for its two infos, and the round a DRAW_RULE (a review's independent
        dealer)."""
        shoe = self._shoe
        ended = shoe.referee.end()
        if shoe.aside is None:
            return ended
        aside_ended = shoe.aside.end()
        mine = [*shoe.held, *ended]
        theirs = [*shoe.held_aside, *aside_ended]

        def count(outs: list[Output]) -> tuple[int, int]:
            devs = [o for o in outs if isinstance(o, Deviation)]
            return sum(d.severity != Severity.INFO for d in devs), len(devs)

        mine_count, theirs_count = count(mine), count(theirs)
        if theirs_count < mine_count:
            shoe.referee, mine = shoe.aside, theirs
            # the cards read before the bets were set aside, not the round's: a burn where
            # the game has none (between a shuffler's hands) — the holder may keep them
            # with the burns, as a burn too many (a review: DISCARDS_NOT_RETURNED as well)
            shoe.extra_since_return += shoe.early_count
        elif theirs_count == mine_count:  # (a tie: the round's own cards, but the return
            shoe.early_tied += shoe.early_count  # may show them kept aside: 7 in 120)
        shoe.aside, shoe.held, shoe.held_aside = None, [], []
        return mine

    def _on_card(self, e: CardDrawn, out: list[Output]) -> State | None:
        state = self._state
        if state in _BEFORE_LOAD:  # no shoe_loaded came: the stack is in the shoe
            # (load_implied); a step skipped before it (a count, the shuffle, the cut, the
            # cut card) is flagged once, as a shoe_loaded there flags it — shoe_loaded is
            # optional (docs/events.md), so the card was refused and the burn it began
            # counted short (a review: three deviations for one missing cut)
            if self._short_round is not None:
                late = self._late_last_card(e)
                if late is not None:
                    out.append(late)
                    return None
            self._catch_up(out, "shoe_loaded", "cards dealt")
            self._load(out, implied=True)
            self._state = state = (BURN if self._shoe.burn_pending else READY).value
            return self._on_card(e, out) or State(state)
        shoe = self._shoe
        if shoe.in_shoe <= shoe.implied_at and not shoe.cut_card_out and state in (
                ROUND, READY):
            return self._card_behind_cut_card(e, out)
        card = e.card
        index = card.deck_index  # (the screen's face; a round's pair in a row: _read_twice)
        # Every card that left the shoe: accounting and the duplicate check.
        seen = shoe.seen
        times = seen[card] + 1  # (a card's hash is a Python call: taken twice, not thrice)
        seen[card] = times
        shoe.out_since_return += 1
        decks = self.decks
        if times <= decks:
            if shoe.in_shoe > 0:
                shoe.in_shoe -= 1
        elif times > shoe.pack_size // 52:
            # a copy more than the pack holds: not one of its cards, so the shoe holds as
            # many as before — the cut card's place is still measured right (a review: a
            # card read twice was CARD_DUPLICATE and a CUT_CARD_POSITION one card off). A
            # copy the last count found surplus is that count's slip (DECK_EXTRA_CARD)
            shoe.foreign_copies += 1
            if times > decks + self._extra_cards[card] + shoe.read_twice[card]:
                scope = ("since the discards last went back" if self.profile.shuffler_mode
                         else "in this shoe")
                if decks == 1 and index == shoe.last_index \
                        and state in (ROUND, LAST_ROUND) and self._same_place(e):
                    return self._read_twice_foreign(card, times, scope, out)
                out.append(self._make(
                    "CARD_DUPLICATE",
                    f"{card} seen {times} times {scope}; {decks} deck(s) hold "
                    f"{decks}: a foreign card is in play",
                    card=str(card), seen=times, decks=decks))
        elif shoe.in_shoe > 0:  # (a pack counted whole decks more: one of its cards)
            shoe.in_shoe -= 1
        screen = self._screen
        if screen is not None:  # ShuffleScreen.card, in line (the screen's cost per card)
            pending = screen.pending
            pending.append(index)  # (the screen's faces: Card.deck_index)
            if len(pending) >= screen.due:
                try:
                    finding = screen.flush()
                    if finding is not None:
                        out.append(self._suspect(finding))
                except Exception as exc:  # (a fault in the screen: _screen_failed)
                    self._screen_failed(exc, out)
        if state == BURN:
            if shoe.shuffle_in_burn is not None:  # the burn went on: that shuffle was no
                out.append(self._unexpected(shoe.shuffle_in_burn, "a shuffle during the "
                                            "start burn, which went on after it (read late)"))
                shoe.shuffle_in_burn = None  # machine's, nor a new shoe's
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
            if shoe.change_burn_pending and state == ROUND and shoe.aside is None \
                    and not e.to_a_hand and not e.unrequested and shoe.referee.complete():
                # a dealer change during the round owes a burn at its end (004 §3.8): a card
                # after the round's last one, named to no hand, with no round_end, is that
                # burn — the round_end is missing (a review: read as the dealer's draw on 18,
                # then the burn short: three deviations for one missing round_end). A
                # round_end right after it says otherwise (late_change_burn). A card marked
                # unrequested is the round's (000 §7: burned, or offered to the next player;
                # a review's independent dealer: taken as the burn, a false UNEXPECTED_EVENT
                # and the cut card a card off)
                out.extend(self._round_left_open(e, state))
                self._burn_read = (self.shoe, self.round, shoe.burned)
                return None
            shoe.dealt += 1
            shoe.round_cards += 1
            if index == shoe.last_index:  # the same card twice in a row (_read_twice)
                twin = shoe.twin  # (a second pair in the round: which was read twice?)
                shoe.twin = (self.round, None if twin and twin[0] == self.round else card)
            shoe.last_index = index
            found = (shoe.referee.card(e) if shoe.aside is None  # (the card path)
                     else self._referee_says(lambda r: r.card(e)))
            if found:
                out.extend(found)
                if shoe.twin is not None and shoe.twin[0] == self.round:
                    self._read_twice(found, out)
            return None
        if state == READY and shoe.burn_just_finished:
            if e.to_a_hand:
                # named to a hand: the round's first card dealt before the bets closed (the
                # path below), not a burn too many (a review: a first round dealt early read
                # as one BURN_COUNT)
                shoe.burn_just_finished = False
            elif shoe.change_burn_optional:  # the dealer change's card after the start burn
                shoe.change_burn_optional -= 1
                shoe.burned += 1
                shoe.burned_since_return += 1
                shoe.burn_done += 1
                return None
            else:
                shoe.burned += 1  # (the holder may keep it with the burns: a round's maybe)
                shoe.extra_since_return += 1
                out.append(self._make(
                    "BURN_COUNT", f"{card} burned after the burn was complete: "
                    f"{shoe.burn_done + 1} burned, {shoe.burn_due} required",
                    burned=shoe.burn_done + 1, required=shoe.burn_due, card=str(card),
                    reason=shoe.burn_reason, mode=self._burn_mode_name()))
                shoe.burn_done += 1
                if self.profile.dealing.bets_close_before_cards:
                    # or the first round's first card, dealt before the bets closed: the
                    # round is judged both ways, as after any card read early
                    # (_on_bets_closed; a review: read as a burn only, the round was one
                    # card short — two refused actions and a dealer's draw for one slip)
                    shoe.early_cards.append(e)
                return None
        if state == SHOE_COMPLETE and not self.profile.shuffle.every_round:
            shoe.dealt += 1
            out.append(self._make(
                "PLAY_AFTER_LAST_HAND", f"{card} drawn after the last hand, before a "
                "reshuffle", card=str(card)))
            return None
        if state == READY and shoe.returned_unread and not shoe.early_cards:
            # the last round's card the return already held (one more than read: a round
            # short of a card, return_count), read late: it went back with its discards —
            # not out now, no card of the next round (a review's sweep: CARD_BEFORE_BETS_
            # CLOSED, and the next return one short, for one card read late)
            shoe.returned_unread -= 1
            shoe.out_since_return -= 1
            shoe.in_shoe = min(shoe.pack_size, shoe.in_shoe + 1)
            seen[card] -= 1
            out.append(Note("late_card", f"{card}: the last round's card, read after its "
                            "discards went back (they held it)", {"card": str(card)}))
            return None
        shoe.dealt += 1
        if not self.profile.dealing.bets_close_before_cards:
            return None
        out.append(self._make(
            "CARD_BEFORE_BETS_CLOSED", f"{card} drawn before bets were closed",
            card=str(card), state=state))
        if state == READY:
            shoe.early_cards.append(e)  # (the next round's first card: _on_bets_closed)
            shoe.early_unburned += 1  # (no burn too many: set aside, not yet held back)
        return None

    def _read_twice(self, found: list[Output], out: list[Output]) -> None:
        """A round that read the same card twice in a row (``Shoe.twin``) now holds one
        card too many for the rules (a draw where the rule stands, after a natural, beyond
        the tableau, to a finished hand: ``_card_unsure``'s +1): maybe that card was read
        twice (a scanner's double read), the slip the referee just named — unless the
        round read two such pairs (which one?). The shoe's count allows a card more (the
        cut card's place) and the face a copy more (``CARD_DUPLICATE``), so that one
        double read is one deviation: counted as read, it put the cut card a card off
        (CUT_CARD_POSITION) and made the face's last copy one too many (CARD_DUPLICATE),
        shoes later — the sweep: two or three deviations in every baccarat profile.
        Slack, not a correction: where the two were real cards and the card too many
        another slip, nothing false follows — a cut card a card off, or a face's surplus
        copy, in that shoe goes unflagged (the price: docs/deviations.md). Once a round. A
        shuffler's return counts allow for it already (return_count)."""
        shoe = self._shoe
        if shoe.twin is None or shoe.aside is not None or self.profile.shuffler_mode or \
                not any(isinstance(o, Deviation) and o.code in _CARD_COUNT_UNSURE
                        and _card_unsure(o.code, o.evidence) > 0 for o in found):
            return
        card = shoe.twin[1]
        shoe.twin = (self.round, None)  # (once a round: a pair after it is no second)
        if card is None:  # (two pairs in the round: neither is taken)
            return
        shoe.read_twice[card] += 1
        out.append(Note("read_twice", f"{card} was read twice in a row in this round, which "
                        "holds one card too many for the rules (above): maybe one card read "
                        "twice — the shoe's count and the face's copies allow for it",
                        {"card": str(card)}))

    def _same_place(self, e: CardDrawn) -> bool:
        """Does ``e`` name (``to``) the place the round's last card went, or is either
        unnamed? A scanner that reads a card twice reads its place twice too: a copy named
        to another player is a foreign card dealt to that player (a review: taken as read
        twice, that player's hand was a card short, DEAL_COUNT as well)."""
        cards = self._shoe.referee.cards
        if not e.to or not cards or cards[-1].to == "round":
            return True
        return cards[-1].to.strip().lower() == e.to.strip().lower()

    def _read_twice_foreign(self, card: Card, times: int, scope: str,
                            out: list[Output]) -> State | None:
        """A single deck's card read again right after itself, in a round (stud poker):
        the card read twice, or a foreign copy. One ``CARD_DUPLICATE`` says so; the copy
        is dealt to no hand and not counted, so the hand that got the card is not also a
        card long (the sweep: CARD_DUPLICATE and the hand's DEAL_COUNT for one double
        read). Not in a pack of several decks: there a copy beyond the pack's right after
        its twin may be a real card, the surplus an earlier double read's (the sweep: a
        draw rule broken when it was set aside)."""
        shoe = self._shoe
        shoe.seen[card] = times - 1
        shoe.foreign_copies -= 1
        shoe.out_since_return -= 1
        out.append(self._make(
            "CARD_DUPLICATE",
            f"{card} read again right after {card}: {times} copies {scope}, and "
            f"{self.decks} deck(s) hold {self.decks} — the reader read one card twice, or "
            "a foreign card is in play; the copy is dealt to no hand",
            card=str(card), seen=times, decks=self.decks, read_twice=True))
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
            raise Refused("the cut card already came out in this shoe")
        self._shoe.cut_card_out = True
        if measured and not self._shoe.unshuffled:  # (where it came out, when a reader saw
            # it; not in a shoe resumed after players left without the restart: its cards are
            # the last shoe's remainder, and measured against a whole pack the position would
            # be a second, false slip)
            found: list[Output] = []
            check_cut_card_window(self.profile, self._shoe.in_shoe, "came out", self._make,
                                  found)
            shoe = self._shoe
            unsure = shoe.foreign_copies + min(1, len(shoe.short_rounds))
            over = min(1, sum(shoe.read_twice.values()))  # (as short rounds: one card)
            if found and (unsure or over) and window_holds(self.profile, range(
                    shoe.in_shoe - unsure, shoe.in_shoe + over + 1)):
                # the cards the shoe still holds may be fewer than counted, by a card a
                # round: the copies read beyond the pack's (CARD_DUPLICATE) were taken as no
                # cards of it — read twice — and may have been misread cards of it; a round
                # the referee found short of a card (a draw the rule wanted, a hand's card)
                # may have had it drawn and not read (one card for all such rounds: a cut
                # card off by more is still flagged). Where such a reading puts the cut card
                # in its place, it is: those slips are flagged already (a review's sweep:
                # a card not read was the round's slip and a CUT_CARD_POSITION one off).
                # More, by a card each, where a round read a card twice (_read_twice)
                found = []
            declared, window = self._shoe.declared_behind, self.profile.cut_card.window()
            came = self._shoe.in_shoe
            if found and declared is not None and window is not None and (
                    (declared < window[0] and came < window[0])
                    or (declared > window[1] and came > window[1])):
                # the place declared was flagged when the cut card was placed: where it
                # came out, on the same side of the window, shows the same slip — a note,
                # not a second deviation (a review); on the other side, the declaration
                # was not where it went: a deviation of its own
                found = [consequence(d, d.code) if isinstance(d, Deviation) else d
                         for d in found]
            out.extend(found)
        no_round = self.profile.cut_card.first_card_of_round == "no-round"
        if self.state == ROUND:
            if self._shoe.round_cards == 0 and no_round:
                self._shoe.void_round = True
                out.append(Note("last_hand", "cut card before the first card: no further "
                                "round; this round is not dealt", {"round": self.round}))
                return LAST_ROUND
            shoe = self._shoe
            if (measured and not no_round and shoe.round_cards and shoe.aside is None
                    and self.profile.cut_card.first_card_of_round == "round-is-last"
                    and shoe.referee.complete()):
                # 001 BP §16: the hand's cards are all dealt, so the cut card is the first
                # card drawn for the next hand, which is played and is the last — whether
                # the reader or the dealer's round_end reached the engine first (a review:
                # the round still open made it "during a hand", and the hand §16 requires
                # a critical PLAY_AFTER_LAST_HAND)
                shoe.next_round_last = True
                out.append(Note("last_hand", f"cut card out after round {self.round}'s last "
                                "card: it is the first card of the next round, the last hand",
                                {"round": self.round, "next_round_last": True}))
                return None
            out.append(Note("last_hand", f"cut card out: round {self.round} is the last "
                            "hand of the shoe", {"round": self.round}))
            return LAST_ROUND
        if no_round and self._shoe.early_cards:
            # cards of a round were read before its bets closed (CARD_BEFORE_BETS_CLOSED
            # then): the end card showed during that round, which is finished and is the
            # last (001 §2) — not the end card before a round, with the round's own cards
            # after it a critical PLAY_AFTER_LAST_HAND (a review)
            self._shoe.next_round_last = True
            out.append(Note("last_hand", "cut card out during a round dealt before its bets "
                            "closed: that round is the last", {"round": self.round + 1}))
            return None
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
        self._shoe.machine_shuffle = False  # (a cut after this round is no restart of it)
        self._shoe.change_burn_optional = 0  # (play has begun: a later change burns its own)
        self._shoe.returned_unread = 0
        stray, self._shoe.shuffle_in_burn = self._shoe.shuffle_in_burn, None
        if stray is not None and not self.profile.shuffler.continuous:
            # a shoe's shuffle during its start burn, no cut after it: no new shoe, a stray
            # step (a continuous shuffler's: the machine's, after a burn stopped short)
            out.append(self._unexpected(stray, "a shuffle during the start burn, the bets "
                                        "next without a cut (read late)"))
        if state == BURN:
            self._burn_short(out)
        elif state == RETURN_DISCARDS:
            shoe = self._shoe
            shoe.return_owed = (shoe.to_return(self.profile.shuffler.burns_returned),
                                shoe.out_since_return, shoe.burned_since_return,
                                shoe.extra_since_return)
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
        shoe.last_index = -2  # (a pair in a row is read within a round: _read_twice)
        early, shoe.early_cards = shoe.early_cards, []
        shoe.early_count, shoe.early_unburned = shoe.early_unburned, 0
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
        if self._left_open is not None and self._late_round_end():
            # the last round's round_end, after the bets_closed that ended it: the round
            # just opened goes on
            out.append(self._late_round_end_note())
            return None
        ended = self._round_ended()
        out.extend(ended)
        after = self._after_round_end()
        self._short_round = ((self.shoe, self.round) if after == SHOE_COMPLETE
                             and self.round in self._shoe.short_rounds else None)
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

    def late_change_burn(self) -> list[Output] | None:
        """A ``round_end`` right after the card taken as a dealer change's burn (the round
        complete, no round_end: above). Either that card was the burn and this round_end is
        late, or the round had not ended — the card was the dealer's (drawn in error) and
        the burn is still to come. The next step tells, and both are one slip (the round's
        UNEXPECTED_EVENT): a card next, with nothing since, is the burn (as the change's
        card after a start burn, ``Shoe.change_burn_optional``); the bets next, the burn was
        that card. (A review: a burn too many after the dealer's draw on 17; taken as a
        burn restarted, the sweep found a burn short when the round_end was merely late.)
        None when not that."""
        read, self._burn_read = self._burn_read, None
        shoe = self._shoe
        if read != (self.shoe, self.round, shoe.burned) or self.state != READY \
                or not shoe.burn_just_finished or shoe.burn_reason != "dealer_change":
            return None
        shoe.change_burn_optional = self.profile.burn.on_dealer_change
        return [Note("late_round_end", "round_end after the card taken as the dealer change's "
                     "burn: that card was the burn, or the round's (then the burn comes next)",
                     {"round": self.round})]

    def late_return(self, e: DiscardsReturned) -> list[Output] | None:
        """The last round's discards going back during the round whose bets closed before
        they did (``DISCARDS_NOT_RETURNED`` then; ``Shoe.return_owed``): taken, with a note —
        refused, those cards stayed out for good, and the next return was flagged again (a
        review: three deviations for one late return). None when ``e`` is not that."""
        shoe = self._shoe
        owed = shoe.return_owed
        if owed is None or self.state not in (ROUND, LAST_ROUND):
            return None
        expected, out_then, burned_then, extra_then = owed
        if e.count not in (expected, out_then):
            return None
        shoe.return_owed = None
        shoe.unsure_since_return = (False, False)  # (the rounds flagged before are these
        # cards': none of them covers the next return — a review)
        if e.count == expected:
            shoe.in_holder += out_then - expected  # (the burns the holder keeps)
        shoe.out_since_return -= out_then
        shoe.burned_since_return -= burned_then
        shoe.extra_since_return -= extra_then
        shoe.in_shoe = min(shoe.pack_size, shoe.in_shoe + e.count)
        shoe.seen.clear()  # (this round's cards are not told apart from those: none is
        # counted twice)
        return [Note("late_return", f"{e.count} card(s) of the last round went back into the "
                     "shuffler during this round (DISCARDS_NOT_RETURNED at its bets_closed)",
                     {"returned": e.count, "round": self.round})]

    def _on_discards_returned(self, e: DiscardsReturned, out: list[Output]) -> State | None:
        shoe = self._shoe
        owed, shoe.return_owed = shoe.return_owed, None
        out_now = shoe.out_since_return
        kept = shoe.kept_out(self.profile.shuffler.burns_returned)
        expected = shoe.to_return(self.profile.shuffler.burns_returned)
        # a card burned too many (BURN_COUNT already), or one read before the bets and set
        # aside (CARD_BEFORE_BETS_CLOSED already: _round_ended), stays with the burns where
        # they stay in the holder (001 BP §20δ(3)), or goes back as the round's card it may
        # have been
        extra = shoe.extra_since_return if not self.profile.shuffler.burns_returned else 0
        accepted: tuple[int, ...] = (expected, out_now, expected - extra)
        if shoe.early_tied and not self.profile.shuffler.burns_returned:
            accepted += (expected - extra - shoe.early_tied,)
        short, shoe.return_short = shoe.return_short, 0
        # a round the referee found short of a card (a draw the rule wanted: maybe drawn
        # unread) or a card too many (a draw where the rule stands: maybe one card read
        # twice) since the last return: a count one more, or one fewer, than read is those
        # cards' (the round's slip, flagged: a review's sweep, about 200 a shuffler
        # profile each way)
        unread, twice = shoe.unsure_since_return
        shoe.unsure_since_return = (False, False)
        matched = (e.count - 1 if unread and e.count - 1 in accepted else
                   e.count + 1 if twice and e.count + 1 in accepted else None)
        if matched is not None and e.count not in accepted:
            out.append(Note("return_count", f"{e.count} card(s) went back, {expected} read: "
                            "a card of a round flagged since (drawn unread, or read twice)",
                            {"returned": e.count, "read": expected}))
            shoe.returned_unread = int(matched < e.count)  # (read late, it is no new card)
            e = DiscardsReturned(count=matched, t=e.t)  # (the holder's share as read)
        missed = owed[0] if owed is not None else 0  # (the cards owed at the bets)
        if e.count not in accepted and missed and e.count + missed in accepted:
            # the last round's cards only: those of the round before, whose return was
            # missing at the bets (DISCARDS_NOT_RETURNED then), are not among them — that
            # slip, flagged, not a second (a review's independent dealer: one return not
            # made or not read was two deviations). They may go back with the next.
            out.append(Note("return_without_missed", f"{e.count} card(s) went back: the "
                            f"last round's; the {missed} of the round before, owed at the "
                            "bets (flagged then), were not among them", {
                                "returned": e.count, "owed": missed}))
            shoe.return_short = missed
        elif e.count not in accepted and not (short and e.count - short in accepted):
            # (the burns too: early, but no card lost; with the cards the last return left
            # out: late, but no card lost — a review: flagged again, two for one slip)
            held = f" ({kept} burned card(s) stay in the discard holder)" if kept else ""
            out.append(self._make(
                "DISCARDS_NOT_RETURNED",
                f"{e.count} card(s) went back into the shuffler; {expected} were out{held}",
                returned=e.count, outstanding=expected))
            if e.count < min(accepted):
                shoe.return_short = min(accepted) - e.count
        elif short and e.count not in accepted:
            out.append(Note("late_return", f"{short} card(s) the last return left out went "
                            "back with these", {"returned": e.count, "late": short}))
            e = DiscardsReturned(count=e.count - short, t=e.t)
        shoe.out_since_return = 0
        shoe.burned_since_return = 0
        shoe.extra_since_return = 0
        tied, shoe.early_tied = shoe.early_tied, 0
        shoe.seen.clear()
        if e.count == expected:
            shoe.in_holder += kept
        elif e.count == expected - extra:
            shoe.in_holder += kept + extra
        elif tied and e.count == expected - extra - tied:  # (kept aside: a review)
            shoe.in_holder += kept + extra + tied
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
        shoe = self._shoe
        if not n or (not shoe.active and not shoe.loaded):
            return None  # before the shoe's procedure began: the new dealer does it all
        if (not shoe.loaded or (self.state == BURN and shoe.burn_reason == "shoe")
                or (self.state == READY and shoe.rounds == 0 and shoe.burn_just_finished)):
            # from the shuffle to the shoe's first round: the start burn covers it, or the
            # change's card follows it (Shoe.change_burn_optional)
            shoe.change_burn_optional = n
            return None
        if self.state == READY:
            shoe.burn_just_finished = False
            self._start_burn(out, "dealer_change", "count", n)
            return BURN
        if self.state == BURN and shoe.burn_due is not None:
            shoe.burn_due += n
            return None
        shoe.change_burn_pending = n
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


#: a card's place in new-deck order by the token the referees write in a round note
#: (``str(card)``)
_DECK_INDEX: dict[str, int] = {str(card): card.deck_index for card in NEW_DECK}


def _hands_of(ended: Sequence[Output]) -> list[tuple[int, object]] | None:
    """The round's cards as (face, hand) in the order dealt, from the referee's round note
    (the shuffle screen's hand piles); None when the referee placed none.

    A token is looked up among the 52 the referees write; any other is parsed (a third
    of the time a card: this runs at every blackjack round's end)."""
    for o in ended:
        if isinstance(o, Note) and o.kind == "round":
            cards = o.data.get("cards") or ()
            try:
                return [(_DECK_INDEX[c["card"]], c.get("to")) for c in cards]
            except (KeyError, TypeError):  # a token written otherwise, or no card
                return _parsed_hands(cards)
    return None


def _parsed_hands(cards: Sequence[Any]) -> list[tuple[int, object]] | None:
    """:func:`_hands_of` with each token parsed as the card parser reads it; None when one
    is not a card."""
    try:
        return [(parse_card(str(c["card"])).deck_index, c.get("to")) for c in cards]
    except (KeyError, TypeError, ValueError):
        return None
