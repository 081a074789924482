"""Shuffle screening: is the order the shoe deals consistent with a shuffled pack?

The controller sees the order of every card it deals, and it knows the order the pack
was in before the shuffle: new-deck order after a composition check, the previous shoe's
discard pile after a shoe. A pack that was not shuffled, only cut, riffled once or twice,
or shuffled around a slug kept from the last shoe deals cards that follow that reference
order far more often than chance allows. This package measures that, exactly, on faces
(a multi-deck pack has twins), as sequential tests whose false-alarm rate is bounded by
construction (docs/shuffle-screening.md).

It is pure: no clock, no randomness, no I/O. The engine feeds it cards, round ends and
shoe boundaries; replaying a log replays every decision.

- :mod:`.faces` — card ⇄ face index, the packed bit fields the statistics count with;
- :mod:`.reference` — the reference orders and their adjacency relations;
- :mod:`.sequential` — the sequential tests (CUSUM of successor runs, mixture SPRT of
  rising-sequence continuations, the shelf test's predictor) and their thresholds;
- :mod:`.packets` — the packet test: riffled packets of the last shoe's discards,
  followed through their piles;
- :mod:`.screen` — :class:`ShuffleScreen`, what the engine holds: the tests run card by
  card over batches (and a card-by-card reference path that decides the same);
- :mod:`.evidence` — the :class:`Finding` it reports, with the run of cards that gave the
  order away, replayed when a test fires;
- :mod:`.rising` — the exact Bayer–Diaconis distribution of rising sequences after riffle
  shuffles (the literature the riffle test rests on, checked against the published table).
"""

from controller import native

native.prefer_source(__name__)  # (before the imports: a stale compiled module never runs)

from controller.screening.evidence import Finding  # noqa: E402
from controller.screening.screen import ScreenSettings, ShuffleScreen  # noqa: E402

__all__ = ["Finding", "ScreenSettings", "ShuffleScreen"]
