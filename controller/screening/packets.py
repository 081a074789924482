"""The packet test: riffles of the previous shoe's discards.

A riffle cuts the pack into packets and interleaves them, each packet keeping its order
(Bayer & Diaconis 1992): after ``k`` riffles of the discards the dealt order is at most
``2^k`` interleaved runs through the discards, each taking the discards' cards in turn.
Against new-deck order the continuation test sees that (the next card is a neighbour of
one of the last few). Against the discards it cannot: a pile's order is unknown and its
faces have twins in up to eight other piles, so "a neighbour of one of the last cards"
covers most of the faces. This test **follows the packets** instead: it keeps up to
:data:`STREAMS` streams, each the piles a packet can be in (narrowed card by card, as the
run test narrows a run) and the faces it already took from them, and predicts that the
next card lies where one of them goes next — the faces of its piles it has not taken yet,
or of the piles beside them.

It is a **predictive likelihood ratio**, as the shelf test is: before each card, a
chance ``q(f)`` for every face still to come — a share ``1 − e`` over the streams (the
most recently fed weighing most, :data:`WEIGHTS`), each stream's share evenly over the
faces it goes to that are still to come, and ``e`` over all the cards still to come in
proportion to their counts (three such predictors, ``e`` from :data:`ELSEWHERE`, mixed)
— held against the exact chance ``c_f / n`` under a fair shuffle. (Evenly over faces,
not cards: how many faces of a set are left is one ``bit_count`` of two 52-bit sets,
where the cards would be a sum over the set's faces at every card.) Whatever the
streams, each predictor's chances sum to at most 1, so under a fair shuffle the product
of ``q(f) · n / c_f`` is a supermartingale and Ville's inequality bounds it from the
shoe's first card: threshold ``ln(1/α_i)``. Everything is fixed before the card is read;
the streams are then fed with it (the stream that predicted it most sharply takes it,
or it starts a new one in place of the stalest).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from controller.screening.faces import FACES

STREAMS = 8
"""Packets followed at once: the four runs two riffles leave, and as many again for the
streams a packet's start, a card the cut card kept back or a twin sets off on a wrong
track (measured: 4 streams caught 2 riffles of the discards in 37–49 of 100 baccarat and
deep-cut blackjack shoes, 8 in 78–89; 1 riffle in every shoe either way)."""
WEIGHTS = (0.25, 0.2, 0.15, 0.12, 0.1, 0.08, 0.06, 0.04)
"""The streams' shares of the prediction, the most recently fed first: a riffle's next
card continues one of the packets that fed the last few cards."""
ELSEWHERE = (0.1, 0.3, 0.6)
"""The share of the prediction over every card still to come — a packet's start, a card
the streams lost, the cards never read in the last shoe (one block whose order nothing
tells: up to half the pack where the cut card lies deep) — is unknown, so the test mixes
three predictors, one per share, with equal weights: a mixture of supermartingales is one
(its value is ``ln`` of the mean of their products)."""

EXPLAINED = 2
"""The evidence's count: how often a card went where one of the two packets last followed
goes next (against its chance under a fair shuffle). The statistic weighs every stream; the
count is what a pit boss can read: a riffle deals from two packets at a time."""

_LOG_ELSEWHERE = tuple(math.log(e) for e in ELSEWHERE)
_E0, _E1, _E2 = ELSEWHERE
_LOG_MIX = math.log(len(ELSEWHERE))
#: per number of streams, 1 / the sum of their weights
_NORM = (0.0, *(1 / sum(WEIGHTS[:k]) for k in range(1, STREAMS + 1)))


class PacketTest:
    """The packet test over one shoe (see the module docstring). ``piles_of[f]``: the
    bitmask of the discards' piles holding a card of face ``f``; ``pile_faces[i]``: pile
    ``i``'s faces as a 52-bit set; ``decks``: copies of each face in the pack."""

    def __init__(self, piles_of: Sequence[int], pile_faces: Sequence[int], decks: int
                 ) -> None:
        self._piles_of = piles_of
        self._pile_faces = pile_faces
        self._all = (1 << len(pile_faces)) - 1
        self._faces_of: dict[int, int] = {}
        self.counts = [decks] * FACES
        self._left = (1 << FACES) - 1  # the faces with a card still to come
        self.n = decks * FACES
        self.logs = [0.0] * len(ELSEWHERE)  # ln of each predictor's product
        #: work out ``hit`` and ``chance`` at each card (the evidence only): did the card go
        #: where one of the :data:`EXPLAINED` packets last followed goes next, and the chance
        #: of that under a fair shuffle
        self.explain = False
        self.hit = False
        self.chance = 0.0
        #: streams, the most recently fed first: [piles, faces taken from them, faces
        #: predicted (52-bit sets), how many of those are still to come, the way it goes
        #: through the piles (1 up, -1 down, 0 not known yet)]
        self.streams: list[list[int]] = []

    def _union(self, piles: int) -> int:
        """The faces of a set of two or more piles (a 52-bit set), kept for the shoe: the
        card loop takes one pile's faces, or a set it kept already, itself."""
        got = 0
        faces = self._pile_faces
        rest = piles & self._all
        while rest:
            low = rest & -rest
            got |= faces[low.bit_length() - 1]
            rest ^= low
        self._faces_of[piles] = got
        return got

    @property
    def value(self) -> float:
        """The statistic: ``ln`` of the mixture's product (at most the largest of the
        predictors' ``logs``, at least that less ``ln 3``)."""
        logs = self.logs
        top = max(logs)
        return top + math.log(sum(math.exp(v - top) for v in logs)) - _LOG_MIX

    def step(self, f: int) -> float | None:
        """One card of face ``f`` (the evidence's replay, with ``explain``: see ``hit`` and
        ``chance``): an upper bound of the statistic after it (None: skipped, see
        :meth:`run`)."""
        before = self.n
        self.run((f,), math.inf)
        return max(self.logs) if self.n < before else None

    def run(self, faces: Sequence[int], threshold: float) -> int | None:
        """Cards of these faces, in turn: the index of the one at which the statistic
        (:attr:`value`) reached ``threshold``, or None. A face the pack holds no more
        cards of is skipped, as by the other tests.

        The statistic is at most the largest of the predictors' ``logs`` (and at least
        that less ``ln 3``), so the mixture is only worked out when that reaches the
        threshold. Everything a card needs is in local variables (a Python step per card
        is the test's whole cost: docs/shuffle-screening.md, "Cost")."""
        counts = self.counts
        n = self.n
        left = self._left
        streams = self.streams
        logs = self.logs
        piles_of = self._piles_of
        pile_faces = self._pile_faces
        every = self._all
        memo = self._faces_of
        union_of = self._union
        explain = self.explain
        l0, l1, l2 = logs
        crossed: int | None = None
        for at, f in enumerate(faces):
            c = counts[f]
            if not c:
                continue
            bit = 1 << f
            best = -1
            if streams:
                if explain:  # (the two packets last followed: a riffle's two at a time)
                    union = 0
                    for st in streams[:EXPLAINED]:
                        union |= st[2]
                    self.hit = bool(union >> f & 1)
                    self.chance = sum(counts[g] for g in range(FACES) if union >> g & 1) / n
                mass = 0.0
                sharpest = 0
                i = 0
                for st in streams:
                    if st[2] & bit:  # it predicted f: k ≥ 1 of its faces are still to come
                        k = st[3]
                        mass += WEIGHTS[i] / k
                        if best < 0 or k < sharpest:
                            best, sharpest = i, k
                        if c == 1:  # the face's last card
                            st[3] = k - 1
                    i += 1
                # per share e: q(f) · n / c, the predictor's chance of this card over
                # its fair chance
                if best >= 0:
                    ratio = mass * n * _NORM[i] / c
                    l0 += math.log(_F0 * ratio + _E0)
                    l1 += math.log(_F1 * ratio + _E1)
                    l2 += math.log(_F2 * ratio + _E2)
                else:
                    l0 += _L0
                    l1 += _L1
                    l2 += _L2
            else:
                self.hit = False
                self.chance = 0.0
            counts[f] = c - 1
            if c == 1:
                left ^= bit
            n -= 1
            mine = piles_of[f]
            if best >= 0:
                s = streams[best]
                if best:
                    del streams[best]
                    streams.insert(0, s)
                piles = s[0]
                if piles & mine:  # the packet goes on in its piles
                    piles &= mine
                    s[1] |= bit
                else:  # into the pile beside: the way it goes through them, once known
                    up = mine & (piles << 1) if s[4] >= 0 else 0
                    down = mine & (piles >> 1) if s[4] <= 0 else 0
                    piles = up | down
                    s[1] = bit
                    s[4] = 0 if up and down else 1 if up else -1
                s[0] = piles
            elif mine:
                if len(streams) >= STREAMS:
                    streams.pop()
                piles = mine
                s = [mine, bit, 0, 0, 0]
                streams.insert(0, s)
            else:  # a face the last shoe never read: no pile to follow
                if l0 >= threshold or l1 >= threshold or l2 >= threshold:
                    crossed = at
                    break
                continue
            # the stream's prediction: its piles' faces it has not taken, and the next
            # pile's (on its way, once known)
            way = s[4]
            beside = ((piles << 1 if way >= 0 else 0) | (piles >> 1 if way <= 0 else 0)) \
                & ~piles & every
            own = (pile_faces[piles.bit_length() - 1] if not piles & (piles - 1)
                   else memo.get(piles) or union_of(piles))
            near = (0 if not beside else pile_faces[beside.bit_length() - 1]
                    if not beside & (beside - 1) else memo.get(beside) or union_of(beside))
            predicted = (own & ~s[1]) | near
            s[2] = predicted
            s[3] = (predicted & left).bit_count()
            if l0 >= threshold or l1 >= threshold or l2 >= threshold:
                self.logs = [l0, l1, l2]
                if self.value >= threshold:
                    crossed = at
                    break
        self.logs = [l0, l1, l2]
        self.n = n
        self._left = left
        return crossed


_F0, _F1, _F2 = (1 - e for e in ELSEWHERE)
_L0, _L1, _L2 = _LOG_ELSEWHERE
