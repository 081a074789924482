"""``shoewarden bench``: the controller against simulated devices on virtual serial ports.

::

    shoewarden bench --profile NAME [--shoes N] [--rounds-per-block N] [--seed S]
                     [--scenario FILE] [--log FILE|DIR] [--pace S] [--durability P]

1. The simulated table (``python -m simulators.pty_host``) starts in a **child process**:
   shoe, scanner and shuffler on ptys, the simulated dealer's console on a FIFO.
2. The controller's real drivers open those ports with pyserial exactly as they would
   open ``/dev/ttyUSB0`` (each under a :class:`~drivers.supervisor.Supervisor`); the
   console channel is read by a thread; what the drivers make and the console lines are
   put in step order by the :class:`~controller.app.sequencing.ConsoleMerger`
   (:class:`~controller.app.sequencing.BenchSequencer`) and fed by the
   :class:`~controller.app.runtime.TableRuntime`'s engine thread through the audit log.
3. A progress line per shoe (per block of ``rounds_per_block`` rounds where every round is
   shuffled, as in stud poker), each deviation as it happens, then a summary: shoes,
   rounds, cards, deviations by code, device faults, reconnects, protocol errors, and the
   **card check**: every card the simulated devices reported leaving them is in the audit
   log once, in order (no card lost, none counted twice).

Exit status: 0 the day completed, the card check holds and every deviation is one the
scenario expects (``expect``; with no scenario: none at all); 1 a deviation the scenario
did not expect, or the card check failed; 2 bad input (profile, scenario, log that holds
another day); 3 the run did not complete (the simulator died, no progress for
``--stall-timeout`` seconds, the controller stopped on an error).

**Clock.** Every event is stamped on the simulated dealer's clock: console events and the
devices' step messages carry the scripted ``t`` (the console's ``attach``); events the
script does not know (faults, diagnostics, connections) get the dealer's clock of the
moment (the last scripted ``t``). So a bench log is reproducible: same profile, seed and
scenario, same log (up to the writer's own ``ts``, and link events whose timing decides).

**Resume.** The simulated day is deterministic by seed. Each scripted input (one the day's
steps and device messages produce, in the merger's order) is logged with ``line`` = its
number in the day (1-based); events the script does not know have no ``line``. A bench
started on a log that already holds part of the same day (same profile, seed, scenario
and plan, from the header) recovers it (``controller.audit.recovery.recover``: torn tail
cut, session rebuilt), starts the simulator over, and skips every scripted input up to
the highest ``line`` in the log: the day continues from the first input not yet durable.
The link faults the rebuilt engine still has open are given back to the drivers (cleared
by the next handshake); a ``CONTROLLER_ERROR`` is cleared (``device_ok``: there is no
person at a bench). Exact for days whose device events do not depend on timing (no
``time`` trigger, no refused device).

The package follows the run: :mod:`.options` (what the command takes, exit codes),
:mod:`.setup` (profile, scenario, seed, the audit log new or resumed), :mod:`.seeds`
(the seed commitment), :mod:`.child` (the simulated table in a child process, its
console channel), :mod:`.monitor` (progress and the watch for a stall or a dead
simulator), :mod:`.logfacts` (what the log says), :mod:`.verdict` (the card check, the exit
status, the summary) and :mod:`.runner` (``run_bench``: setup, monitor, verdict in turn).
"""

from controller.app.bench.child import Simulator, console_reader
from controller.app.bench.logfacts import LogFacts, read_log_facts
from controller.app.bench.monitor import Progress
from controller.app.bench.options import (
    EXIT_BAD_INPUT,
    EXIT_DEVIATION,
    EXIT_FAILED,
    EXIT_OK,
    BenchError,
    BenchOptions,
)
from controller.app.bench.runner import cmd_bench, run_bench
from controller.app.bench.seeds import seed_file
from controller.app.bench.verdict import BenchResult, print_summary
from controller.app.sequencing import BenchSequencer
from controller.audit.seeds import seed_commitment

__all__ = [
    "EXIT_BAD_INPUT", "EXIT_DEVIATION", "EXIT_FAILED", "EXIT_OK", "BenchError", "BenchOptions",
    "BenchResult", "BenchSequencer", "LogFacts", "Progress", "Simulator", "cmd_bench",
    "console_reader", "print_summary", "read_log_facts", "run_bench", "seed_commitment",
    "seed_file",
]
