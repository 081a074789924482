"""The shuffle screen the engine holds: fed every card read, every round end and every
shoe boundary; reports a :class:`Finding` the moment a test crosses its threshold.

Three tests run (docs/shuffle-screening.md): the **run** test and the **continuation**
test against new-deck order, and the **run** test against the previous shoe's discards.
One finding per shoe at most (one slip, one deviation). What runs is the profile's
``[shuffle_screen]`` (:class:`ScreenSettings`).

Speed: the screen must cost the engine under a tenth of its time per card, so a card
costs a face lookup, a counter update and a membership test or two; the exact chances
(a popcount each) are computed only when they can change a statistic — after a
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
from dataclasses import dataclass
from typing import Any

from controller.cards import Card
from controller.screening.faces import FACES, LOW, RANK_INDEX, SUIT_OFFSET, Remaining, face_card
from controller.screening.reference import (
    NEW_DECK,
    PREVIOUS_SHOE,
    Reference,
    new_deck_reference,
    pile_reference,
)
from controller.screening.sequential import (
    RUN_Q,
    Thresholds,
    beta_tables,
    log_table,
    window_for,
)

RUN, CONTINUATION = "run", "continuation"
EVIDENCE_CARDS = 60  # the most cards a finding lists
BATCH = 4  # cards judged together (see ShuffleScreen.card)
EARLY = 24  # … except the first cards of a shoe, judged one by one: an unshuffled pack
# is caught at its 8th card and raised there

_LQ = math.log(RUN_Q)
_L1Q = math.log(1 - RUN_Q)
_NEIGHBOURS = tuple(((f - 1) % FACES, (f + 1) % FACES) for f in range(FACES))
_DECK = new_deck_reference()
_DECK_WINDOW = window_for(_DECK.lag_one_chance())


@dataclass(frozen=True)
class ScreenSettings:
    """What the screen does at one table (the profile's ``[shuffle_screen]``)."""

    enabled: bool = True
    false_alarm_one_in: int = 1_000_000  # shoes
    run_test: bool = True
    continuation_test: bool = True
    previous_shoe: bool = True  # also hold a shoe against the previous shoe's discards

    @property
    def tests(self) -> int:
        """(test, reference) pairs that may run in a shoe: the false-alarm budget's shares."""
        return (self.run_test + self.continuation_test
                + (self.run_test and self.previous_shoe))


@dataclass(frozen=True)
class Finding:
    """A test crossed its threshold: everything a pit boss and an auditor need."""

    test: str
    reference: str
    reference_order: str
    value: float
    threshold: float
    position: int  # cards read in this shoe when it fired
    continued: int  # cards of the run that continued the reference
    steps: int  # cards of the run judged
    expected: float  # continuations a fair shuffle gives in those steps, on average
    run: tuple[tuple[int, str, bool], ...]  # (position, card, continued) of the run shown
    false_alarm_one_in: int
    window: int
    details: dict[str, Any]
    raised_at: int = 0  # cards read when the finding was returned (≥ position)

    def message(self) -> str:
        what = ("a run of cards follows" if self.test == RUN else
                "the dealt order keeps continuing")
        first, last = self.run[0][0], self.run[-1][0]
        return (f"shuffle suspect: {what} the {self.reference_order} — cards {first}–{last}: "
                f"{self.continued} of {self.steps} continued it where a shuffled pack gives "
                f"{self.expected:.1f}; {self.test} test {self.value:.1f} ≥ threshold "
                f"{self.threshold:.1f} (false alarm 1 in {self.false_alarm_one_in:,} shoes)")

    def evidence(self) -> dict[str, Any]:
        """The deviation's evidence. Audit records hold no floats: the statistic, its
        threshold (log-likelihood ratios, in nats) and the expected count are decimal
        strings."""
        return {
            "test": self.test, "value": f"{self.value:.2f}",
            "threshold": f"{self.threshold:.2f}", "unit": "nats",
            "reference": self.reference, "reference_order": self.reference_order,
            "reference_details": self.details,
            "position": self.position, "raised_at": self.raised_at or self.position,
            "continued": self.continued, "judged": self.steps,
            "expected": f"{self.expected:.2f}", "window": self.window,
            "false_alarm_one_in": self.false_alarm_one_in,
            "run": [{"position": p, "card": c, "continues": h} for p, c, h in self.run],
        }


class ShuffleScreen:
    """Sequential shuffle screening for one table (see the package docstring)."""

    def __init__(self, settings: ScreenSettings, decks: int) -> None:
        self.settings = settings
        self._piles: list[list[int]] = []  # this shoe's discards, one pile per round
        self._previous: Reference | None = None
        self._deck = _DECK
        self._shoe = 0
        self._active = False
        self._faces: list[int] = []
        self._pending: list[Card] = []
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
        self._previous = None
        self._piles = []
        self._deck = new_deck_reference(source)

    def start_shoe(self, shoe: int, decks: int | None = None) -> None:
        """A new shoe (shuffle cycle) starts: the last shoe's discards become a reference."""
        if self._pending and self._piles:  # read but never judged: still discards
            self._piles[-1].extend(SUIT_OFFSET[c.suit] + RANK_INDEX[c.rank]
                                   for c in self._pending)
        if decks is not None and decks != self.decks:
            self._set_decks(decks)
            self._previous = None
            self._piles = []
        elif self._piles and self._shoe:
            self._previous = pile_reference(self._piles, self._pack, self._shoe)
        self._shoe = shoe
        self._piles = [[]]
        self._faces = []
        self._pending = []
        full = Remaining(self.decks)
        self._counts, self._bits, self._total = full.counts, full.bits, full.total
        self._alarmed = False
        self._active = self.settings.enabled
        s = self.settings
        self._deck_run = s.run_test
        self._deck_cont = s.continuation_test
        self._pile = (self._previous if s.previous_shoe and s.run_test else None)
        # new-deck order: run test (CUSUM, its run's start) and continuation test
        self._w = 0.0
        self._w_start = 2
        self._hits = self._misses = 0
        self._null_log = 0.0
        self._recent = [-FACES * 64] * FACES  # per face: the position of its last card
        self._prev = -1  # the last card's face
        # previous shoe's discards: run test, and the piles the run can lie in
        self._pw = 0.0
        self._pw_start = 2
        self._p_narrow = False  # the last card continued a run: its piles are narrowed
        self._p_piles = 0
        self._p_next = 0
        self._memo: dict[int, int] = {}

    def end_shoe(self) -> Finding | None:
        """The shoe is over (last hand played, cards withdrawn, table closing): the cards
        not judged yet are judged; nothing more is dealt from it (its discards stay the
        reference for the next)."""
        finding = self.flush() if self._pending else None
        self._active = False
        return finding

    def card(self, card: Card) -> Finding | None:
        """A card left the shoe (burns included). Returns a finding when a test fires.

        Cards are judged in batches of :data:`BATCH` (and at every round end): one pass
        with the statistics in local variables costs a fraction of a call per card. A
        finding names the card where its test crossed the threshold; it is returned with
        the card that completed the batch, at most ``BATCH - 1`` cards later (the first
        :data:`EARLY` cards of a shoe are judged one by one)."""
        pending = self._pending
        pending.append(card)
        if len(pending) >= BATCH or len(self._faces) < EARLY:
            return self.flush()
        return None

    def round_end(self) -> Finding | None:
        """The round's cards were collected: they form one pile of the discards. Judges
        the cards not judged yet (a finding, if any)."""
        finding = self.flush() if self._pending else None
        if self._piles and self._piles[-1]:
            self._piles.append([])
        return finding

    def flush(self) -> Finding | None:
        """Judge the cards dealt since the last batch."""
        cards, self._pending = self._pending, []
        if not self._piles:
            return None
        suit, rank = SUIT_OFFSET, RANK_INDEX
        faces = [suit[c.suit] + rank[c.rank] for c in cards]
        self._piles[-1].extend(faces)
        if not self._active or self._alarmed:
            return None
        shoe_faces = self._faces
        base = len(shoe_faces)
        shoe_faces.extend(faces)
        # the statistics, as locals for the pass
        counts, bits, total = self._counts, self._bits, self._total
        recent, prev = self._recent, self._prev
        ln = self._ln
        deck_run, deck_cont = self._deck_run, self._deck_cont
        w, w_start = self._w, self._w_start
        hits, misses, null_log = self._hits, self._misses, self._null_log
        h_run, h_cont = self._h_run, self._h_cont
        pile = self._pile
        pw, pw_start = self._pw, self._pw_start
        p_narrow, p_piles, p_next = self._p_narrow, self._p_piles, self._p_next
        neighbours = _NEIGHBOURS
        window = _DECK_WINDOW
        finding: Finding | None = None
        for i, f in enumerate(faces):
            c = counts[f]
            if c == 0:  # a card the pack does not hold: the composition checks say so
                continue
            n = total
            pos = base + i + 1
            hit = False
            if prev >= 0:
                lo, hi = neighbours[f]
                if deck_run:
                    if prev in (lo, hi):
                        a, b = neighbours[prev]
                        k = counts[a] + counts[b]
                        if 0 < k < n:
                            w += _LQ - ln[k] + ln[n]
                            if w >= h_run:
                                finding = self._finding(self._deck, RUN, w, h_run, w_start, 1, pos)
                    elif w > 0.0:
                        a, b = neighbours[prev]
                        k = counts[a] + counts[b]
                        if 0 < k < n:
                            w += _L1Q - ln[n - k] + ln[n]
                            if w <= 0.0:
                                w = 0.0
                                w_start = pos + 1
                    else:
                        w_start = pos + 1
                if deck_cont and finding is None:
                    if pos - recent[lo] <= window or pos - recent[hi] <= window:
                        near: set[int] = set()
                        for g in shoe_faces[max(0, pos - 1 - window):pos - 1]:
                            near.update(neighbours[g])
                        k = sum([counts[x] for x in near])
                        if 0 < k < n:
                            hits += 1
                            null_log += ln[k] - ln[n]
                            value = (self._ga[hits] + self._gb[misses] - self._gab[hits + misses]
                                     - self._lb0 - null_log)
                            if value >= h_cont:
                                finding = self._finding(self._deck, CONTINUATION, value, h_cont,
                                                        1, window, pos)
                    else:
                        misses += 1
                if pile is not None:
                    hit = bool(p_next & LOW[f])
                    if p_narrow and (hit or pw > 0.0) and finding is None:
                        k = (bits & p_next).bit_count()
                        if 0 < k < n:
                            if hit:
                                pw += _LQ - ln[k] + ln[n]
                                if pw >= h_run:
                                    finding = self._finding(pile, RUN, pw, h_run, pw_start, 1, pos)
                            else:
                                pw += _L1Q - ln[n - k] + ln[n]
                                if pw <= 0.0:
                                    pw = 0.0
                                    pw_start = pos + 1
                    elif pw <= 0.0:
                        pw_start = pos + 1
            c -= 1
            counts[f] = c
            total -= 1
            recent[f] = pos
            prev = f
            if pile is not None:
                bits ^= 1 << (16 * f + c)
                mine = pile.piles_of[f]
                if hit:
                    p_piles = (mine & p_piles) or mine
                    p_next = self._memo.get(p_piles, -1)
                    if p_next < 0:
                        p_next = self._memo[p_piles] = pile.faces_of(p_piles)
                    p_narrow = True
                else:
                    p_piles, p_next, p_narrow = mine, pile.related[f], False
            if finding is not None:
                self._alarmed = True
                return dataclasses.replace(finding, raised_at=pos + len(faces) - i - 1)
        self._counts, self._bits, self._total = counts, bits, total
        self._prev = prev
        self._w, self._w_start = w, w_start
        self._hits, self._misses, self._null_log = hits, misses, null_log
        self._pw, self._pw_start = pw, pw_start
        self._p_narrow, self._p_piles, self._p_next = p_narrow, p_piles, p_next
        return None

    # ------------------------------------------------------------------ evidence

    def _finding(self, ref: Reference, test: str, value: float, threshold: float,
                 start: int, window: int, pos: int) -> Finding:
        """Replay this shoe's cards up to ``pos`` against the reference to list the run."""
        del self._faces[pos:]  # the rest of the batch is not judged
        rows = _judge(self._faces, ref, window, self.decks, test)
        rows = [r for r in rows if r[0] >= start]
        shown = [(p, str(face_card(face)), hit) for p, face, hit, _ in rows[-EVIDENCE_CARDS:]]
        if test == RUN and shown and shown[0][0] == start and start > 1:
            # the card the run starts from
            shown.insert(0, (start - 1, str(face_card(self._faces[start - 2])), False))
        return Finding(
            test=test, reference=ref.kind, reference_order=ref.description,
            value=value, threshold=threshold, position=pos,
            continued=sum(1 for r in rows if r[2]), steps=len(rows),
            expected=sum(r[3] for r in rows), run=tuple(shown),
            false_alarm_one_in=self.settings.false_alarm_one_in,
            window=window, details=dict(ref.details),
        )


def _judge(faces: Sequence[int], ref: Reference, window: int, decks: int, test: str
           ) -> list[tuple[int, int, bool, float]]:
    """(position, face, continued, chance) of every card of a shoe, against ``ref``: for
    new-deck order from the last ``window`` cards; for piles from the piles the run so far
    can lie in."""
    rem = Remaining(decks)
    out: list[tuple[int, int, bool, float]] = []
    last: list[int] = []
    piles = 0
    mask = 0
    for pos, f in enumerate(faces, 1):
        n = rem.total
        before = rem.bits
        if not rem.take(f):
            continue
        if ref.has_piles:
            if pos > 1:
                hit = bool(mask & LOW[f])
                k = (before & mask).bit_count()
                if 0 < k < n:
                    out.append((pos, f, hit, k / n))
                mine = ref.piles_of[f]
                piles = ((mine & piles) or mine) if hit else mine
                mask = ref.faces_of(piles) if hit else ref.related[f]
            else:
                piles, mask = ref.piles_of[f], ref.related[f]
            continue
        if pos > 1 and last:
            union = 0
            for g in faces[max(0, pos - 1 - window):pos - 1]:
                union |= ref.related[g]
            k = (before & union).bit_count()
            if 0 < k < n:
                out.append((pos, f, bool(union & LOW[f]), k / n))
        last.insert(0, f)
    return out


__all__ = ["CONTINUATION", "NEW_DECK", "PREVIOUS_SHOE", "RUN", "Finding", "ScreenSettings",
           "ShuffleScreen"]
