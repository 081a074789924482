"""A finding and its evidence: what a pit boss and an auditor read when a test fires.

The screen's statistics (:mod:`controller.screening.screen`) say *that* a test crossed its
threshold and at which card. What they do not keep — a card costs them a comparison —
is the run that gave the order away. When a test fires, :func:`finding_for` replays the
shoe's cards up to that card against the reference the test held them to and lists it:
each card's position, whether it went where the test's alternative puts it, and its
chance of doing so under a fair shuffle. Once per shoe at most, so it may be plain.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controller.screening.faces import FACES, LOW, Remaining, face_card
from controller.screening.packets import PacketTest
from controller.screening.reference import Reference, piles_beside
from controller.screening.sequential import shelf_tables


class ScreenTest(StrEnum):
    """The screen's tests (docs/shuffle-screening.md, "The tests"), as a finding's ``test``
    and its evidence name them."""

    RUN = "run"
    CONTINUATION = "continuation"
    SHELF = "shelf"
    PACKET = "packet"


RUN, CONTINUATION, SHELF, PACKET = ScreenTest
EVIDENCE_CARDS = 60  # the most cards a finding lists

@dataclass(frozen=True)
class Finding:
    """A test crossed its threshold: everything a pit boss and an auditor need."""

    test: ScreenTest
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
                "the dealt order follows a shelf shuffler's streams of" if self.test == SHELF
                else "the dealt order follows riffled packets of" if self.test == PACKET
                else "the dealt order keeps continuing")
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


def finding_for(faces: Sequence[int], ref: Reference, test: ScreenTest, value: float,
                threshold: float, start: int, window: int, pos: int, decks: int,
                predictor: int, false_alarm_one_in: int) -> Finding:
    """The finding of ``test``, which crossed ``threshold`` with ``value`` at card ``pos``
    of a shoe whose faces, up to that card, are ``faces``: its run replayed against ``ref``
    from card ``start`` (the run test: where its evidence began)."""
    rows = evidence_rows(faces, ref, window, decks, test, predictor)
    rows = [r for r in rows if r[0] >= start]
    shown = [(p, str(face_card(face)), hit) for p, face, hit, _ in rows[-EVIDENCE_CARDS:]]
    if test == RUN and shown and shown[0][0] == start and start > 1:
        # the card the run starts from
        shown.insert(0, (start - 1, str(face_card(faces[start - 2])), False))
    return Finding(
        test=test, reference=ref.kind, reference_order=ref.description,
        value=value, threshold=threshold, position=pos,
        continued=sum(1 for r in rows if r[2]), steps=len(rows),
        expected=sum(r[3] for r in rows), run=tuple(shown),
        false_alarm_one_in=false_alarm_one_in, window=window, details=dict(ref.details),
    )


def run_text(evidence: Mapping[str, Any]) -> str | None:
    """A finding's run of cards as one line, when its evidence has one (SHUFFLE_SUSPECT:
    docs/shuffle-screening.md): each card's position in the shoe and the card, ``✓`` where
    it continued the order the pack was held against. What the message counts ("cards
    1–7: 6 of 6 continued it"), an auditor reads card by card against surveillance
    footage. None when the evidence holds no such run (or not in that shape: a record read
    from a log)."""
    run = evidence.get("run")
    if not isinstance(run, list) or not run:
        return None
    cards = []
    for step in run:
        position = step.get("position") if isinstance(step, dict) else None
        card = step.get("card") if isinstance(step, dict) else None
        if type(position) is not int or not isinstance(card, str):
            return None
        cards.append(f"{position}:{card}{'✓' if step.get('continues') is True else ''}")
    return "the run (position:card, ✓ continued the reference order): " + " ".join(cards)


def evidence_rows(faces: Sequence[int], ref: Reference, window: int, decks: int, test: ScreenTest,
           predictor: int = 1) -> list[tuple[int, int, bool, float]]:
    """(position, face, continued, chance) of every card of a shoe, against ``ref``: for
    new-deck order from the last ``window`` cards; for piles from the piles the run so far
    can lie in."""
    if test == SHELF:
        return _judge_shelf(faces, decks)
    if test == PACKET:
        return _judge_packets(faces, ref, decks, predictor)
    rem = Remaining(decks)
    out: list[tuple[int, int, bool, float]] = []
    last: list[int] = []
    piles = 0
    narrow = False
    prev = -1
    for pos, f in enumerate(faces, 1):
        n = rem.total
        before = rem.bits
        if not rem.take(f):
            continue
        if ref.has_piles:
            side = 0
            if prev >= 0:
                low = LOW[f]  # count-mask bit; face-set bit below
                if narrow:
                    same = ref.faces_of(piles)
                    beside = ref.faces_of(piles_beside(piles)) & ~same
                    side = 1 if same & low else 2 if beside & low else 0
                    k = (before & (same | beside)).bit_count()
                    if 0 < k < n:
                        out.append((pos, f, side > 0, k / n))
                else:
                    side = 1 if ref.faces52_of(piles) & (1 << f) else 0
            mine = ref.piles_of[f]
            if side == 1:
                piles = (mine & piles) or mine
                narrow = True
            elif side == 2:
                piles = (mine & piles_beside(piles)) or mine
                narrow = True
            else:
                piles, narrow = mine, False
            prev = f
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


def _judge_packets(faces: Sequence[int], ref: Reference, decks: int, predictor: int
                   ) -> list[tuple[int, int, bool, float]]:
    """(position, face, predicted, chance) of every card of a shoe for the packet test:
    ``predicted`` — the card lies where one of the two packets last followed goes next
    (``packets.EXPLAINED``); ``chance`` — the chance of that under a fair shuffle."""
    test = PacketTest(ref.piles_of, ref.pile_faces52, decks, predictor)
    test.explain = True
    out: list[tuple[int, int, bool, float]] = []
    for pos, f in enumerate(faces, 1):
        had = bool(test.streams)
        if test.step(f) is not None and had:
            out.append((pos, f, test.hit, test.chance))
    return out


def _judge_shelf(faces: Sequence[int], decks: int) -> list[tuple[int, int, bool, float]]:
    """(position, face, followed, chance) of every card of a shoe for the shelf test:
    ``followed`` — the shelf predictor gave the card's face more than its chance under a
    fair shuffle (it went on a stream); ``chance`` — the chance under a fair shuffle that
    the card is one the predictor so favoured."""
    lq, nxt, k = shelf_tables()
    counts = [decks] * FACES
    n = decks * FACES
    prev = -1
    out: list[tuple[int, int, bool, float]] = []
    for pos, f in enumerate(faces, 1):
        c = counts[f]
        if not c:
            continue
        if prev >= 0:
            row = lq[k]
            favoured = {g for g in range(FACES)
                        if counts[g] and math.exp(row[(g - prev) % FACES]) * n > counts[g]}
            out.append((pos, f, f in favoured, sum(counts[g] for g in favoured) / n))
            k = nxt[k][(f - prev) % FACES]
        counts[f] = c - 1
        n -= 1
        prev = f
    return out


__all__ = ["CONTINUATION", "EVIDENCE_CARDS", "PACKET", "RUN", "SHELF", "Finding", "ScreenTest",
           "evidence_rows", "finding_for", "run_text"]
