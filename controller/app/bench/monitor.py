"""Watching a bench run: the progress it prints, and the watch for a run that cannot finish.

:class:`Progress` is the engine thread's display (a line per shoe or block, each
deviation as it comes, the time of the first card). :func:`watch` is the main thread's
loop while the runtime deals: it moves the progress bar and stops the run when the
console channel failed, the simulator died or nothing moved for ``--stall-timeout``
seconds; :func:`why_stopped` names why a run ended before its day did.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import IO

from controller.app.bench.child import Simulator
from controller.app.runtime import TableRuntime
from controller.app.sequencing import BenchSequencer
from controller.deviations import Deviation
from controller.events import CardDrawn, Event
from controller.outputs import Output
from controller.progressbar import ProgressBar
from controller.screening.evidence import run_text
from controller.session import TableSession


class Progress:
    """The engine thread's display: a line per shoe (or block), each deviation as it comes."""

    def __init__(self, session: TableSession, out: IO[str], *, expect: Iterable[str],
                 block: int, every_round: bool) -> None:
        self.session = session
        self.out = out
        self.expect = set(expect)
        self.block = max(1, block)
        self.every_round = every_round
        self.shoe = session.engine.shoe
        self.mark = (session.tally.rounds, session.tally.cards, sum(
            session.tally.deviations.values()))
        self.unit_start = self.shoe
        self.first_card: float | None = None  # when the first card was fed (monotonic)

    def __call__(self, event: Event, outputs: list[Output], line: int | None) -> None:
        if self.first_card is None and isinstance(event, CardDrawn):
            self.first_card = time.monotonic()
        for o in outputs:
            if isinstance(o, Deviation):
                tag = " (expected)" if o.code in self.expect else ""
                where = f"input {line}" if line is not None else event.type
                self.out.write(f"  ! {where}: {o.code} [{o.severity}] {o.message} "
                               f"({o.rule}){tag}\n")
                run = run_text(o.evidence)
                if run:  # (a SHUFFLE_SUSPECT: the cards that gave the order away)
                    self.out.write(f"    {run}\n")
        shoe = self.session.engine.shoe
        if shoe != self.shoe:
            if not self.every_round or (shoe - 1) % self.block == 0:
                self._line(self.shoe)
            self.shoe = shoe

    def _line(self, upto: int) -> None:
        t = self.session.tally
        rounds, cards, devs = (t.rounds - self.mark[0], t.cards - self.mark[1],
                               sum(t.deviations.values()) - self.mark[2])
        if upto <= 0 and not cards:
            return
        if self.every_round:
            first = self.unit_start if self.unit_start > 0 else 1
            what = f"block {(upto - 1) // self.block + 1} (shuffles {first}-{upto})"
        else:
            what = f"shoe {upto}"
        self.out.write(f"{what}: {rounds} round(s), {cards} card(s), {devs} deviation(s)\n")
        self.out.flush()
        self.mark = (t.rounds, t.cards, sum(t.deviations.values()))
        self.unit_start = upto + 1

    def finish(self) -> None:
        t = self.session.tally
        if (t.rounds, t.cards) != self.mark[:2]:
            self._line(self.session.engine.shoe)


def watch(runtime: TableRuntime, sequencer: BenchSequencer, sim: Simulator, bar: ProgressBar,
          console_failed: list[str], stall_timeout: float) -> str | None:
    """Wait for the started runtime to finish; stop it (and return why) if the console
    channel failed, the simulator exited or nothing moved for ``stall_timeout`` seconds."""
    failure: str | None = None
    last = (-1, -1)
    last_change = time.monotonic()
    while not runtime.wait(0.1):
        now = time.monotonic()
        mark = (sequencer.ordinal, runtime.stats.fed)
        bar.update(sequencer.ordinal)
        if mark != last:
            last, last_change = mark, now
        if console_failed:
            failure = console_failed[0]
        elif sim.exited() is not None:
            failure = (f"the simulator exited (status {sim.exited()}) before the "
                       "day ended: " + "; ".join(list(sim.stderr)[-3:]))
        elif now - last_change > stall_timeout:
            failure = f"no progress for {stall_timeout:g} s"
        if failure is not None:
            runtime.request_stop(failure)
            runtime.wait(10)
            break
    runtime.join(10)
    return failure


def why_stopped(runtime: TableRuntime, sequencer: BenchSequencer,
                failure: str | None) -> str | None:
    """Why the run failed (None: it did not): the watch's reason, the controller's error,
    or a stop before the day ended, with what the sequencer was still waiting for."""
    if runtime.error is not None:
        failure = f"the controller stopped on an error: {runtime.error}"
    elif failure is None and not sequencer.ended:
        failure = f"stopped before the day ended ({runtime.stop_reason})"
    if failure is not None and not sequencer.ended:
        waiting = sequencer.waiting_for()
        if waiting:
            failure += f"; waiting for {waiting}"
    return failure
