"""The shuffle screen the engine holds: fed every card read, every round end and every
shoe boundary; reports a :class:`Finding` the moment a test crosses its threshold.

The tests (docs/shuffle-screening.md): the **run** test and the **continuation** test
against new-deck order; the **run** test and the **packet** test
(:mod:`controller.screening.packets`) against the previous shoe's discards; the
**shelf** test, where a profile asks for it.
One finding per shoe at most (one slip, one deviation). What runs is the profile's
``[shuffle_screen]`` (:class:`ScreenSettings`).

Speed: the screen must cost the engine little per card. The engine appends a card to
the pending batch; a batch is judged in one pass with the statistics in local variables
(:meth:`ShuffleScreen._judge_batch`), each card in turn — the statistics and their
threshold tests are those of the card-by-card reference path
(:meth:`ShuffleScreen._judge_exact`), so the decisions are the same. The common card costs
a comparison (it continues none of the last cards: ``until[face] < position``), a look-up
of the discards' piles holding its face and a few stores; the exact chances (sums of
per-face counts) are computed only when they can change a statistic — after a
continuation, or while a run's evidence is above zero. A break that cannot raise a
statistic is not priced: for the run test the CUSUM stays at 0 whatever its chance; for
the continuation test it adds ``-ln(1 - p) ≥ 0`` to the log-likelihood ratio, so leaving
it out keeps the statistic *below* the exact martingale — the false-alarm bound holds,
and the power lost is a fraction of a nat per break.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from itertools import repeat
from operator import add, mul
from typing import Final

from mypy_extensions import mypyc_attr

from controller.cards import Card
from controller.screening.evidence import (
    CONTINUATION,
    PACKET,
    RUN,
    SHELF,
    Finding,
    ScreenTest,
    finding_for,
)
from controller.screening.faces import FACES
from controller.screening.packets import PacketTest
from controller.screening.reference import (
    HAND_ORDERS,
    NEW_DECK,
    PREVIOUS_SHOE,
    Reference,
    new_deck_reference,
    ordered_reference,
    pile_reference,
    piles_beside,
)
from controller.screening.sequential import (
    RUN_Q,
    Thresholds,
    beta_tables,
    log_table,
    shelf_tables,
    window_for,
)
from controller.screening.settings import (
    BATCH,
    EARLY_CARDS,
    FIRST_BATCH,
    WARM_BATCH,
    ScreenSettings,
)

_LQ = math.log(RUN_Q)
_L1Q = math.log(1 - RUN_Q)
PILE_Q = (0.05, 0.8, 0.15)
"""The previous-shoe run test's alternative: in a slug the next card lies in the run's
pile 8 times in 10, in the next pile (the run crossing rounds) 15 in 100, elsewhere
5 in 100 (the slug's ends)."""
_LP0, _LP1, _LP2 = (math.log(q) for q in PILE_Q)
_NEIGHBOURS: Final = tuple(((f - 1) % FACES, (f + 1) % FACES) for f in range(FACES))
_NEAR: Final = tuple(1 << a | 1 << b for a, b in _NEIGHBOURS)
"""Per face, its two neighbours in new-deck order as a 52-bit face set."""
_DECK = new_deck_reference()
_DECK_WINDOW = window_for(_DECK.lag_one_chance())
assert _DECK_WINDOW == 5, "the batch path looks back over five cards"


def count_in(faces: int, counts: list[int]) -> int:
    """The cards still to come (``counts`` per face) of the faces of a 52-bit face set:
    a sum of integers, exact in any order. (Sets of faces are 52-bit integers, not
    ``set``s: compiled, their operations are machine instructions.)"""
    k = 0
    while faces:
        low = faces & -faces
        k += counts[low.bit_length() - 1]
        faces ^= low
    return k


def faces_from(shoe_faces: list[int], start: int, stop: int) -> int:
    """The faces of ``shoe_faces[start:stop]`` as a 52-bit face set."""
    got = 0
    for i in range(start, stop):
        got |= 1 << shoe_faces[i]
    return got


def near_from(shoe_faces: list[int], start: int, stop: int) -> int:
    """The neighbours (new-deck order) of the faces of ``shoe_faces[start:stop]``, as a
    52-bit face set."""
    got = 0
    for i in range(start, stop):
        got |= _NEAR[shoe_faces[i]]
    return got


# compiled (controller/native.py): pickled and copied as in Python (engine snapshots);
# allow_interpreted_subclasses works round mypyc 2.4, whose serializable classes skip
# their __init__ when made from Python code
@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class ShuffleScreen:
    """Sequential shuffle screening for one table (see the module docstring).

    ``exact=True`` judges every card by the reference path (:meth:`_judge_exact`, a Python
    step per card) instead of the batch path (:meth:`_judge_batch`); both decide the same
    (tests/test_shuffle_screen.py holds them side by side). The screen takes the reference
    path on its own for the rest of a shoe in which a card the pack does not hold was read.
    """

    def __init__(self, settings: ScreenSettings, decks: int, *, exact: bool = False) -> None:
        self.settings = settings
        self._always_exact = exact
        self._piles: list[list[int]] = []  # this shoe's discards, one pile per round
        self._previous: Reference | None = None
        self._deck = _DECK
        self._shoe = 0
        self._active = False
        self._alarmed = False
        self._faces: list[int] = []
        #: the cards not judged yet (their faces, ``Card.deck_index``), and how many make a
        #: batch: :meth:`card` appends to ``pending`` and judges them when it holds ``due``
        #: (the engine does the same in line, without the call: a tenth of the screen's
        #: cost per card)
        self.pending: list[int] = []
        self._ends: list[int] = []  # where in them a round ended (its pile closes there)
        #: per round end in ``_ends``, the round's cards as (face, hand) when its pile is
        #: to be split into hands (``hand_piles``), else None
        self._hands: list[Sequence[tuple[int, object]] | None] = []
        self.due = BATCH
        self._pile_wanted = settings.enabled and settings.previous_shoe and (
            settings.run_test or settings.packet_test)
        self._hand_piles = self._pile_wanted and settings.hand_piles
        #: the piles of this shoe's discards that are a hand's (the rest: a round's, burns)
        self._hand_piles_at: set[int] = set()
        #: the last shoe's discards with each hand's cards in order (HAND_ORDERS)
        self._ordered: dict[str, Reference] = {}
        #: the packet tests, one per hand order followed, and the reference of each
        self._packets: list[PacketTest] = []
        self._packet_refs: list[Reference] = []
        self._packet_extra = 0.0  # ln of how many: each takes that share of the test's α
        self._set_decks(decks)

    def _set_decks(self, decks: int) -> None:
        self.decks = decks
        pack = decks * FACES
        self._pack = pack
        self._ln = log_table(pack)
        self._ga, self._gb, self._gab, self._lb0 = beta_tables(pack)
        self.thresholds = Thresholds(1 / self.settings.false_alarm_one_in,
                                     max(1, self.settings.tests), pack)
        self._h_run = self.thresholds.run
        self._h_cont = self.thresholds.continuation

    # ------------------------------------------------------------------ the engine's calls

    def deck_check(self, source: str = "composition check") -> None:
        """The pack was counted: it lies in new-deck order; the previous shoe's order is
        gone."""
        self._forget_discards()
        self._deck = new_deck_reference(source)

    def _forget_discards(self) -> None:
        """No previous shoe to hold the next against (a counted pack, another deck count)."""
        self._previous = None
        self._ordered = {}
        self._piles = []
        self._hand_piles_at = set()

    def start_shoe(self, shoe: int, decks: int | None = None) -> None:
        """A new shoe (shuffle cycle) starts: the last shoe's discards become a reference."""
        if self.pending:  # read but never judged: still discards
            self._active = False
            self.flush()
        if decks is not None and decks != self.decks:
            self._set_decks(decks)
            self._forget_discards()
        elif self._piles and self._shoe and self._pile_wanted:
            self._previous = pile_reference(self._piles, self._pack, self._shoe,
                                            "hand" if self._hand_piles else "round")
            self._ordered = {
                order: ordered_reference(self._piles, self._hand_piles_at, order, self._pack,
                                         self._shoe)
                for order in HAND_ORDERS[self.settings.hand_order] if order != "pile"
            } if self._hand_piles and self.settings.packet_test else {}
        self._shoe = shoe
        self._piles = [[]]
        self._hand_piles_at = set()
        self._faces = []
        self.pending = []
        self._ends = []
        self._hands = []
        self._alarmed = False
        self._active = self.settings.enabled
        self.due = FIRST_BATCH
        s = self.settings
        self._deck_run = s.run_test
        self._deck_cont = s.continuation_test
        self._pile = (self._previous if s.previous_shoe and s.run_test else None)
        self._sides: dict[int, tuple[int, int, int, int]] = {}
        self._counts = [self.decks] * FACES
        #: per pile of the discards, the most cards still to come with a face of it or of
        #: the piles beside it (decks × their cards)
        self._around: tuple[int, ...] = ()
        if self._pile is not None:
            sizes = [0, *map(len, self._pile.piles), 0]
            self._around = tuple(map(mul, map(add, map(add, sizes, sizes[1:]), sizes[2:]),
                                     repeat(self.decks)))
        # per face: the last position at which a card of it continues one of the last
        # _DECK_WINDOW cards (a neighbour of it was dealt within the window)
        self._until = [-FACES * 64] * FACES
        self._exact = False
        self._value = 0.0  # the continuation test's statistic at its last continuation
        # the shelf test (its own pass over a batch, the same in both paths): its
        # statistic, the filter's state, the last card's face (-1: none yet), the cards
        # still to come (all, and per face)
        self._shelf_on = s.enabled and s.shelf_test
        self._shelf_state = (0.0, shelf_tables()[2], -1, self.decks * FACES)
        self._shelf_counts = [self.decks] * FACES
        # the packet test (its own pass, like the shelf test's) against the discards: one
        # per hand order followed, each at the test's threshold + ln(how many)
        self._packets, self._packet_refs, self._packet_extra = [], [], 0.0
        if s.enabled and s.packet_test and s.previous_shoe and self._previous is not None:
            orders = HAND_ORDERS[s.hand_order] if self._hand_piles else ("pile",)
            self._packet_refs = [self._previous if o == "pile" else self._ordered[o]
                                 for o in orders]
            self._packets = [PacketTest(r.piles_of, r.pile_faces52, self.decks,
                                        s.packet_predictor, s.packet_stop or None)
                             for r in self._packet_refs]
            self._packet_extra = math.log(len(orders))
        if self._always_exact:
            self._begin_exact()
        # the batch path's statistics, one tuple (loaded and stored once per batch;
        # _counts holds the cards still to come per face, _until the continuations):
        # total — all the cards still to come;
        # w, w_start — new-deck run test (CUSUM) and where its run began;
        # hits, misses, null_log — new-deck continuation test (misses starts at -1: the
        # shoe's first card continues nothing and is not counted);
        # pw, pw_start — previous-shoe run test; narrow, piles — the piles the run through
        # the last card can lie in (narrow 0: the last card broke the run; 1: one card in
        # them; 2: two or more); p_from — the position where the run entered those piles
        # (the cards since are spent from them); quiet — the last card the new-deck run
        # test judged (a run starts after a card it did not)
        self._state = (self.decks * FACES, 0.0, 2, 0, -1, 0.0, 0.0, 2, 0, 0, 1, 0)

    def end_shoe(self) -> Finding | None:
        """The shoe is over (last hand played, cards withdrawn, table closing): the cards
        not judged yet are judged; nothing more is dealt from it (its discards stay the
        reference for the next)."""
        finding = self.flush() if self.pending else None
        self._active = False
        return finding

    def card(self, card: Card) -> Finding | None:
        """A card left the shoe (burns included). Returns a finding when a test fires.

        A card costs the engine an append: the cards are judged in batches — the first
        :data:`FIRST_BATCH` cards of a shoe, then every ``early_batch`` cards up to the
        shoe's :data:`EARLY_CARDS`-th card and every :data:`BATCH` cards after it, or every
        :data:`WARM_BATCH` cards while a test's evidence is at least half way to its
        threshold (a fair shuffle seldom gets there; a bad one crosses a few cards later),
        and at the shoe's end. A finding names the card where its test crossed the
        threshold; it is returned with the card that completed the batch
        (``raised_at``)."""
        pending = self.pending
        pending.append(card.deck_index)
        if len(pending) >= self.due:
            return self.flush()
        return None

    def round_end(self, hands: Sequence[tuple[int, object]] | None = None) -> None:
        """The round's cards were collected: they form one pile of the discards (marked in
        the cards waiting to be judged; the pile closes when they are).

        ``hands``: the round's cards as (face, hand) in the order dealt, as the referee
        placed them. With ``hand_piles`` the round's pile is then split into one pile per
        hand, each hand's cards in the order dealt, and the cards before them (burns) a
        pile of their own. The dealer collects hand by hand, one on another, so that the
        hands can be laid out again, right to left: the dealer's own cards first, then the
        players' in the reverse of the dealing direction (002 §3 3.6, §2 3.6.1) — so the
        hands lie in the reverse of the order they were first dealt to. When the faces do
        not end the round's pile as the referee lists them, the round stays one pile."""
        split = hands if hands and self._hand_piles else None
        pending = self.pending
        if pending:
            ends = self._ends
            if not ends or ends[-1] != len(pending):
                ends.append(len(pending))
                self._hands.append(split)
        elif self._piles and self._piles[-1]:
            if split:
                self._split_last(split)
            self._piles.append([])

    def _split_last(self, hands: Sequence[tuple[int, object]]) -> None:
        """The last pile (a round's) as its hands' piles (see :meth:`round_end`).

        Written for the compiler: lists read at C indexes, a hand's pile found among the
        few by equality, not a dictionary (mypyc's ``setdefault`` helper and the generic
        reads of a Sequence: about 200 instructions a blackjack card more; a round's
        lists, a pile a hand, are most of what is left)."""
        piles = self._piles
        pile = piles[-1]
        listed: list[tuple[int, object]] = hands if isinstance(hands, list) else list(hands)
        k = len(listed)
        before = len(pile) - k
        if before < 0:
            return
        for j in range(k):
            if pile[before + j] != listed[j][0]:
                return
        names: list[object] = []  # each hand once, in the order first dealt to
        cards: list[list[int]] = []
        for j in range(k):
            f, hand = listed[j]
            for h in range(len(names)):
                if names[h] == hand:
                    cards[h].append(f)
                    break
            else:
                names.append(hand)
                cards.append([f])
        piles.pop()
        if before:
            piles.append(pile[:before])
        at = len(piles)  # where the hands' piles begin
        for h in range(len(cards) - 1, -1, -1):
            piles.append(cards[h])
        hand_piles = self._hand_piles_at
        for i in range(at, len(piles)):
            hand_piles.add(i)

    def flush(self) -> Finding | None:
        """Judge the cards dealt since the last batch (their faces join this shoe's piles
        first: the discards the next shoe is held against)."""
        faces = self.pending
        self.pending = []
        piles = self._piles
        if not piles:
            self._ends = []
            self._hands = []
            return None
        if -1 in faces:  # not a card of the notation (parse_card lets none through)
            faces = [f for f in faces if f >= 0]
        ends = self._ends
        current = piles[-1]
        if ends:
            hands = self._hands
            self._ends = []
            self._hands = []
            at = 0
            for end, split in zip(ends, hands, strict=True):
                current.extend(faces[at:end])
                at = end
                if current:  # a round ended: its pile is closed
                    if split:
                        self._split_last(split)
                    current = []
                    piles.append(current)
            current.extend(faces[at:])
        else:
            current.extend(faces)
        if not self._active or self._alarmed:
            self.due = BATCH
            return None
        shoe_faces = self._faces
        base = len(shoe_faces)
        shoe_faces.extend(faces)
        read = base + len(faces)
        shelf = self._shelf_pass(faces, base) if self._shelf_on else None
        packets = self._packet_pass(faces, base) if self._packets else None
        finding = (self._judge_exact(faces, base) if self._exact
                   else self._judge_batch(faces, base))
        if shelf is not None and (finding is None or shelf[0] < finding.position):
            finding = self._finding(self._deck, SHELF, shelf[1], self._h_cont, 1, 1, shelf[0])
        if packets is not None and (finding is None or packets[0] < finding.position):
            finding = self._finding(self._packet_refs[packets[2]], PACKET, packets[1],
                                    self._h_cont + self._packet_extra, 1, 1, packets[0])
        if finding is not None:
            self._alarmed = True
            return dataclasses.replace(finding, raised_at=read)
        self.due = (WARM_BATCH if self._warm() else
                    self.settings.early_batch if read < EARLY_CARDS else BATCH)
        return None

    def _warm(self) -> bool:
        """Is a test's evidence at least half way to its threshold (the continuation
        test: as of its last continuation, an upper bound since)?"""
        if self._exact:
            w, pw = self._exact_state[3], self._exact_state[8]
        else:
            w, pw = self._state[1], self._state[6]
        top = max(self._value, self._shelf_state[0])
        packets = -math.inf if self._packets else 0.0  # (the packet tests' highest product)
        for p in self._packets:
            for v in p.logs:
                packets = max(packets, v)
        return 2 * max(w, pw) >= self._h_run or 2 * max(top, packets) >= self._h_cont

    # ------------------------------------------------------------------ the batch path

    def _judge_batch(self, faces: list[int], base: int) -> Finding | None:
        """Judge a batch: the statistics, their order and every threshold test of
        :meth:`_judge_exact`, card by card — the same decisions at the same cards — with
        the work a card does not need left out (docs/shuffle-screening.md, "Cost"):

        - nothing is kept per card that can be told when it is needed: the cards still to
          come (the batch's start less the cards since), the card before (the shoe's
          faces), where the run test's run began (after the last card that was not
          judged), the continuation test's breaks (the cards that continued nothing, counted
          at the batch's end);
        - the discards run test does not price a card that cannot raise its evidence
          from zero: one that lies in none of the run's piles nor beside them, while its
          chance of doing so is at least 1 in 10 (its increment ``ln(0.05/chance)`` is
          then below zero, so the CUSUM stays at zero either way);
        - a card the pack does not hold is not looked for card by card: the counts of the
          batch are checked at its end (and before a finding), and such a shoe is judged
          again by :meth:`_judge_exact`, which skips the card."""
        (total, w, w_start, hits, misses, null_log, pw, pw_start, narrow, p_piles, p_from,
         quiet) = self._state
        counts, until, ln = self._counts, self._until, self._ln
        shoe_faces = self._faces
        deck_run, deck_cont = self._deck_run, self._deck_cont
        h_run, h_cont = self._h_run, self._h_cont
        ga, gb, gab, lb0 = self._ga, self._gb, self._gab, self._lb0
        value = self._value
        pile = self._pile
        piles_of = pile.piles_of if pile is not None else None
        pile_ref: Reference = pile if pile is not None else self._deck
        sides_of = self._sides
        around = self._around
        decks = self.decks
        neighbours = _NEIGHBOURS
        window = _DECK_WINDOW
        cand = 0  # cards that continue one of the last five (judged by the continuation test)
        left = total + base + 1  # the cards still to come before card pos: left - pos
        breaks = misses - base - 1  # the continuation test's breaks before card pos:
        # breaks + pos - cand
        pos = base
        negative = False  # (a card the pack does not hold: its count went below zero)
        for j in range(len(faces)):
            f = faces[j]
            pos = base + 1 + j
            if until[f] >= pos or w > 0.0:
                n = left - pos
                if deck_run:
                    if w <= 0.0 and quiet != pos - 1:
                        w_start = pos  # the card before was not judged: the run starts here
                    a, b = neighbours[shoe_faces[pos - 2]]
                    if f in (a, b):
                        k = counts[a] + counts[b]
                        if 0 < k < n:
                            w += _LQ - ln[k] + ln[n]
                            if w >= h_run:
                                return self._crossed(self._deck, RUN, w, h_run, w_start, 1, pos)
                    elif w > 0.0:
                        k = counts[a] + counts[b]
                        if 0 < k < n:
                            w += _L1Q - ln[n - k] + ln[n]
                            if w <= 0.0:
                                w = 0.0
                                w_start = pos + 1
                    else:
                        w_start = pos + 1
                    quiet = pos
                if deck_cont and until[f] >= pos:
                    k = count_in(near_from(shoe_faces, pos - 6 if pos > 5 else 0, pos - 1),
                                 counts)
                    if 0 < k < n:
                        hits += 1
                        null_log += ln[k] - ln[n]
                        m = breaks + pos - cand
                        value = ga[hits] + gb[m] - gab[hits + m] - lb0 - null_log
                        if value >= h_cont:
                            return self._crossed(self._deck, CONTINUATION, value, h_cont, 1,
                                                 window, pos)
                    cand += 1
            if piles_of is not None:
                mine = piles_of[f]
                if not narrow:
                    if mine & p_piles:
                        p_piles &= mine
                        narrow = 1
                    else:
                        p_piles = mine
                        p_from = pos
                elif narrow > 1 or pw > 0.0:
                    # judged: the card lies in the run's piles and is not one the run
                    # already took from them (side 1), in a pile beside them (side 2), or
                    # neither
                    if pw <= 0.0 and not mine & (p_piles | (p_piles << 1) | (p_piles >> 1)) \
                            and not p_piles & (p_piles - 1) and \
                            10 * (left - pos - around[p_piles.bit_length() - 1]) >= left - pos:
                        # neither, and at least 1 in 10 of the cards still to come lie
                        # outside the run's pile and the two beside it (they hold at most
                        # `around` of them): ln(0.05/chance) < 0, the evidence stays at zero
                        p_piles, narrow, p_from = mine, 0, pos
                    else:
                        sides = sides_of.get(p_piles)
                        if sides is None:
                            sides = self._sides_of(p_piles)
                        same, beside, twins, faces_near = sides
                        n = left - pos
                        spent = -1  # (not worked out yet)
                        if mine & p_piles:
                            spent = faces_from(shoe_faces, p_from - 1, pos - 1) & ~twins
                            side = 0 if spent >> f & 1 else 1
                        elif mine & ((p_piles << 1) | (p_piles >> 1)):
                            side = 2
                        else:
                            side = 0
                        if side == 0 and pw <= 0.0 and 10 * (n - decks * faces_near) >= n:
                            # at least 1 in 10 of the cards still to come lie elsewhere:
                            # ln(0.05/chance) < 0, the evidence stays at zero
                            p_piles, narrow, p_from = mine, 0, pos
                        else:
                            was = pw
                            if side == 2:
                                pw += _LP2 - ln[count_in(beside, counts)] + ln[n]
                                p_piles = mine & ((p_piles << 1) | (p_piles >> 1))
                                narrow = 2
                                p_from = pos
                            else:
                                if spent < 0:
                                    spent = faces_from(shoe_faces, p_from - 1, pos - 1) & ~twins
                                k = count_in(same, counts) - count_in(spent, counts)
                                if side == 1:
                                    pw += _LP1 - ln[k] + ln[n]
                                    p_piles &= mine
                                    narrow = 2
                                else:
                                    k = n - k - count_in(beside, counts)
                                    if k:
                                        pw += _LP0 - ln[k] + ln[n]
                                    p_piles, narrow, p_from = mine, 0, pos
                            if pw <= 0.0:
                                pw = 0.0
                            else:
                                if was <= 0.0:
                                    pw_start = pos
                                if pw >= h_run:
                                    return self._crossed(pile_ref, RUN, pw, h_run, pw_start, 1,
                                                         pos)
                elif mine & p_piles:  # one card in the run's piles, no evidence yet
                    p_piles &= mine
                    narrow = 2
                elif mine & ((p_piles << 1) | (p_piles >> 1)):
                    p_piles = mine & ((p_piles << 1) | (p_piles >> 1))
                    narrow = 2
                    p_from = pos
                else:
                    p_piles, narrow, p_from = mine, 0, pos
            a, b = neighbours[f]
            until[a] = until[b] = pos + window
            c = counts[f]
            if c <= 0:
                negative = True
            counts[f] = c - 1
        if negative:
            return self._held_twice()
        size = len(faces)
        if deck_run and w <= 0.0 and quiet != pos:
            w_start = pos + 1
        self._value = value
        self._state = (total - size, w, w_start, hits, misses + size - cand, null_log,
                       pw, pw_start, narrow, p_piles, p_from, quiet)
        return None

    def _shelf_pass(self, faces: list[int], base: int) -> tuple[int, float] | None:
        """The shelf test over a batch: (the card where it crossed its threshold, its
        value), or None. Each card multiplies the statistic by ``q(face) · n / c``: its
        chance under the shelf predictor (:func:`shelf_tables`) over its exact chance
        ``c / n`` under a fair shuffle; whatever came before, the predictor's chances over
        the faces still to come sum to at most 1, so under a fair shuffle the product is a
        supermartingale and Ville's inequality bounds it from the shoe's first card. A card
        the pack does not hold is skipped, as by the other tests."""
        value, k, prev, n = self._shelf_state
        counts, ln = self._shelf_counts, self._ln
        lq, nxt, _start = shelf_tables()
        h = self._h_cont
        for pos, f in enumerate(faces, base + 1):
            c = counts[f]
            if not c:
                continue
            if prev >= 0:
                d = (f - prev) % FACES
                value += lq[k][d] + ln[n] - ln[c]
                if value >= h:
                    return pos, value
                k = nxt[k][d]
            counts[f] = c - 1
            n -= 1
            prev = f
        self._shelf_state = (value, k, prev, n)
        return None

    def _packet_pass(self, faces: list[int], base: int) -> tuple[int, float, int] | None:
        """The packet tests over a batch (:mod:`controller.screening.packets`): (the card
        where the first of them crossed its threshold, its value, which test), or None.
        The same in both paths."""
        threshold = self._h_cont + self._packet_extra
        first: tuple[int, float, int] | None = None
        for i, packets in enumerate(self._packets):
            at = packets.run(faces, threshold)
            if at is not None and (first is None or base + 1 + at < first[0]):
                first = (base + 1 + at, packets.value, i)
        return first

    def _crossed(self, ref: Reference, test: ScreenTest, value: float, threshold: float,
                 start: int, window: int, pos: int) -> Finding | None:
        """A test of the batch path crossed its threshold at card ``pos``: the finding,
        unless a card the pack does not hold came before it or is this one (its count is
        not yet taken off; its chance was zero) — then the shoe is judged again by the
        reference path, which skips such a card."""
        if min(self._counts) < 0 or not self._counts[self._faces[pos - 1]]:
            return self._held_twice()
        return self._finding(ref, test, value, threshold, start, window, pos)

    def _held_twice(self) -> Finding | None:
        """A card the pack does not hold was read in this batch (the composition checks
        report it): the reference path, which skips it, judges this shoe from its first
        card on."""
        self._begin_exact()
        return self._judge_exact(self._faces, 0)

    # ------------------------------------------------------------------ the reference path

    def _begin_exact(self) -> None:
        """Judge the rest of this shoe card by card (state for :meth:`_judge_exact`)."""
        self._exact = True
        # per face: the last position at which a card of it continues one of the last
        # _DECK_WINDOW cards (a neighbour of it was dealt within the window)
        self._until = [-FACES * 64] * FACES
        self._sides = {}
        # counts, total, prev (the last card's face), then the statistics of the batch
        # path's state, in its order
        self._exact_state = ([self.decks] * FACES, self.decks * FACES, -1, 0.0, 2, 0, -1,
                             0.0, 0.0, 2, 0, 0, 1)

    def _judge_exact(self, faces: list[int], base: int) -> Finding | None:
        """The reference path: every card judged in turn.

        The common card — one that continues nothing and while no run's evidence is
        above zero — costs a face lookup, two comparisons and a few stores; the exact
        chances are computed only for the cards that can change a statistic."""
        shoe_faces = self._faces
        (counts, total, prev, w, w_start, hits, misses, null_log,
         pw, pw_start, p_narrow, p_piles, p_from) = self._exact_state
        until, ln = self._until, self._ln
        deck_run, deck_cont = self._deck_run, self._deck_cont
        h_run, h_cont = self._h_run, self._h_cont
        ga, gb, gab, lb0 = self._ga, self._gb, self._gab, self._lb0
        pile = self._pile
        if pile is not None:
            p_piles_of, p_sides = pile.piles_of, self._sides
        neighbours = _NEIGHBOURS
        window = _DECK_WINDOW
        finding: Finding | None = None
        pos = base
        for f in faces:
            pos += 1
            c = counts[f]
            if not c:  # a card the pack does not hold: the composition checks say so
                continue
            if until[f] < pos and w <= 0.0:
                # the common card: it continues none of the last cards (so not the last
                # one either) and the run test's evidence is zero
                misses += 1
                w_start = pos + 1
            else:
                n = total
                a, b = neighbours[prev]
                if deck_run:
                    if f in (a, b):
                        k = counts[a] + counts[b]
                        if 0 < k < n:
                            w += _LQ - ln[k] + ln[n]
                            if w >= h_run:
                                finding = self._finding(self._deck, RUN, w, h_run, w_start, 1,
                                                        pos)
                    elif w > 0.0:
                        k = counts[a] + counts[b]
                        if 0 < k < n:
                            w += _L1Q - ln[n - k] + ln[n]
                            if w <= 0.0:
                                w = 0.0
                                w_start = pos + 1
                    else:
                        w_start = pos + 1
                if deck_cont:
                    if until[f] >= pos:
                        k = count_in(near_from(shoe_faces, pos - 1 - window if pos > window
                                               else 0, pos - 1), counts)
                        if 0 < k < n:
                            hits += 1
                            null_log += ln[k] - ln[n]
                            value = ga[hits] + gb[misses] - gab[hits + misses] - lb0 - null_log
                            self._value = value
                            if value >= h_cont and finding is None:
                                finding = self._finding(self._deck, CONTINUATION, value, h_cont,
                                                        1, window, pos)
                    else:
                        misses += 1
            if pile is not None:
                mine = p_piles_of[f]
                if not p_narrow:  # the run has not found its pile: nothing judged
                    if pw <= 0.0:
                        pw_start = pos + 1
                    if mine & p_piles:
                        p_piles &= mine
                        p_narrow = 1
                    else:
                        p_piles, p_from = mine, pos
                elif p_narrow > 1 or pw > 0.0:
                    # judged once the run has found its pile (two cards in it): the card
                    # lies in the run's pile and is not one the run already took from it
                    # (side 1), in a pile beside it (side 2, the run crossing into the
                    # next round's pile), or neither
                    sides = p_sides.get(p_piles)
                    if sides is None:
                        sides = self._sides_of(p_piles)
                    same, beside, twins, _ = sides
                    n = total
                    k = 0
                    if mine & p_piles:
                        # the faces the run already took from its piles
                        spent = faces_from(shoe_faces, p_from - 1, pos - 1) & ~twins
                        k = count_in(same, counts) - count_in(spent, counts)
                        side = 0 if spent >> f & 1 else 1
                    elif mine & ((p_piles << 1) | (p_piles >> 1)):  # (p_piles: not mine)
                        side = 2
                    else:
                        spent = faces_from(shoe_faces, p_from - 1, pos - 1) & ~twins
                        k = count_in(same, counts) - count_in(spent, counts)
                        side = 0
                    if side == 1:
                        pw += _LP1 - ln[k] + ln[n]
                        p_piles &= mine
                        p_narrow += 1
                    elif side == 2:
                        pw += _LP2 - ln[count_in(beside, counts)] + ln[n]
                        p_piles = mine & ((p_piles << 1) | (p_piles >> 1))
                        p_narrow += 1
                        p_from = pos
                    else:
                        k = n - k - count_in(beside, counts)
                        if k:
                            pw += _LP0 - ln[k] + ln[n]
                        p_piles, p_narrow, p_from = mine, 0, pos
                    if pw <= 0.0:
                        pw = 0.0
                        pw_start = pos + 1
                    elif pw >= h_run and finding is None:
                        finding = self._finding(pile, RUN, pw, h_run, pw_start, 1, pos)
                else:  # one card in the run's piles, no evidence yet: not judged
                    pw_start = pos + 1
                    if mine & p_piles:
                        p_piles &= mine
                        p_narrow += 1
                    elif mine & ((p_piles << 1) | (p_piles >> 1)):
                        p_piles = mine & piles_beside(p_piles)
                        p_narrow += 1
                        p_from = pos
                    else:
                        p_piles, p_narrow, p_from = mine, 0, pos
            a, b = neighbours[f]
            until[a] = until[b] = pos + window
            counts[f] = c - 1
            total -= 1
            prev = f
            if finding is not None:
                return finding
        self._exact_state = (counts, total, prev, w, w_start, hits, misses, null_log,
                             pw, pw_start, p_narrow, p_piles, p_from)
        return None

    def _sides_of(self, piles: int) -> tuple[int, int, int, int]:
        """The faces of a run's piles, of the piles beside them (not in the run's), and the
        faces one of the run's piles holds twice or more, as 52-bit face sets; and how
        many faces the first two hold (memoised per shoe)."""
        pile = self._pile
        assert pile is not None
        kept = pile.piles
        last = len(kept) - 1
        same = near = twins = 0
        rest = piles & ((1 << len(kept)) - 1)
        while rest:
            low = rest & -rest
            i = low.bit_length() - 1
            rest ^= low
            these = 0
            for f in kept[i]:
                if these >> f & 1:
                    twins |= 1 << f
                these |= 1 << f
            same |= these
            if i:
                for g in kept[i - 1]:
                    near |= 1 << g
            if i < last:
                for g in kept[i + 1]:
                    near |= 1 << g
        near &= ~same
        got = self._sides[piles] = (same, near, twins, same.bit_count() + near.bit_count())
        return got

    # ------------------------------------------------------------------ evidence

    def _finding(self, ref: Reference, test: ScreenTest, value: float, threshold: float,
                 start: int, window: int, pos: int) -> Finding:
        """The finding of a test that crossed its threshold at card ``pos`` (the rest of
        the batch is not judged): its evidence replayed from this shoe's cards."""
        del self._faces[pos:]
        return finding_for(self._faces, ref, test, value, threshold, start, window, pos,
                           self.decks, self.settings.packet_predictor,
                           self.settings.false_alarm_one_in)


__all__ = ["CONTINUATION", "NEW_DECK", "PACKET", "PREVIOUS_SHOE", "RUN", "SHELF", "Finding",
           "ScreenSettings", "ShuffleScreen"]
