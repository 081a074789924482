"""Blackjack referee (000 §7, §12–15; 002 §3 2.6–2.7, 3.4–3.7, 4.4; 004 §3.10–3.16).

The engine hands the referee every card of a round (burns never reach it) and the
dealer's ``action`` records; the referee lays the cards out on the hands by the
profile's ``[blackjack]`` rules and flags what the rules forbid. docs/dealing-blackjack.md
is the full description; in short:

* ``bets_closed.boxes`` names the boxes in play, in dealing order. Without boxes the
  round is only recorded (the base :class:`~controller.rounds.CardLedger`).
* The initial deal: one card to each box, one to the dealer, a second to each box, and
  with ``dealer_hole_card`` the dealer's hole card. With ``peek = "ace"`` and an ace up,
  a dealer blackjack ends the round there. A card of the deal whose ``to`` names another
  hand still owed a card of it is laid there: ``DEAL_ORDER``, once a round.
* Then each card goes to the hand in play: the first hand, left to right (split hands in
  order), that is not finished. A hand finishes by itself at bust, at 21, after the one
  card of a double and after the one card on a split ace (``split_aces_one_card``: where
  the casino lets split aces draw, they play as any split hand); otherwise by ``stand``,
  ``surrender`` or ``decline``. When every hand is finished the cards are the dealer's,
  who draws to 16 and stands on 17 (soft 17 by ``dealer_stands_soft_17``).
* A card event's ``to`` ("box3", "box3.2", "dealer", "discard") says where the card went;
  it is checked against the rules: a card named to a finished hand is
  ``CARD_TO_FINISHED_HAND``; a card named to a later hand, or to the dealer, finishes the
  hands before it as if they had stood; a card named to a box with no bet is
  ``DEAL_ORDER``, and laid as a card with no ``to``.
* ``exposed`` cards are burned (000 §7, ``EXPOSED_CARD`` info); ``unrequested`` cards are
  offered to the next hands (``accept`` / ``decline``), then to the dealer until 17, and
  the rest are burned; a hand that declines is finished.

A card or action the rules forbid is flagged once, at the event, and the round goes on as
the table played it (a forbidden double still takes its one card), so one mistake is one
deviation. A card the rules forbid (to a finished hand, a dealer draw on 17 or more) is
recorded where it went but does not count in that hand's total.

Exactly one ``Note("round")`` per round, from :meth:`BlackjackReferee.end`.
"""

from __future__ import annotations

import re
from typing import Any

from mypy_extensions import mypyc_attr

from controller.cards import Card, blackjack_total
from controller.deviations import Deviation
from controller.events import DISCARD_NAMES, BetsClosed, CardDrawn
from controller.outputs import Note, Output, consequence
from controller.profiles import BlackjackRule, Profile
from controller.rounds import CardLedger, DeviationFactory, register_referee

DEALER = "dealer"
DISCARD = "discard"
_THE_DEALER = "the dealer"  # a hand's passed_by when a card named to the dealer finished it
_BOX = re.compile(r"^(?:box)?0*([1-9]\d*)(?:\.0*([1-9]\d*))?$")

# Greek §12 rules, used when a profile has no [blackjack] section (never for a valid one).
_DEFAULT_RULE = BlackjackRule(
    source="000 §12", dealer_hole_card=False, peek="none", dealer_stands_soft_17=True,
    max_splits=2, split_aces_max=1, split_second_cards="sequential",
    double="total-11-or-less", double_after_split=True, surrender="none")


def same_place(named: str, laid: str) -> bool | None:
    """Whether a card event's ``to`` (``named``, as recorded) names the box the round note
    laid the card in (``laid``: ``box3``, ``box3.2``, ``dealer``), read as the referee reads
    it: ``3``, ``box03`` and ``Box3`` are ``box3``. Split hands are not told apart: the note
    names them in playing order once the round is over, a resplit renumbering the hands
    after it, where the record named them as they were. None when ``named`` is no place
    (an unknown word, ``discard``): nothing to compare."""
    text = named.strip().lower()
    if text == DEALER or laid == DEALER:
        return text == laid
    m, n = _BOX.match(text), _BOX.match(laid)
    if m is None or n is None:
        return None
    return m.group(1) == n.group(1)


def _box_named(to: str | None) -> tuple[int, int | None] | None:
    """A card's ``to`` read as a box and, for a split hand, its place (``box3.2``: (3, 2);
    ``3``: (3, None)); None when it names no box (the dealer, the discard, a word)."""
    m = _BOX.match(to.strip().lower()) if to else None
    if m is None:
        return None
    return int(m.group(1)), (int(m.group(2)) if m.group(2) is not None else None)


def dealer_must_draw(cards: list[Card], stands_soft_17: bool = True) -> bool:
    """The dealer's rule (000 §12γ, 002 §3 4.4 ii, 004 §3.10): draw to 16, stand on 17 —
    an ace counts 11 whenever that makes 17–21; soft 17 draws only when the profile says."""
    total, soft = blackjack_total(cards)
    return total < 17 or (total == 17 and soft and not stands_soft_17)


def is_blackjack(cards: list[Card]) -> bool:
    """Two cards making 21: an ace and a ten-value card."""
    return len(cards) == 2 and blackjack_total(cards)[0] == 21


_DRAWN = frozenset({"hit", "double", "split"})  # a card a player's hand drew in play


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)  # (as CardLedger)
class _Box:
    def __init__(self, number: int) -> None:
        self.number = number
        self.hands: list[_Hand] = []
        self.splits = 0
        self.ace_splits = 0


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)  # (as CardLedger)
class _Rec:
    """One card of the round and where it ended up (a hand, the dealer, the discard)."""

    __slots__ = ("card", "hand", "why")

    def __init__(self, card: Card, hand: _Hand | None, why: str) -> None:
        self.card = card
        self.hand = hand  # None: the discard (or an offered card not yet placed)
        self.why = why


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)  # (as CardLedger)
class _Hand:
    def __init__(self, box: _Box | None) -> None:
        self.box = box  # None: the dealer
        self.recs: list[_Rec] = []  # the hand's cards (counted), in order
        #: cards laid on it but not counted (a card to a finished hand, a dealer's draw in
        #: error): kept apart, so that reading the hand costs its own cards, not a flood's —
        #: a reader sending thousands of cards in one round made each card cost them all
        self.voids: list[_Rec] = []
        self.from_split = False
        self.split_aces = False
        self.doubled_at: int | None = None  # cards held when the double was taken
        self.surrendered = False
        self.refused = False
        self.stood = False
        #: finished by a card named to a later hand or the dealer, no stand recorded
        self.passed_by: str | None = None
        #: HAND_CARD_MISSING raised already (another hand acted while it waited)
        self.card_missed = False
        #: its double came right after its third card, where the first two could double:
        #: if the hand is then passed without a fourth, that card was the double's
        self.late_double = False
        self.done = False

    @property
    def cards(self) -> list[Card]:
        return [r.card for r in self.recs]

    @property
    def void(self) -> list[Card]:
        return [r.card for r in self.voids]

    @property
    def total(self) -> int:
        return blackjack_total(self.cards)[0]

    @property
    def natural(self) -> bool:
        """A blackjack: the box's own first two cards; 21 after a split is not one."""
        return not self.from_split and is_blackjack(self.cards)

    @property
    def double_pending(self) -> bool:
        return self.doubled_at is not None and len(self.cards) <= self.doubled_at


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)  # (as CardLedger)
class BlackjackReferee(CardLedger):
    """Lays a blackjack round out on its hands and checks every card and action."""

    def __init__(self, profile: Profile, make: DeviationFactory) -> None:
        super().__init__(profile, make)
        self.rule = profile.blackjack or _DEFAULT_RULE
        self._clear()

    def _clear(self) -> None:
        self.active = False
        self.boxes: list[_Box] = []
        self.dealer = _Hand(None)
        self.recs: list[_Rec] = []
        self.slots: list[_Hand] = []
        self.slot_i = 0
        self.initial_done = False
        self.out_of_order = False  # DEAL_ORDER raised in this round's initial deal (once)
        #: a decision refused with the initial deal short (the later ones: notes)
        self.deal_short_flagged = False
        self.drew_early = False  # the dealer's draw before a player had decided (once)
        #: hands owed a card that a card named to the dealer went past, and that card: the
        #: verdict waits for the next step (:meth:`_owed_verdict`)
        self.owed_passed: list[tuple[_Hand, Card]] = []
        #: split aces holding another ace, closed by their box's next split hand's card
        #: while they could still be split: the table's decision may yet be recorded
        self.aces_undecided: _Hand | None = None
        #: the hands stood by the stands since one that may have been those aces'
        #: decision, in turn (:meth:`_aces_decided`)
        self.stand_chain: list[_Hand] | None = None
        self.peeked = False
        self.peeked_blackjack = False
        #: the codes raised by play after the peeked blackjack (each once a round)
        self.after_peek: set[str] = set()
        self.offers: list[_Rec] = []
        self.offer_from: _Hand | None = None
        #: the hand the last card drew for, while nothing else has happened since (a card
        #: that comes out unrequested after it is that player's: 000 §7)
        self.drawn_last: _Hand | None = None
        #: ``drawn_last`` as it was when the action being judged came (:meth:`_double`)
        self.drawn_before: _Hand | None = None
        #: the last card, if it came out face up and was burned while naming (``to``) the
        #: hand that was due: the next card shows whether it was (:meth:`_exposed_kept`)
        self.exposed_for: tuple[_Rec, _Hand, str] | None = None
        #: a split the table could have meant for either of two hands — split aces
        #: holding another ace (004 §3.13 allows them split again) and another box's
        #: pair — taken as the first's (:meth:`_split_other`): the hand split, the other,
        #: and the split hand's flags before it; the next card's ``to`` may say it was the
        #: other's (:meth:`_split_named`)
        self.split_either: tuple[_Hand, _Hand, bool, bool] | None = None
        #: the split aces :meth:`_aces_decided` passed over for the next hand's split
        self.aces_passed: _Hand | None = None
        #: split aces whose split again was refused and taken as not made: the next card
        #: may show it was (:meth:`_refused_split_made`)
        self.aces_refused: _Hand | None = None
        #: a double or surrender while split aces holding another ace wait for the table's
        #: decision (004 §3.13), which the next box could take: held for the next step
        #: (:meth:`_hold`)
        self.held: tuple[str, _Hand, _Hand] | None = None
        #: a held action the next step gave to the next box (:meth:`_release_held`): a
        #: ``stand`` when no hand is left to take it shows it was the aces' after all
        #: (:meth:`_released_was_the_aces`)
        self.released: tuple[str, _Hand, _Hand] | None = None
        #: a ``double`` read as recorded after its card by the hand that card finished
        #: (:meth:`_double_recorded_late`), and the hand in play that could not double:
        #: the next card's ``to`` may say it was the latter's (:meth:`_release_double`)
        self.held_double: tuple[_Hand, _Hand] | None = None

    # ------------------------------------------------------------------ the seam

    def begin(self, round_no: int, bets: BetsClosed) -> list[Output]:
        out = super().begin(round_no, bets)
        self._clear()
        numbers = list(dict.fromkeys(bets.boxes or ()))
        if not numbers:
            return out  # no boxes named: the round is only recorded
        self.active = True
        layout = self.profile.dealing.boxes
        beyond = [n for n in numbers if layout and n > layout]
        if beyond:
            out.append(self.make(
                "BOX_COUNT", f"round {round_no}: bets on box(es) "
                f"{', '.join(str(n) for n in beyond)}: the table has {layout} boxes",
                round=round_no, boxes=list(numbers), layout=layout))
        for n in numbers:
            box = _Box(n)
            box.hands.append(_Hand(box))
            self.boxes.append(box)
        first = [b.hands[0] for b in self.boxes]
        self.slots = [*first, self.dealer, *first]
        if self.rule.dealer_hole_card:
            self.slots.append(self.dealer)
        return out

    def card(self, event: CardDrawn) -> list[Output]:
        if not self.active:
            return super().card(event)
        if self.split_either is not None:
            self._split_named(event.to)
        if self.aces_refused is not None:
            self._refused_split_made(event.to)
        released = self.released
        if released is not None and not (released[0] == "double"
                                         and released[2].double_pending):
            self.released = None  # (a card other than the box's double's: play went on)
        out = self._release_held(event.to) if self.held is not None else []
        if self.held_double is not None:
            out += self._release_double(event.to)
        out += self._exposed_kept(event)
        out += self._card(event)
        last = self.recs[-1] if self.recs else None
        self.drawn_last = (last.hand if last is not None and last.why in _DRAWN
                           and not event.unrequested else None)
        return out

    def _card(self, event: CardDrawn) -> list[Output]:
        out: list[Output] = []
        card = event.card
        to = (event.to or "").strip().lower()
        if event.exposed and not event.unrequested:
            burn = self.profile.exposed_card.handling == "burn"
            out.append(self.make(
                "EXPOSED_CARD", f"{card} came out face up: "
                + ("burned, play continues" if burn else "used in the hand"),
                card=str(card), round=self.round_no,
                handling=self.profile.exposed_card.handling))
            if burn:
                rec = _Rec(card, None, "exposed")
                self.recs.append(rec)
                named = self._named(to) if to not in DISCARD_NAMES else None
                if named is not None and named is self._due():  # (the initial deal only)
                    self.exposed_for = (rec, named, to)
                elif named is self.dealer and self.initial_done:
                    # the dealer's own draw came out face up: the players were done, as a
                    # card named to the dealer says (a review: the open hand, its stand
                    # not recorded, took the replacement and the dealer "stood on 14")
                    self._stand_before(None)
                return out
        elif to in DISCARD_NAMES and not event.unrequested and self.initial_done:
            out.append(self.make(
                "EXPOSED_CARD", f"{card} went to the discard during the round: burned",
                card=str(card), round=self.round_no, handling="burn"))
            self.recs.append(_Rec(card, None, "exposed"))
            return out
        unbet = self._unbet_box(to) if to and self.boxes else None
        if unbet is not None:
            if not self.out_of_order:
                self.out_of_order = True
                out.append(self.make(
                    "DEAL_ORDER",
                    f"round {self.round_no}: {card} dealt to box{unbet}, which has no bet "
                    f"(bets on box(es) {', '.join(str(b.number) for b in self.boxes)}): "
                    "cards go to the boxes with a bet only",
                    round=self.round_no, card=str(card), to=f"box{unbet}",
                    boxes=[b.number for b in self.boxes]))
            to = ""  # then laid where the round puts it: a box named by a slip of the pen
            # would otherwise shift every card after it (2-13 deviations from one, a review)
        if not self.initial_done:
            out += self._initial(card, to)
        elif event.unrequested:
            self._unrequested(card)
        else:
            out += self._play_card(card, to)
        self._settle()
        return out

    def action(self, action: str) -> list[Output]:
        if not self.active:
            return []
        if self.held is not None:
            return self._release_held(None) + self.action(action)
        if self.held_double is not None:
            return self._release_double(None) + self.action(action)
        self.drawn_before, self.drawn_last = self.drawn_last, None
        self.exposed_for = None
        self.split_either = None  # (a decision since: the split stands as taken)
        self.aces_refused = None
        if action != "stand":
            self.released = None  # (only stands may follow: _released_was_the_aces)
        out: list[Output] = []
        if self._hole_due():  # a decision with only the hole card due: it was not dealt
            out += self._hole_skipped(f"a {action}")
        if not self.initial_done:
            # (the live hole card alone due ended the deal above: _hole_skipped)
            due = self.slots[self.slot_i] if self.slot_i < len(self.slots) else None
            what = "" if due is None else f": {self._name(due)}'s card of it is still due"
            dev = self._not_allowed(action, None, f"the initial deal is not complete{what}")
            # every decision after the first, with the deal still short, is the same slip
            # (a card of the deal not read): a note (a review's sweep: 2–3 a round)
            out.append(consequence(dev, dev.code) if self.deal_short_flagged else dev)
            self.deal_short_flagged = True
        elif action in ("accept", "decline"):
            out += self._offer_answer(action)
        else:
            hand = self._in_play()
            aces: _Hand | None = None  # a split ace holding another ace, not to be split
            while (hand is not None and self._ace_pending(hand)
                   and not self._resplit_open(hand)):
                hand.done = True  # no resplit possible: the action is the next hand's
                aces = aces or hand  # (a split there is that hand's pair: taking it for
                hand = self._in_play()  # the aces split again flagged correct days)
            while (hand is not None and action in ("stand", "double", "split", "surrender")
                   and ((hand.double_pending and action != "double")
                        or (hand.from_split and len(hand.cards) < 2
                            and self._other_box_next(hand)))
                   and self._next_open(hand) is not None):
                # a doubled hand decides nothing more: the action is the next hand's, and
                # the double's one card never came (a review: ACTION_NOT_ALLOWED on the
                # doubled hand, then HAND_CARD_MISSING, then the next hands shifted). With
                # no hand after it the action is its own, refused below. So for a split hand
                # still owed its second card, which decides nothing before it, when the hand
                # after it is another box's (a review: its card named to the finished hand
                # before it, every later box's action was refused on it, five in a row, and a
                # double lost); a stand between a box's own split hands is refused, as ever
                out += self._card_missed(hand)
                hand = self._in_play()
            if hand is None and not self.peeked_blackjack and any(
                    h.passed_by == _THE_DEALER for h in self._hands()):
                # the hands a card named to the dealer was taken to finish had not decided:
                # the dealer drew first (DEALER_DRAW_RULE, once), and they play on (a
                # review: every later box's action and card was refused, 5–14 a round)
                out += self._dealer_drew_early(f"its {action}")
                self._reopen_passed()
                hand = self._in_play()
            out += self._owed_verdict()
            hand = self._aces_decided(action, hand)
            if self._hold(action, hand):
                self._settle()
                return out
            if action == "double" and self._double_recorded_late(hand):
                late = self.drawn_before
                if late is not None and hand is not None and hand.box is not None:
                    # or the hand in play's, refused: the next card may name its box
                    # (_release_double)
                    self.held_double = (late, hand)
                    self._settle()
                    return out
                hand = self.drawn_before  # (its card made it 21 or more: finished)
            if (action == "split" and aces is not None
                    and (hand is None or len(hand.cards) != 2 or hand.double_pending)):
                # no hand after them could be split: the split was the aces' again (000 §14
                # "no new split", 002 §3 2.7), refused as it would be there, and named so;
                # the next card may show it made (:meth:`_refused_split_made`)
                assert aces.box is not None
                out.append(self._not_allowed("split", aces, self._split_limit(aces.box, True)))
                self.aces_refused = aces
            elif hand is None and action == "stand" and self.released is not None:
                out += self._released_was_the_aces()
            elif hand is None:
                if action != "stand":  # a stand with no hand in play changes nothing
                    why = ("the dealer's blackjack ended the round" if self.peeked_blackjack
                           else "every hand is finished")
                    out.append(self._after_peek(self._not_allowed(action, None, why)))
            elif action == "stand":
                out += self._stand(hand)
            elif action == "double":
                out += self._double(hand)
            elif action == "split":
                other = self._split_other(hand)
                flags = (hand.from_split, hand.split_aces)
                found = self._split(hand)
                out += found
                if other is not None and not found:
                    self.split_either = (hand, other, flags[0], flags[1])
            elif action == "surrender":
                out += self._surrender(hand)
        self._settle()
        return out

    def end(self) -> list[Output]:
        if self.active and self.held is not None:
            return self._release_held(None) + self.end()
        if self.active and self.held_double is not None:
            return self._release_double(None) + self.end()
        if not self.active:
            return super().end()
        out: list[Output] = []
        if self.initial_done:
            missing = self._cards_missing()
            for hand in self._hands():  # a hand still open at round_end stood
                if not hand.done:
                    hand.done = hand.stood = True
            self._settle()
            if not self.peeked_blackjack and self._must_draw():
                self._late_double_was_dealers()
            if (not self.peeked_blackjack and self._must_draw() and not self._moot()):
                total, soft = blackjack_total(self.dealer.cards)
                text = (f"the dealer stood on {'soft ' if soft else ''}{total}: the dealer "
                        "draws to 16 and stands on 17" + ("" if self.rule.dealer_stands_soft_17
                                                          else " (soft 17 draws)"))
                evidence: dict[str, Any] = {}
                if missing and len(self.dealer.cards) <= 1 + self.rule.dealer_hole_card:
                    # the round ended before the dealer's play and before these hands had
                    # their cards: one slip (an early round_end), one deviation
                    hands = [d.evidence["hand"] for d in missing]
                    text += (f"; the round ended before {', '.join(hands)} had "
                             + ("its card" if len(hands) == 1 else "their cards"))
                    evidence["hands_short"] = hands
                    missing = []
                out += missing
                out.append(self.make(
                    "DEALER_DRAW_RULE", text, round=self.round_no,
                    dealer=[str(c) for c in self.dealer.cards], total=total, soft=soft,
                    drew=False, **evidence))
            else:
                out += missing
        out.append(self._note())
        return out

    def dealing(self) -> bool:
        """The initial deal is not complete (the boxes named at the bets)."""
        return self.active and not self.initial_done

    def complete(self) -> bool:
        """No card is due, whatever the players do: every hand is finished (stood, bust, 21,
        its double's card, split aces closed) and the dealer stands — 17 or more on two
        cards or more (000 §7, 002 §3 4.4, 004 §3.10–3.16), or the peeked blackjack. Not
        known (False) while a card waits for its hand (an offer, a hand a card went past,
        split aces undecided), after the dealer drew in error, or when the dealer has not
        drawn though nothing depends on it (002 §3 4.4 iii lets the dealer stop: the
        table may still draw)."""
        if not self.active or not self.initial_done or self.offers or self.owed_passed \
                or self.aces_undecided is not None or self.dealer.voids:
            return False
        for hand in self._hands():
            if not hand.done:
                return False
        if self.peeked_blackjack:
            return True
        return len(self.dealer.cards) >= 2 and not self._must_draw()

    def _late_double_was_dealers(self) -> None:
        """The dealer stood short of 17, and the last hand to double did so right after its
        third card (``_Hand.late_double``) and took a fourth: read that double as written one
        card late — the third card was its one card, the fourth the dealer's next — when the
        dealer's cards then stand as the rule says (a review: a double recorded late on the
        last box, then the dealer's second card taken as the double's, DEALER_DRAW_RULE)."""
        dealer = self.dealer
        if dealer.voids or not dealer.recs:
            return
        for hand in reversed(self._hands()):
            if hand.late_double and hand.doubled_at == 3 and len(hand.recs) == 4:
                break
        else:
            return
        rec = hand.recs[3]
        dealt = 1 + self.rule.dealer_hole_card  # (the dealer's cards of the initial deal)
        if len(dealer.recs) < dealt:
            return
        cards = [*(r.card for r in dealer.recs[:dealt]), rec.card,
                 *(r.card for r in dealer.recs[dealt:])]
        if dealer_must_draw(cards, self.rule.dealer_stands_soft_17) or any(
                not dealer_must_draw(cards[:k], self.rule.dealer_stands_soft_17)
                for k in range(2, len(cards))):
            return  # (still short, or a draw past 17: not that reading)
        hand.recs.pop()
        hand.doubled_at = 2
        rec.hand = dealer
        rec.why = "dealer"
        dealer.recs.insert(dealt, rec)

    def _cards_missing(self) -> list[Deviation]:
        """At round_end, a hand the rules owed a card and never got it: a double's one card
        (000 §15, 002 §3 2.6, 004 §3.14) or a split hand's second card (000 §14, 002 §3
        2.7, 004 §3.13). Its stake was at risk on a hand the rules do not allow."""
        out = self._owed_verdict()
        if self.peeked_blackjack:  # (the round ended before the players played)
            return out
        for hand in self._hands():
            if hand.surrendered or hand.card_missed:
                continue
            if hand.double_pending or (hand.from_split and len(hand.cards) < 2):
                out += self._card_missed(hand, ended=True)
        return out

    def _next_open(self, hand: _Hand) -> _Hand | None:
        """The first unfinished hand after ``hand``."""
        hands = self._hands()
        return next((h for h in hands[hands.index(hand) + 1:] if not h.done), None)

    def _other_box_next(self, hand: _Hand) -> bool:
        """Whether the first open hand after ``hand`` is another box's."""
        after = self._next_open(hand)
        return after is not None and after.box is not hand.box

    def _card_missed(self, hand: _Hand, *, ended: bool = False,
                     by: str = "the next hand's action") -> list[Deviation]:
        """``HAND_CARD_MISSING`` for ``hand`` (once): at the round's end, or when the next
        hand acted (or a card went past it, ``by``) while it waited for its card. Not for
        a double recorded right after the hand's third card (``_Hand.late_double``): that
        card was the double's, written one card late — the double's ACTION_NOT_ALLOWED
        is the slip (a review: HAND_CARD_MISSING, CARD_TO_FINISHED_HAND as well)."""
        if hand.late_double and hand.doubled_at == 3 and len(hand.cards) == 3:
            hand.doubled_at = 2
            hand.done = True
            return []
        hand.done = hand.card_missed = True
        what = ("its double's one card" if hand.double_pending
                else "its second card after the split")
        name = self._name(hand)
        when = "ended" if ended else f"was passed by {by}"
        return [self.make(
            "HAND_CARD_MISSING", f"round {self.round_no}: {name} {when} without {what}",
            round=self.round_no, hand=name, cards=[str(c) for c in hand.cards],
            missing="double" if hand.double_pending else "split")]

    # ------------------------------------------------------------------ hands and names

    def _hands(self) -> list[_Hand]:
        return [h for b in self.boxes for h in b.hands]

    def _named(self, to: str) -> _Hand | None:
        """The hand (or the dealer) ``card.to`` names; None if absent or unknown."""
        hint = self._hint(to) if to else None
        return self.dealer if hint == DEALER else hint if isinstance(hint, _Hand) else None

    def _due(self) -> _Hand | None:
        """The next place of the initial deal (None once it is complete)."""
        done = self.initial_done or self.slot_i >= len(self.slots)
        return None if done else self.slots[self.slot_i]

    def _exposed_kept(self, event: CardDrawn) -> list[Output]:
        """A card of the initial deal came out face up naming the place that was due, and
        was burned (000 §7: "that card is burned … and play continues": the next card takes
        its place). If the next card names another place, the exposed card was not
        replaced: it was dealt into its hand. ``EXPOSED_CARD_KEPT`` once, and the card is
        laid there — read as burned, every card after it was one place off (a review: four
        unrelated deviations). A next card without ``to`` shows nothing: the burn stands.
        Only in the initial deal, whose order is fixed: in play a hand may be finished by
        a stand not recorded, split hands take their cards in either order, and a label may
        name the box or its hand (a review's false alarms when this ran in play too)."""
        kept, self.exposed_for = self.exposed_for, None
        if kept is None or event.exposed or event.unrequested:
            return []
        rec, hand, to = kept
        named = self._named((event.to or "").strip().lower())
        if named is None or named is hand or hand is not self._due():
            return []
        out: list[Output] = [self.make(
            "EXPOSED_CARD_KEPT", f"{rec.card} came out face up for {self._name(hand)} and "
            f"stayed there: the next card, {event.card}, went to {self._name(named)}; "
            "an exposed card is burned and the next card takes its place",
            card=str(rec.card), to=self._name(hand), next=str(event.card),
            round=self.round_no)]
        self.recs.remove(rec)
        out += self._initial(rec.card, to)
        self._settle()
        return out

    def _in_play(self) -> _Hand | None:
        """The hand actions apply to: the first hand not finished."""
        return next((h for h in self._hands() if not h.done), None)

    def _name(self, hand: _Hand | None) -> str:
        if hand is None:
            return DISCARD
        if hand.box is None:
            return DEALER
        box = hand.box
        if box.splits == 0 and len(box.hands) == 1:
            return f"box{box.number}"
        return f"box{box.number}.{box.hands.index(hand) + 1}"

    def _hint(self, text: str) -> _Hand | str | None:
        """``card.to`` (lower case) read as a hand or the dealer; None if absent or unknown."""
        if text == DEALER:
            return DEALER
        m = _BOX.match(text)
        if not m:
            return None
        box = next((b for b in self.boxes if b.number == int(m.group(1))), None)
        if box is None:
            return None
        if m.group(2) is None:  # the box: its first open hand, else its last hand
            return next((h for h in box.hands if not h.done and not self._ace_pending(h)),
                        box.hands[-1])
        i = int(m.group(2)) - 1
        return box.hands[i] if i < len(box.hands) else None

    def _unbet_box(self, text: str) -> int | None:
        """The box ``card.to`` names when it is none of the round's boxes (000 §12α, 002 §3
        3.4, 004 §3.10: one card to each box with a bet); None otherwise — a box in play,
        a hand of one (``box2.3``), the dealer, a name that is no box."""
        m = _BOX.match(text)
        if not m:
            return None
        number = int(m.group(1))
        return None if any(b.number == number for b in self.boxes) else number

    def _burns(self) -> bool:
        return self.profile.exposed_card.handling == "burn"

    def _ace_pending(self, hand: _Hand) -> bool:
        """A split ace holding its one card, another ace: finished for cards, but the table
        may still split it (judged by the split rules when it does)."""
        return (hand.box is not None and not hand.done and hand.split_aces
                and len(hand.cards) == 2 and all(c.rank == "A" for c in hand.cards))

    def _resplit_open(self, hand: _Hand) -> bool:
        """Whether an ace-pending hand may really be split again. Where it may not (000 §14:
        "if he then gets an ace again, no new split") it waits for nobody: a ``stand`` the
        dealer records belongs to the next hand."""
        r = self.rule
        assert hand.box is not None
        return hand.box.splits < r.max_splits and hand.box.ace_splits < r.split_aces_max

    # ------------------------------------------------------------------ cards

    def _put(self, hand: _Hand, card: Card, why: str) -> None:
        rec = _Rec(card, hand, why)
        self.recs.append(rec)
        hand.recs.append(rec)
        if hand.box is not None:
            self._after_card(hand)

    def _after_card(self, hand: _Hand) -> None:
        n = len(hand.cards)
        bust_or_21 = hand.total >= 21
        doubled = hand.doubled_at is not None and n > hand.doubled_at
        split_ace = hand.split_aces and n >= 2 and not self._ace_pending(hand)
        hand.done = hand.done or bust_or_21 or doubled or split_ace

    def _initial(self, card: Card, to: str = "") -> list[Output]:
        """A card of the initial deal: to the next place in its order (000 §12α, 002 §3
        3.4; PROCEDURES §4), unless the card names (``to``) another hand still owed a card
        of the deal — then it is ``DEAL_ORDER`` (once a round, warning) and the card is
        laid where the reader saw it go, so the round is judged as dealt, not shifted by
        one place from there on (a dealer who gives each box both cards before the dealer's
        one raised two or three game deviations a round)."""
        out: list[Output] = []
        hand = self.slots[self.slot_i]
        named = self._named(to)
        if named is not None and named.box is not None and self._hole_due():
            # only the dealer's hole card was due and the card went to a box: the hole card
            # was not dealt — the deal ends without it, the card is the box's
            out += self._hole_skipped(f"{card} dealt to {self._name(named)}", card=str(card),
                                      to=self._name(named))
            return out + self._play_card(card, to)
        if named is not None and named is not hand:
            later = next((j for j in range(self.slot_i + 1, len(self.slots))
                          if self.slots[j] is named), None)
            if later is not None:  # (a new list: a round judged both ways shares none)
                slots = list(self.slots)
                slots.insert(self.slot_i, slots.pop(later))
                self.slots = slots
                if not self.out_of_order:
                    self.out_of_order = True
                    out.append(self._deal_order(card, named, hand))
                hand = named
        self.slot_i += 1
        self._put(hand, card, "initial")
        if self.slot_i < len(self.slots):
            return out
        self.initial_done = True
        up = self.dealer.cards[0]
        if self.rule.dealer_hole_card and self.rule.peek == "ace" and up.rank == "A":
            self.peeked = True
            if is_blackjack(self.dealer.cards):
                self.peeked_blackjack = True
                self.dealer.done = True
                for h in self._hands():
                    h.done = True
        return out

    def _dealt_initial(self) -> list[str]:
        """The initial deal's cards so far (a ``DEAL_ORDER``'s evidence)."""
        return [str(r.card) for r in self.recs if r.why == "initial"]

    def _hole_due(self) -> bool:
        """Whether the initial deal waits for the live dealer's hole card alone."""
        return (not self.initial_done and self.rule.dealer_hole_card
                and self.slot_i == len(self.slots) - 1 and self.slots[-1] is self.dealer)

    def _hole_skipped(self, what: str, **evidence: Any) -> list[Output]:
        """The live dealer's hole card (002 §3 3.4) was due and play began instead — a card
        named to a box, a decision: it was not dealt. ``DEAL_ORDER`` (once a round), and the
        deal ends without it; the dealer's next card is a draw (a review: the box's card was
        read as the hole card, the slip named lines later as a draw on a total the table
        never had, or every decision refused as before the deal's end)."""
        self.slots = self.slots[:-1]
        self.initial_done = True
        if self.out_of_order:
            return []
        self.out_of_order = True
        dealt = self._dealt_initial()
        return [self.make(
            "DEAL_ORDER", f"round {self.round_no}: {what} where the dealer's hole card was "
            "due: it was not dealt, and the deal ends without it",
            round=self.round_no, expected=DEALER, position=len(dealt) + 1, deal=dealt,
            **evidence)]

    def _deal_order(self, card: Card, named: _Hand, expected: _Hand) -> Output:
        dealt = self._dealt_initial()
        return self.make(
            "DEAL_ORDER",
            f"round {self.round_no}: {card} dealt to {self._name(named)} as card "
            f"{len(dealt) + 1} of the initial deal, where {self._name(expected)} was due: "
            "one card to each box, then the dealer, then each box's second card"
            + (", then the dealer's hole card" if self.rule.dealer_hole_card else ""),
            round=self.round_no, card=str(card), to=self._name(named),
            expected=self._name(expected), position=len(dealt) + 1, deal=dealt)

    def _card_target(self, hint: _Hand | str | None = None) -> _Hand | None:
        """The hand the next card goes to (None: the dealer). ``hint``: the hand the card
        names, if any."""
        while True:
            hand = self._in_play()
            if hand is None:
                return None
            if self._ace_pending(hand):  # it had its one card: a card means no resplit
                hand.done = True
                if (isinstance(hint, _Hand) and hint.box is hand.box and hint.from_split
                        and len(hint.cards) == 1 and self._resplit_open(hand)):
                    # the box's next split hand's second card: dealt in turn (the aces
                    # not split again, nothing recorded for them) or both second cards
                    # first (004 §3.13) with the aces' decision still to come — the next
                    # stand or split may be theirs (:meth:`_aces_decided`)
                    self.aces_undecided = hand
                continue
            if self.rule.split_second_cards == "both-first" and hand.box is not None:
                waiting = [h for h in hand.box.hands if not h.done and len(h.cards) == 1]
                if waiting:
                    return waiting[0]
            return hand

    def _play_card(self, card: Card, to: str) -> list[Output]:
        hint = self._hint(to)
        target = self._card_target(hint)
        out: list[Output] = []
        if isinstance(hint, _Hand) and hint.passed_by == _THE_DEALER and hint.done:
            # a card named to a hand the dealer's card was taken to finish (its stand not
            # recorded): the player had not decided, the dealer drew first — one
            # DEALER_DRAW_RULE (000 §12γ, 004 §3.10), and the hand plays on (a review: its
            # every card was CARD_TO_FINISHED_HAND, 5–14 a round)
            out += self._dealer_drew_early("a card to it", hint)
            self._reopen_passed()
            target = self._card_target()
        out += self._owed_verdict()
        chain, self.stand_chain = self.stand_chain, None
        if (chain is not None and isinstance(hint, _Hand) and hint is chain[-1]
                and hint.stood and hint.done):
            # the first stand was the split aces' decision, each after it the hand's
            # before: this one plays on (:meth:`_aces_decided`)
            hint.done = hint.stood = False
            target = hint
        if isinstance(hint, _Hand) and hint is not target:
            if hint.done or self._ace_pending(hint):
                return out + self._to_finished(hint, card)
            if not (self.rule.split_second_cards == "either" and hint.from_split
                    and len(hint.cards) == 1 and self._split_undrawn_before(hint)):
                out += self._passed_owed(hint, card)
                self._stand_before(hint)
            target = hint
        elif hint == DEALER and target is not None:
            out += self._passed_owed(None, card)
            self._stand_before(None)
            target = None
        if target is None:
            return out + self._dealer_card(card)
        if target.double_pending:
            why = "double"
        elif target.from_split and len(target.cards) == 1:
            why = "split"
        else:
            why = "hit"
        self._put(target, card, why)
        return out

    def _passed_owed(self, hand: _Hand | None, card: Card) -> list[Output]:
        """A card named to ``hand`` (None: the dealer) went past another box's open hand
        still owed a card — a double's one card, a split hand's second: that card is missing,
        raised here, at the card that shows the dealer moved on (a review: named only at
        ``round_end``, lines later). A box's own split hands may take their cards in either
        order: not judged here."""
        out: list[Output] = []
        for h in self._hands():
            if h is hand:
                break
            if (not h.done and (hand is None or h.box is not hand.box)
                    and (h.double_pending or (h.from_split and len(h.cards) < 2))):
                if hand is None:
                    # the dealer's card: the dealer moved on without the hand's card, or
                    # drew before the players were done — the next step tells
                    # (:meth:`_owed_verdict`; a review: HAND_CARD_MISSING here, then the
                    # early draw, then the hand's own card refused, for one slip)
                    h.done = True
                    h.passed_by = _THE_DEALER
                    self.owed_passed.append((h, card))
                else:
                    out += self._card_missed(h, by=f"{card} to {self._name(hand)}")
        return out

    def _aces_decided(self, action: str, hand: _Hand | None) -> _Hand | None:
        """The hand ``action`` applies to, the first after split aces left undecided
        (:attr:`aces_undecided`: another ace drawn, then the box's next split hand's
        card). Read as dealt in turn — the aces not split again, nothing recorded for them
        (docs/events.md) — the action is ``hand``'s; but with both second cards dealt
        first (004 §3.13, split order "either") the table decides on the aces now: a
        ``split`` that ``hand`` cannot take is the aces', and a ``stand`` is taken as
        ``hand``'s, and each stand after it as the next hand's, until a card named to the
        last hand stood, or an action when every hand has stood, shows the first was the
        aces' (reviews: that card was CARD_TO_FINISHED_HAND, the action refused)."""
        aces, self.aces_undecided = self.aces_undecided, None
        chain = self.stand_chain
        if chain is not None:
            if action == "stand":
                if hand is not None:
                    chain.append(hand)
                return hand
            self.stand_chain = None
            if hand is None:  # every hand stood, yet one acts: the first stand was the
                # aces', each after it the hand's before — the last hand stood is open
                last = chain[-1]
                last.done = last.stood = False
                return last
            return hand
        if aces is None or hand is aces:
            return hand
        if action == "stand" and hand is not None:
            self.stand_chain = [hand]
        elif action == "split" and (hand is None or not self._splittable(hand)):
            aces.done = False
            return aces
        elif action == "split":
            self.aces_passed = aces  # (this hand's split, or the aces': _split_other)
        return hand

    def _split_other(self, hand: _Hand) -> _Hand | None:
        """The hand a ``split`` taken as ``hand``'s may have been meant for: split aces
        holding another ace that may be split again (004 §3.13) and another box's pair —
        the aces passed over for the pair (:meth:`_aces_decided`), or the pair after the
        aces in play. None when the split can only be ``hand``'s."""
        aces, self.aces_passed = self.aces_passed, None
        if aces is not None:
            return aces if aces.box is not hand.box and self._splittable(aces) else None
        if not self._ace_pending(hand) or not self._resplit_open(hand):
            return None
        after = self._next_open(hand)
        return (after if after is not None and after.box is not hand.box
                and self._splittable(after) else None)

    def _hold(self, action: str, hand: _Hand | None) -> bool:
        """Hold a ``double`` or ``surrender`` that split aces waiting for the table's
        decision (another ace on one, 004 §3.13: they may be split again) cannot take,
        where the next box may: whose it was, the next step says (:meth:`_release_held`).
        Refused on the aces, the next box's double on a correct day was a false alarm (a
        review's independent dealer); passed on, a double planted on the aces went through
        (the review before it)."""
        if action not in ("double", "surrender") or hand is None \
                or not self._ace_pending(hand) or not self._resplit_open(hand):
            return False
        other = self._next_open(hand)
        if other is None or other.box is hand.box or len(other.cards) != 2:
            return False
        if action == "double":
            allowed = not other.double_pending and not self._double_refused(other,
                                                                             other.cards)
        else:
            allowed = not self._surrender_refused(other)
        if allowed:
            self.held = (action, hand, other)
        return allowed

    def _release_held(self, to: str | None) -> list[Output]:
        """The step after a held action (:meth:`_hold`). Only a card that the next box's
        action explains, and the aces' would not, makes it that box's (the aces were not
        split again): a double's card named (``to``) to that box; after a surrender, a card
        named to a later box, or to the dealer when no hand is left after that box (a box
        that surrendered takes no card). Anything else — a card named to the aces or
        unnamed, another action, the round's end — leaves it the aces', refused there as
        before: a double or surrender planted on the aces looks the same as the next box's
        until a card names its place (reviews: released on weaker steps, planted slips on
        the aces went unflagged or became two)."""
        held, self.held = self.held, None
        if held is None:
            return []
        action, aces, other = held
        named = _box_named(to)
        numbers = [b.number for b in self.boxes]
        theirs = other.box.number if other.box is not None else -1
        if action == "double":
            the_box = named is not None and named[0] == theirs
        else:
            the_box = ((named is not None and named[0] in numbers and theirs in numbers
                        and numbers.index(named[0]) > numbers.index(theirs))
                       or ((to or "").strip().lower() == DEALER
                           and self._next_open(other) is None))
        if the_box:
            aces.done = True
            self.released = held
        hand = other if the_box else aces
        return self._double(hand) if action == "double" else self._surrender(hand)

    def _released_was_the_aces(self) -> list[Output]:
        """A ``stand`` with no hand left to take it, after a held double or surrender went
        to the next box (:meth:`_release_held`) and nothing but stands (and the double's
        card) since: read so, the stands are one too many — the action was the aces' (a
        planted double or surrender on them, the next boxes standing after it: a review
        found it unflagged). The box stood, not doubled or surrendered, and the action is
        refused on the aces, late. (A superfluous stand after any other step is no
        finding, as ever: docs/dealing-blackjack.md.)"""
        released, self.released = self.released, None
        if released is None:
            return []
        action, aces, other = released
        if action == "double":
            other.doubled_at = None
            other.late_double = False
        else:
            other.surrendered = False
        other.done = other.stood = True
        aces.done = False  # (_double and _surrender refuse a split ace waiting so)
        out = self._double(aces) if action == "double" else self._surrender(aces)
        aces.done = True
        return out

    def _refused_split_made(self, to: str | None) -> None:
        """The card after a split of aces again that the rules refuse (000 §14, 002 §3
        2.7), taken as not made: named (``to``) to the aces' hand or to a hand of their
        box that only the split would have made, it was made — refused (flagged then) and
        done, as a refused action is, so that each ace's card is not also a card to a
        finished hand and the dealer's draws misjudged (a review's independent dealer: 3
        deviations for one split). Unnamed, it stands as not made."""
        aces, self.aces_refused = self.aces_refused, None
        box = aces.box if aces is not None else None
        named = _box_named(to)
        if aces is None or box is None or named is None or named[1] is None \
                or named[0] != box.number or len(aces.recs) != 2:
            return
        i = named[1] - 1
        if i < len(box.hands) and box.hands[i] is not aces:
            return
        aces.done = False
        self._split(aces)  # (its refusal was raised with the split)

    def _split_named(self, to: str | None) -> None:
        """The card after a split that either of two hands may have made
        (:attr:`split_either`): named (``to``) to the other's box, the split was the
        other's — undone on the hand it was taken for (no card has come since) and made
        on the other (a review's independent dealer: split aces split again before the
        next box's pair, the pair's split taken, 5 deviations on a correct day). Unnamed,
        or named to the split hand's box, it stands."""
        either, self.split_either = self.split_either, None
        named = _box_named(to)
        if either is None or named is None:
            return
        hand, other, from_split, split_aces = either
        box, theirs = hand.box, other.box
        if box is None or theirs is None or named[0] != theirs.number:
            return
        at = box.hands.index(hand)
        new = box.hands[at + 1] if at + 1 < len(box.hands) else None
        if new is None or len(new.recs) != 1 or len(hand.recs) != 1:
            return
        second = new.recs[0]
        new.recs.clear()
        hand.recs.append(second)
        second.hand = hand
        box.hands.pop(at + 1)
        box.splits -= 1
        box.ace_splits -= int(hand.recs[0].card.rank == "A" == second.card.rank)
        hand.from_split, hand.split_aces = from_split, split_aces
        if self._ace_pending(hand):  # the aces were not split again: the pair was
            hand.done = True
        other.done = False
        self._split(other)

    def _splittable(self, hand: _Hand) -> bool:
        """Whether ``hand`` may be split (:meth:`_split` would take it unrefused)."""
        return (len(hand.cards) == 2 and not hand.double_pending and hand.box is not None
                and not self._split_refused(hand))

    def _owed_verdict(self) -> list[Deviation]:
        """The step after a card named to the dealer went past hands owed a card
        (:meth:`_passed_owed`), unless it was a card or an action of a hand the dealer's
        card passed (then the dealer drew early: :meth:`_dealer_drew_early`, and the hands
        play on): those hands' cards are missing, ``HAND_CARD_MISSING`` each."""
        out: list[Deviation] = []
        for h, card in self.owed_passed:
            if h.done and not h.card_missed:
                out += self._card_missed(h, by=f"{card} to {DEALER}")
        self.owed_passed = []
        return out

    def _split_undrawn_before(self, hint: _Hand) -> bool:
        """A split hand's second card named past open hands: both second cards first (split
        order "either") when every open hand it passes is a split hand of its box holding
        just its two cards; once one of them has drawn, the deal was in turn and they are
        finished (:meth:`_stand_before`). Hands already finished (a bust, 21, a stand) do
        not count: a resplit after the first hand played out is dealt both-first too (a
        review: after box1.1 busted, box1.2's resplit dealt both-first read as a stand)."""
        for h in self._hands():
            if h is hint:
                return True
            if (not h.done and len(h.cards) >= 2 and not h.double_pending
                    and (h.box is not hint.box or not h.from_split or len(h.cards) > 2)):
                return False
        return True

    def _dealer_drew_early(self, what: str, hand: _Hand | None = None) -> list[Output]:
        """A card named to the dealer finished the open hands (taken as standing: a stand
        not recorded reads the same), and ``what`` came after it for one of them (``hand``,
        else the first): its player had not decided when the dealer drew — 000 §12γ, 004
        §3.10, 002 §3 4.4: the dealer draws once every player is done (a review: the
        dealer's second card during the deal, the stands after it, was clean).
        ``DEALER_DRAW_RULE``, once a round; the caller opens those hands again."""
        if self.drew_early:
            return []
        hand = hand or next((h for h in self._hands() if h.passed_by == _THE_DEALER), None)
        if hand is None:
            return []
        self.drew_early = True
        name = self._name(hand)
        dev = self.make(
            "DEALER_DRAW_RULE", f"the dealer drew before {name} had decided: {what} came "
            "after the dealer's card (the dealer draws once every player is done)",
            round=self.round_no, hand=name, dealer=[str(c) for c in self.dealer.cards],
            drew=True, early=True)
        if self.dealer.voids:  # that card was flagged already, drawn on 17 or more: the
            # same card, the same slip (a review: two DEALER_DRAW_RULE for one card)
            return [consequence(dev, dev.code)]
        return [dev]

    def _reopen_passed(self) -> None:
        """Every hand a card named to the dealer was taken to finish is open again: the
        dealer drew before its player decided (:meth:`_dealer_drew_early`)."""
        for h in self._hands():
            if h.passed_by == _THE_DEALER:
                h.done = h.stood = False
                h.passed_by = None
        self.owed_passed = []

    def _stand_before(self, hand: _Hand | None) -> None:
        """A card named to ``hand`` (None: the dealer) finishes the open hands before it."""
        for h in self._hands():
            if h is hand:
                return
            if not h.done and len(h.cards) >= 2 and not h.double_pending:
                h.done = h.stood = True
                h.passed_by = self._name(hand) if hand is not None else _THE_DEALER

    def _to_finished(self, hand: _Hand, card: Card) -> list[Output]:
        if hand.refused:
            why = "it declined an offered card and may draw no more"
        elif hand.surrendered:
            why = "it surrendered"
        elif hand.total > 21:
            why = f"it is bust ({hand.total})"
        elif hand.total == 21:
            why = "it has 21"
        elif hand.doubled_at is not None:
            why = "it doubled and had its one card"
        elif hand.split_aces:
            why = "a split ace takes one card"
        elif self.peeked_blackjack:
            why = "the dealer's blackjack ended the round"
        elif hand.passed_by is not None:
            why = (f"no stand was recorded, but a card went to {hand.passed_by} before this "
                   "one, and it was taken as standing")
        else:
            why = "it stood"
        rec = _Rec(card, hand, "hit")
        self.recs.append(rec)
        hand.voids.append(rec)
        name = self._name(hand)
        dev = self.make(
            "CARD_TO_FINISHED_HAND", f"{card} to {name}, which is finished: {why}",
            card=str(card), hand=name, cards=[str(c) for c in hand.cards], total=hand.total,
            reason=why, round=self.round_no)
        return [self._after_peek(dev) if hand.box is not None else dev]

    def _after_peek(self, dev: Deviation) -> Output:
        """Play that went on after the dealer's peeked blackjack ended the round (002 §3
        3.7) is one slip: the first card dealt on is a deviation, and the first action;
        every later one of the round is its consequence (a review: one deviation a card)."""
        if not self.peeked_blackjack:
            return dev
        if dev.code in self.after_peek:
            return consequence(dev, dev.code)
        self.after_peek.add(dev.code)
        return dev

    def _must_draw(self) -> bool:
        return dealer_must_draw(self.dealer.cards, self.rule.dealer_stands_soft_17)

    def _dealer_card(self, card: Card) -> list[Output]:
        self._settle()
        if self._must_draw() and not self.peeked_blackjack:
            self._put(self.dealer, card, "dealer")
            return []
        total, soft = blackjack_total(self.dealer.cards)
        rec = _Rec(card, self.dealer, "dealer")
        self.recs.append(rec)
        self.dealer.voids.append(rec)
        if len(self.dealer.voids) > 1:  # drawing on after the first draw flagged: the same
            return []  # slip, once a round (as baccarat's DRAW_RULE); the cards are noted
        what = ("blackjack (the round ended at the peek)" if self.peeked_blackjack
                else f"{'soft ' if soft else ''}{total}")
        return [self.make(
            "DEALER_DRAW_RULE", f"the dealer drew {card} on {what}: the dealer stands on 17 "
            "or more", card=str(card), round=self.round_no,
            dealer=[str(c) for c in self.dealer.cards], total=total, soft=soft, drew=True)]

    def _moot(self) -> bool:
        """No hand's result can depend on the dealer drawing on (002 §3 4.4 iii): every hand
        is bust or surrendered, or a blackjack the dealer can no longer tie."""
        dealer = self.dealer.cards
        for hand in self._hands():
            if hand.surrendered or hand.total > 21:
                continue
            if hand.natural:
                if len(dealer) == 1 and dealer[0].pip in (1, 10):
                    return False
                continue
            return False
        return True

    # ------------------------------------------------------------------ offers (000 §7)

    def _unrequested(self, card: Card) -> None:
        """A card a player did not ask for (000 §7): offered to the players after that one,
        in turn. That player is the one the card before it went to — the two came out
        together, or the dealer misheard — even when that card finished the hand (a bust,
        21, a double's card), so that the offer starts with the next player, not the one
        after; when the card before it was not one a player drew (the initial deal's last
        card, an offered card, the dealer's, a burn), or an action came after it (the
        player stood: the dealer has moved on), the hand in play."""
        origin = self.drawn_last or self._in_play()
        rec = _Rec(card, None, "offered")
        self.recs.append(rec)
        if origin is None:  # no player left: the dealer's, until 17
            self._to_dealer_or_burn(rec)
            return
        if not self.offers:
            self.offer_from = origin
        self.offers.append(rec)

    def _offer_target(self) -> _Hand | None:
        hands = self._hands()
        start = hands.index(self.offer_from) + 1 if self.offer_from in hands else 0
        return next((h for h in hands[start:]
                     if not h.done and not self._ace_pending(h) and not h.double_pending),
                    None)

    def _offer_answer(self, action: str) -> list[Output]:
        target = self._offer_target() if self.offers else None
        if target is None:
            return [self._not_allowed(action, None, "no card is on offer")]
        if action == "accept":
            rec = self.offers.pop(0)
            rec.hand = target
            target.recs.append(rec)
            self._after_card(target)
            if target.done:
                self.offer_from = target
        else:
            target.refused = target.done = True
            self.offer_from = target
        return []

    def _to_dealer_or_burn(self, rec: _Rec) -> None:
        if self._must_draw() and not self.peeked_blackjack:
            rec.hand = self.dealer
            self.dealer.recs.append(rec)
        else:
            rec.hand = None

    def _settle(self) -> None:
        """Offered cards nobody can take any more go to the dealer until 17, the rest burn."""
        if self.offers and self._offer_target() is None:
            for rec in self.offers:
                self._to_dealer_or_burn(rec)
            self.offers = []

    # ------------------------------------------------------------------ actions

    def _not_allowed(self, action: str, hand: _Hand | None, why: str) -> Any:
        name = self._name(hand) if hand is not None else None
        text = f"{action}" + (f" on {name}" if name else "") + f" is not allowed: {why}"
        evidence: dict[str, Any] = {"action": action, "reason": why, "round": self.round_no}
        if hand is not None:
            evidence |= {"hand": name, "cards": [str(c) for c in hand.cards],
                         "total": hand.total}
        return self.make("ACTION_NOT_ALLOWED", text, **evidence)

    def _stand(self, hand: _Hand) -> list[Output]:
        if len(hand.cards) < 2:
            return [self._not_allowed("stand", hand, "a split hand gets its second card first")]
        if hand.double_pending:
            return [self._not_allowed("stand", hand, "a double takes one more card")]
        hand.done = hand.stood = True
        return []

    def _double(self, hand: _Hand) -> list[Output]:
        n = len(hand.cards)
        if n < 2 or hand.double_pending or self._ace_pending(hand):
            why = ("the hand has already doubled" if hand.double_pending
                   else "a split ace takes one card" if self._ace_pending(hand)
                   else "a split hand gets its second card first")
            return [self._not_allowed("double", hand, why)]
        why = ("this game has no double" if self.rule.double == "none"
               else "a double is only on the first two cards" if n != 2
               else self._double_refused(hand, hand.cards))
        if n == 3 and self.drawn_before is hand and self.rule.double != "none" \
                and not self._double_refused(hand, hand.cards[:2]):
            # a double on three cards, or the double of the first two recorded after its
            # one card (nothing else happened since): which, the next step says — a card to
            # this hand, or the next hand's action or card (_card_missed)
            hand.late_double = True
        hand.doubled_at = n
        return [self._not_allowed("double", hand, why)] if why else []

    def _double_recorded_late(self, in_play: _Hand | None) -> bool:
        """Is a ``double`` the one of the hand the last card went to, recorded after that
        card — its third, which made it 21 or more and so finished it — while the hand now in
        play could not double? (A review: the double went to the next box, refused there,
        and that box's own stand and card after it: three deviations.)"""
        late = self.drawn_before
        if late is None or late is in_play or late.box is None or len(late.cards) != 3 \
                or late.total < 21 or late.doubled_at is not None \
                or self.rule.double == "none" or self._double_refused(late, late.cards[:2]):
            return False
        return (in_play is None or len(in_play.cards) != 2 or in_play.double_pending
                or bool(self._double_refused(in_play, in_play.cards)))

    def _release_double(self, to: str | None) -> list[Output]:
        """The step after a ``double`` held by :meth:`action`: the hand the last card
        finished (21 or more on its third card), its double recorded after that card, or
        the hand in play, which cannot double (a total the rule refuses, or not two cards).
        A card named (``to``) to the box in play says it was that box's — refused there,
        the card its double's (a review's independent dealer: pinned on the hand before,
        the box's own split and the dealer's draw were refused after it, three deviations
        for one). Anything else leaves it the late double of the hand before, as before."""
        held, self.held_double = self.held_double, None
        if held is None:
            return []
        late, in_play = held
        named = _box_named(to)
        if named is not None and in_play.box is not None and named[0] == in_play.box.number \
                and (named[1] is None or (named[1] - 1 < len(in_play.box.hands)
                     and in_play.box.hands[named[1] - 1] is in_play)):
            return self._double(in_play)
        return self._double(late)

    def _double_refused(self, hand: _Hand, cards: list[Card]) -> str:
        """Why the profile refuses a double on ``cards`` (000 §15, 002 §3 2.6, 004 §3.14),
        the number of cards aside; "" when it allows it."""
        r = self.rule
        if r.double == "none":
            return "this game has no double"
        if hand.from_split and not r.double_after_split:
            return "no double after a split"
        total, soft = blackjack_total(cards)
        if r.double == "total-11-or-less" and total > 11 \
                and not (soft and r.double_ace == "one-or-eleven" and total - 10 <= 11):
            # (one-or-eleven: a soft hand's ace counted as 1, the player's choice)
            return f"the total is {'soft ' if soft else ''}{total}; a double needs 11 or less"
        return ""

    def _split(self, hand: _Hand) -> list[Output]:
        r = self.rule
        box = hand.box
        assert box is not None
        cards = hand.cards
        if len(cards) != 2 or hand.double_pending:
            why = ("the hand has doubled" if hand.double_pending
                   else "a split needs a hand of exactly two cards")
            return [self._not_allowed("split", hand, why)]
        aces = cards[0].rank == "A" and cards[1].rank == "A"
        why = self._split_refused(hand)
        first, second = hand.recs
        new = _Hand(box)
        hand.recs.remove(second)
        new.recs.append(second)
        second.hand = new
        for h in (hand, new):
            h.from_split = True
            # (a split ace takes one card where the profile says so: 000 §14, 004 §3.13;
            # 002 §3 2.7 leaves it to the casino — otherwise it plays as any split hand)
            h.split_aces = first.card.rank == "A" and r.split_aces_one_card
        box.hands.insert(box.hands.index(hand) + 1, new)
        box.splits += 1
        box.ace_splits += aces
        return [self._not_allowed("split", hand, why)] if why else []

    def _split_refused(self, hand: _Hand) -> str:
        """Why a hand of two cards may not be split (000 §14, 002 §3 2.7, 004 §3.13), or
        "": no split in the game, not a pair, or the box's splits used up."""
        cards = hand.cards
        assert hand.box is not None
        if self.rule.max_splits == 0:
            return "this game has no split"
        if cards[0].pip != cards[1].pip:
            return f"{cards[0]} and {cards[1]} are not of equal value"
        return self._split_limit(hand.box, cards[0].rank == "A" and cards[1].rank == "A")

    def _split_limit(self, box: _Box, aces: bool) -> str:
        """Why a box may split no more (000 §14, 002 §3 2.7, 004 §3.13), or ""."""
        r = self.rule
        if box.splits >= r.max_splits:
            return f"box {box.number} has split {box.splits} time(s), the most allowed"
        if aces and box.ace_splits >= r.split_aces_max:
            return f"aces may be split {r.split_aces_max} time(s) only"
        return ""

    def _surrender(self, hand: _Hand) -> list[Output]:
        if len(hand.cards) < 2:
            return [self._not_allowed("surrender", hand,
                                      "a split hand gets its second card first")]
        why = self._surrender_refused(hand)
        hand.surrendered = hand.done = True
        return [self._not_allowed("surrender", hand, why)] if why else []

    def _surrender_refused(self, hand: _Hand) -> str:
        """Why the profile refuses a surrender on a hand of two cards or more (004 §3.15:
        before the third card, not after a split or a double, not against an ace); ""
        when it allows it."""
        up = self.dealer.cards[0] if self.dealer.cards else None
        if self.rule.surrender == "none":
            return "this game has no surrender"
        if hand.from_split:
            return "no surrender after a split"
        if hand.doubled_at is not None:
            return "no surrender after a double"
        if len(hand.cards) != 2:
            return "surrender only before the third card"
        if up is not None and up.rank == "A":
            return "no surrender against the dealer's ace"
        return ""

    # ------------------------------------------------------------------ the round note

    def _outcome(self, hand: _Hand) -> str | None:
        if not self.initial_done:
            return None
        if hand.surrendered:
            return "surrender"
        total = hand.total
        dealer = self.dealer.cards
        dealer_bj = is_blackjack(dealer)
        dealer_total = blackjack_total(dealer)[0]
        if total > 21:
            return "lose"
        if hand.natural:
            return "push" if dealer_bj else "blackjack"
        if dealer_bj or total < dealer_total <= 21:
            return "lose"
        if dealer_total > 21 or total > dealer_total:
            return "win"
        return "push"

    def _note(self) -> Note:
        pays = {"blackjack": "3:2", "win": "1:1"}
        hands: list[dict[str, Any]] = []
        parts: list[str] = []
        for hand in self._hands():
            total, soft = blackjack_total(hand.cards)
            outcome = self._outcome(hand)
            entry: dict[str, Any] = {
                "hand": self._name(hand), "box": hand.box.number if hand.box else None,
                "cards": [str(c) for c in hand.cards], "total": total, "soft": soft,
                "blackjack": hand.natural, "bust": total > 21,
                "doubled": hand.doubled_at is not None, "split": hand.from_split,
                "surrendered": hand.surrendered, "refused": hand.refused,
                "stake": 2 if hand.doubled_at is not None else 1,
                "outcome": outcome, "pays": pays.get(outcome or ""),
            }
            if hand.void:
                entry["void"] = [str(c) for c in hand.void]
            hands.append(entry)
            label = "blackjack" if hand.natural else ("bust" if total > 21 else str(total))
            parts.append(f"{entry['hand']} {label} {outcome or '-'}")
        d_total, d_soft = blackjack_total(self.dealer.cards)
        dealer: dict[str, Any] = {
            "cards": [str(c) for c in self.dealer.cards], "total": d_total, "soft": d_soft,
            "blackjack": is_blackjack(self.dealer.cards), "bust": d_total > 21,
            "peeked": self.peeked,
        }
        if self.dealer.void:
            dealer["void"] = [str(c) for c in self.dealer.void]
        up = self.dealer.cards[0] if self.dealer.cards else None
        insurance = None
        if up is not None and up.rank == "A" and self.initial_done:
            insurance = "pays 2:1" if dealer["blackjack"] else "loses"
        data: dict[str, Any] = {
            "round": self.round_no,
            "boxes": [b.number for b in self.boxes],
            "complete": self.initial_done,
            "hands": hands,
            "dealer": dealer,
            "insurance": insurance,
            "cards": [{"card": str(r.card), "to": self._name(r.hand), "why": r.why}
                      for r in self.recs],
        }
        d_label = "blackjack" if dealer["blackjack"] else ("bust" if d_total > 21
                                                           else str(d_total))
        text = f"round {self.round_no}: " + "; ".join(parts) + f"; dealer {d_label}"
        if not self.initial_done:
            text += " (initial deal not complete: not judged)"
        return Note("round", text, data)


register_referee("blackjack", BlackjackReferee)
