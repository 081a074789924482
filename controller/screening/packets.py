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
most recently fed weighing most, :data:`WEIGHTS`), each stream's share split between the
faces of its own piles it has not taken and those of the piles beside them, evenly over
the faces of each that are still to come, and ``e`` over all the cards still to come in
proportion to their counts (three such predictors, one per share ``e``, mixed; the split
and the shares: :data:`PREDICTORS`)
— held against the exact chance ``c_f / n`` under a fair shuffle. (Evenly over faces,
not cards: how many faces of a set are left is one ``bit_count`` of two 52-bit sets,
where the cards would be a sum over the set's faces at every card.) Whatever the
streams, each predictor's chances sum to at most 1, so under a fair shuffle the product
of ``q(f) · n / c_f`` is a supermartingale and Ville's inequality bounds it from the
shoe's first card: threshold ``ln(1/α_i)``. Everything is fixed before the card is read;
the streams are then fed with it (the stream that predicted it most sharply takes it,
or it starts a new one in place of the stalest).

A test whose three products have all fallen to ``e^-stop`` (the profile's
``packet_stop``) follows that shoe no further: Wald's second boundary. A stopped test
cannot reach the threshold, so the false-alarm bound holds; a riffled pack's statistic
was never seen that low before it was found (docs/shuffle-screening.md, test 4).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from mypy_extensions import i64, mypyc_attr

from controller.screening.faces import FACES

STREAMS: Final = 8
"""Packets followed at once: the four runs two riffles leave, and as many again for the
streams a packet's start, a card the cut card kept back or a twin sets off on a wrong
track (measured: 4 streams caught 2 riffles of the discards in 37–49 of 100 baccarat and
deep-cut blackjack shoes, 8 in 78–89; 1 riffle in every shoe either way)."""
WEIGHTS: Final[tuple[float, ...]] = (0.25, 0.2, 0.15, 0.12, 0.1, 0.08, 0.06, 0.04)
"""The streams' shares of the prediction, the most recently fed first: a riffle's next
card continues one of the packets that fed the last few cards. (Typed as a tuple of any
length: compiled, a tuple of eight is kept as eight C doubles, and reading one at a
variable index built the whole tuple again, eight floats and a tuple, at every stream
that predicted a card.)"""
PREDICTORS: dict[int, tuple[float | None, tuple[float, float, float]]] = {
    1: (None, (0.1, 0.3, 0.6)),
    2: (0.8, (0.1, 0.4, 0.7)),
}
"""The predictors, by the number a profile names (``[shuffle_screen] packet_predictor``,
recorded in the log's header, so that a log replays with the predictor that decided it):
``(own, elsewhere)``.

``elsewhere``: the share of the prediction over every card still to come — a packet's
start, a card the streams lost, the cards never read in the last shoe (one block whose
order nothing tells: up to half the pack where the cut card lies deep) — is unknown, so
the test mixes three predictors, one per share, with equal weights: a mixture of
supermartingales is one (its value is ``ln`` of the mean of their products).

``own``: a stream's share on the faces of its own piles it has not taken, the rest on the
faces only the piles beside them hold (while both sets hold faces still to come); the
stream whose chance of the card was highest takes it. None (predictor 1): evenly over all
of them, and the stream with the fewest faces takes the card. A packet takes a pile's
cards before it moves to the next pile (a pile lies together in the discards), so where
the packet is weighs most; the share beside is for the packet's end of the pile (the
cards it has not taken went to the packet before it, or were dealt already). Evenly, the
piles beside — often more faces — took most of a stream's share.

Measured (2 riffles of the discards, 200 shoes in each of the six profiles that hold the
last shoe; `benchmarks/shuffle_screen.py`'s shapes and seeds, and in brackets fresh ones
the tuning never saw): predictor 1 caught 976 of 1,200 (987); ``own`` 0.8 alone 1,143;
with the shares (0.1, 0.4, 0.7) 1,162 (1,154); with the sharpest stream taking the card,
predictor 2, 1,183 (1,185). ``own`` from 0.7 to 0.9 and shares from (0.1, 0.3, 0.6) to
(0.2, 0.45, 0.75) move it by less than 1 %."""

EXPLAINED: Final = 2
"""The evidence's count: how often a card went where one of the two packets last followed
goes next (against its chance under a fair shuffle). The statistic weighs every stream; the
count is what a pit boss can read: a riffle deals from two packets at a time."""

def popcount(face_set: int) -> int:
    """How many faces a 52-bit face set holds: ``int.bit_count``, which a compiled module
    calls as a Python method (a tenth of the test's time per card), spelt as the classic
    sum of bits in parallel on a machine word (``i64``: compiled, C arithmetic; the
    sources run it as Python integers, slower than the method)."""
    x = i64(face_set)
    x -= x >> 1 & 0x5555555555555
    x = (x & 0x3333333333333) + (x >> 2 & 0x3333333333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F
    x += x >> 8
    x += x >> 16
    x += x >> 32
    return int(x & 0x7F)


_LOG_MIX: Final = math.log(3)  # (three shares a predictor)
#: per number of streams, 1 / the sum of their weights
_NORM: Final = (0.0, *(1 / sum(WEIGHTS[:k], 0.0) for k in range(1, STREAMS + 1)))


# compiled (controller/native.py): pickled and copied as in Python (engine snapshots);
# allow_interpreted_subclasses works round mypyc 2.4, whose serializable classes skip
# their __init__ when made from Python code
@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Stream:
    """One packet followed through the discards (see :class:`PacketTest`). A class of its
    own, not a list: compiled (controller/native.py), its fields are C integers."""

    __slots__ = ("k", "kb", "near", "piles", "predicted", "taken", "way")

    def __init__(self, piles: int, taken: int) -> None:
        self.piles = piles  # the piles it can be in (a bitmask over pile numbers)
        self.taken = taken  # the faces it took from them (a 52-bit set)
        self.predicted = 0  # the faces it predicts next (a 52-bit set) …
        self.k = 0  # … and how many of them are still to come
        self.way = 0  # the way it goes through the piles: 1 up, -1 down, 0 not known yet
        self.near = 0  # the faces it predicts only beside its piles (predictor 2 only) …
        self.kb = 0  # … and how many of them are still to come


# compiled (controller/native.py): pickled and copied as in Python (engine snapshots);
# allow_interpreted_subclasses works round mypyc 2.4, whose serializable classes skip
# their __init__ when made from Python code
@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class PacketTest:
    """The packet test over one shoe (see the module docstring). ``piles_of[f]``: the
    bitmask of the discards' piles holding a card of face ``f``; ``pile_faces[i]``: pile
    ``i``'s faces as a 52-bit set; ``decks``: copies of each face in the pack;
    ``predictor``: which of :data:`PREDICTORS`."""

    def __init__(self, piles_of: Sequence[int], pile_faces: Sequence[int], decks: int,
                 predictor: int = 1, stop: float | None = None) -> None:
        self.own, self.elsewhere = PREDICTORS[predictor]
        #: the futility bound (:meth:`run`): the test stops for the shoe once every
        #: predictor's ``ln`` product is at or below ``-stop`` (None: it never stops)
        self._floor = -math.inf if stop is None else -stop
        self.stopped = False
        # per share e: 1 − e, and ln e (a card no stream predicted)
        self._f = tuple(1 - e for e in self.elsewhere)
        self._l = tuple(math.log(e) for e in self.elsewhere)
        # (tuples, typed so: compiled, an item is read at a C index; a Sequence's goes
        # through a Python call with the index made an object, which allocates past 256:
        # about 1,400 instructions a blackjack card)
        self._piles_of: tuple[int, ...] = tuple(piles_of)
        self._pile_faces: tuple[int, ...] = tuple(pile_faces)
        self._all = (1 << len(pile_faces)) - 1
        self._faces_of: dict[int, int] = {}
        self.counts = [decks] * FACES
        #: per face, a new stream's prediction (faces of its piles, of those beside), once
        #: a stream has started with it (-1: none yet)
        self._fresh_own = [-1] * FACES
        self._fresh_near = [-1] * FACES
        self._left = (1 << FACES) - 1  # the faces with a card still to come
        self.n = decks * FACES
        self.logs = [0.0] * 3  # ln of each share's product
        #: work out ``hit`` and ``chance`` at each card (the evidence only): did the card go
        #: where one of the :data:`EXPLAINED` packets last followed goes next, and the chance
        #: of that under a fair shuffle
        self.explain = False
        self.hit = False
        self.chance = 0.0
        #: the packets followed, the most recently fed first
        self.streams: list[Stream] = []

    def _prediction(self, piles: int, way: int, taken: int) -> tuple[int, int]:
        """A stream's prediction (52-bit face sets): the faces of its piles it has not
        taken, and those of the next pile on its way (both ways while it is not known)
        that are not among the first.

        One pile (where a packet is once found, and every hand's card when hands are held
        in order): the piles beside are its neighbours, read by their numbers. The shifts
        and masks of the general case are operations on a long integer, each of which
        allocates, and the faces of two neighbours a set looked up or made (about 1,100
        instructions a blackjack card)."""
        if piles and not piles & (piles - 1):
            p = piles.bit_length() - 1
            pile_faces = self._pile_faces
            own = pile_faces[p] & ~taken
            near = 0
            if way >= 0 and p + 1 < len(pile_faces):
                near = pile_faces[p + 1]
            if way <= 0 and p:
                near |= pile_faces[p - 1]
            return own, near & ~own
        beside = ((piles << 1 if way >= 0 else 0) | (piles >> 1 if way <= 0 else 0)) \
            & ~piles & self._all
        own = self._faces(piles) & ~taken
        return own, (self._faces(beside) & ~own if beside else 0)

    def _fresh(self, piles: int, f: int) -> tuple[int, int]:
        """A new stream's prediction: :meth:`_prediction` of ``piles``, the piles holding
        face ``f`` (up to eight), having taken ``f``, its way not known. Their numbers are
        read from the long integer once, and the faces of each and of its neighbours
        looked up by number: the general case's shifts and masks allocate at every step,
        and its two unions were made for sets seldom asked for again (on blackjack, where
        each card of a hand held in order is a pile, about 1,500 instructions a card of
        the test's ~8,500; callgrind, 29 Nov 2026)."""
        faces = self._pile_faces
        n = len(faces)
        mine = 0
        beside = 0
        data = piles.to_bytes((piles.bit_length() + 7) >> 3, "little")
        for k in range(len(data)):
            byte = data[k]
            while byte:
                low = byte & -byte
                i = (k << 3) + low.bit_length() - 1
                byte ^= low
                if i >= n:
                    continue
                mine |= faces[i]
                if i and not faces[i - 1] >> f & 1:
                    beside |= faces[i - 1]
                if i + 1 < n and not faces[i + 1] >> f & 1:
                    beside |= faces[i + 1]
        own = mine & ~(1 << f)
        return own, beside & ~own

    def _faces(self, piles: int) -> int:
        """The faces of a set of piles (one pile's, or those of several, kept for the
        shoe)."""
        if not piles & (piles - 1):
            return self._pile_faces[piles.bit_length() - 1]
        return self._faces_of.get(piles) or self._union(piles)

    def _union(self, piles: int) -> int:
        """The faces of a set of two or more piles (a 52-bit set), kept for the shoe: the
        card loop takes one pile's faces, or a set it kept already, itself.

        A shoe has more piles than a machine word has bits, so ``piles`` is often a long
        integer, each operation on which allocates: it is read as bytes, once (compiled,
        the bits of a byte are machine integers)."""
        got = 0
        faces = self._pile_faces
        rest = piles & self._all
        data = rest.to_bytes((rest.bit_length() + 7) >> 3, "little")
        for i in range(len(data)):
            byte = data[i]
            while byte:
                low = byte & -byte
                got |= faces[(i << 3) + low.bit_length() - 1]
                byte ^= low
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
        is the test's whole cost: docs/shuffle-screening.md, "Cost").

        A test that has stopped (every predictor at or below the futility bound) takes
        no more cards: None."""
        if self.stopped:
            return None
        counts = self.counts
        n = self.n
        left = self._left
        floor = self._floor
        streams = self.streams
        logs = self.logs
        piles_of = self._piles_of
        fresh_own, fresh_near = self._fresh_own, self._fresh_near
        explain = self.explain
        l0, l1, l2 = logs
        f0, f1, f2 = self._f
        e0, e1, e2 = self.elsewhere
        m0, m1, m2 = self._l
        split = self.own is not None
        own_share = self.own or 1.0
        beside_share = 1 - own_share
        crossed: int | None = None
        # (a list, typed so: compiled, a card's face is read at a C index, not through a
        # Python call with the index made an object)
        cards: list[int] = faces if isinstance(faces, list) else list(faces)
        for at in range(len(cards)):
            f = cards[at]
            c = counts[f]
            if not c:
                continue
            bit = 1 << f
            best = -1
            if streams:
                if explain:  # (the two packets last followed: a riffle's two at a time)
                    union = 0
                    for st in streams[:EXPLAINED]:
                        union |= st.predicted
                    self.hit = bool(union >> f & 1)
                    self.chance = sum(counts[g] for g in range(FACES) if union >> g & 1) / n
                mass = 0.0
                sharpest = 0.0
                i = 0
                for st in streams:
                    if st.predicted & bit:  # it predicted f: k ≥ 1 of its faces are still to come
                        # u: 1 / the stream's chance of f (of its faces, k in all: kb
                        # beside its piles, own_share on the others if both are left)
                        k = st.k
                        u = float(k)
                        if split:
                            kb = st.kb
                            if st.near & bit:  # beside its piles
                                if k > kb:
                                    u = kb / beside_share
                                if c == 1:  # the face's last card
                                    st.kb = kb - 1
                            elif kb:
                                u = (k - kb) / own_share
                        mass += WEIGHTS[i] / u
                        if best < 0 or u < sharpest:  # the sharpest takes the card
                            best, sharpest = i, u
                        if c == 1:
                            st.k = k - 1
                    i += 1
                # per share e: q(f) · n / c, the predictor's chance of this card over
                # its fair chance
                if best >= 0:
                    ratio = mass * n * _NORM[i] / c
                    l0 += math.log(f0 * ratio + e0)
                    l1 += math.log(f1 * ratio + e1)
                    l2 += math.log(f2 * ratio + e2)
                else:
                    l0 += m0
                    l1 += m1
                    l2 += m2
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
                piles = s.piles
                if piles & mine:  # the packet goes on in its piles
                    piles &= mine
                    s.taken |= bit
                else:  # into the pile beside: the way it goes through them, once known
                    up = mine & (piles << 1) if s.way >= 0 else 0
                    down = mine & (piles >> 1) if s.way <= 0 else 0
                    piles = up | down
                    s.taken = bit
                    s.way = 0 if up and down else 1 if up else -1
                s.piles = piles
                own, near = self._prediction(piles, s.way, s.taken)
            elif mine:
                if len(streams) >= STREAMS:
                    streams.pop()
                s = Stream(mine, bit)
                streams.insert(0, s)
                # a new stream's prediction (its piles are the face's, it took the face, its
                # way is not known) depends on the face alone: worked out the first time the
                # face starts one — most cards of a fair shoe do, and the piles of a face
                # are a long integer, each operation on which allocates
                own = fresh_own[f]
                if own < 0:
                    own, near = self._fresh(mine, f)
                    fresh_own[f] = own
                    fresh_near[f] = near
                else:
                    near = fresh_near[f]
            else:  # a face the last shoe never read: no pile to follow
                if l0 >= threshold or l1 >= threshold or l2 >= threshold:
                    self.logs = [l0, l1, l2]
                    if self.value >= threshold:  # (the mixture, as below)
                        crossed = at
                        break
                continue
            predicted = own | near
            s.predicted = predicted
            s.k = popcount(predicted & left)
            if split:  # (predictor 1 spreads its share over both alike)
                s.near = near
                s.kb = popcount(near & left)
            if l0 >= threshold or l1 >= threshold or l2 >= threshold:
                self.logs = [l0, l1, l2]
                if self.value >= threshold:
                    crossed = at
                    break
            elif l2 <= floor and l1 <= floor and l0 <= floor:
                self.stopped = True  # futile: the rest of the shoe is not followed
                break
        self.logs = [l0, l1, l2]
        self.n = n
        self._left = left
        return crossed

