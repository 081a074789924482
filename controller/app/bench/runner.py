"""``run_bench``: a bench run is its setup, the dealing under the monitor, then the verdict.

:func:`run_bench` keeps only the order of the steps and what must happen whatever goes
wrong between them: the child process stopped, the seed revealed once the day has ended,
the session closed, the table's log released. :func:`cmd_bench` is the command.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO, Any

from controller.app.bench.child import Simulator, console_reader, simulator_argv
from controller.app.bench.monitor import Progress, watch, why_stopped
from controller.app.bench.options import DRIVERS, EXIT_FAILED, BenchError, BenchOptions
from controller.app.bench.seeds import reveal_seed
from controller.app.bench.setup import BenchDay, prepare
from controller.app.bench.verdict import BenchResult, judge, print_summary
from controller.app.runtime import CONTROLLER, CONTROLLER_ERROR, TableRuntime
from controller.app.sequencing import BenchSequencer
from controller.audit import AuditLogError
from controller.events import DeviceOk
from controller.progressbar import ProgressBar, wanted
from drivers.errors import DeviceError
from drivers.registry import create_drivers
from drivers.supervisor import Backoff

BENCH_BACKOFF = Backoff(initial=0.2, factor=2.0, cap=2.0)


def _announce(d: BenchDay, out: IO[str]) -> None:
    profile, plan = d.profile, d.plan
    out.write(f"bench: profile {profile.name}, seed {d.seed}"
              + (f", scenario {d.scenario.name}" if d.scenario is not None else "")
              + f", {plan.shoes} shoe(s)"
              + (f" (blocks of {plan.rounds_per_block} rounds)"
                 if profile.shuffler_mode or profile.shuffle.every_round else "")
              + f"; {len(d.day.steps)} steps; log {d.path}\n")
    out.flush()


def _display(d: BenchDay, opts: BenchOptions, out: IO[str]) -> Any:
    """The dealer display (``--display``), served from this process, reading the log."""
    if opts.display is None:
        return None
    from floor.display import DisplayError, display_for_log

    try:
        shown = display_for_log(d.path, opts.display)
    except DisplayError as e:
        d.hold.release()
        raise BenchError(str(e)) from None
    out.write(f"bench: dealer display at {shown.url}\n")
    out.flush()
    return shown


def _forwarder(d: BenchDay, opts: BenchOptions, out: IO[str]) -> Any:
    """The forwarder (``--publish``): the log to NATS JetStream from a child process of its
    own (``floor.forward_process``: no GIL shared with the engine thread)."""
    if not opts.publish:
        return None
    from floor.forward import ForwardError, connection_from
    from floor.forward_process import forwarder_process_for_log

    def say(line: str) -> None:
        sys.stderr.write(f"bench: {line}\n")
        sys.stderr.flush()

    try:
        fwd = forwarder_process_for_log(d.path, connection_from(opts), say=say)
    except ForwardError as e:
        d.hold.release()
        raise BenchError(str(e)) from None
    out.write(f"bench: publishing the log to {', '.join(fwd.connection.servers)}"
              + (" (disclosure shoe: each shoe once it ended)"
                 if fwd.connection.disclosure == "shoe" else "") + "\n")
    out.flush()
    return fwd


def _witness_listener(d: BenchDay, opts: BenchOptions, runtime: TableRuntime) -> Any:
    """``--witness-from``: the floor's checkpoints of this table's chain into its log."""
    from controller.app.witness_in import listen
    from floor.forward import ForwardError

    try:
        return listen(d.path, opts, runtime)
    except ForwardError as e:
        raise BenchError(str(e)) from None


def run_bench(opts: BenchOptions, out: IO[str] | None = None) -> BenchResult:
    """The whole bench run; raises :class:`BenchError` for bad input or a failed start."""
    begun = time.monotonic()
    out = out or sys.stdout
    d = prepare(opts, out)
    result = BenchResult(EXIT_FAILED, d.profile.name, d.seed, d.scenario_name, log=d.path,
                         resumed_at=d.skip)
    _deal(d, opts, out, result, begun)
    return judge(result, d.session, d.path, d.dealer, d.scenario)


def _deal(d: BenchDay, opts: BenchOptions, out: IO[str], result: BenchResult,
          begun: float) -> None:
    """Start the simulated table, connect the drivers, deal the day under the monitor;
    then clean up, whatever happened."""
    profile, plan, session = d.profile, d.plan, d.session
    argv = simulator_argv(d.profile_arg, d.seed, plan, d.scenario, opts.pace)
    _announce(d, out)
    shown = _display(d, opts, out)
    fwd = _forwarder(d, opts, out)
    sim = None
    witness_in = None
    stop_console = threading.Event()
    # a bar over the day's steps on a terminal (a day of many shoes runs for minutes);
    # the per-shoe lines print above it
    bar = ProgressBar(enabled=wanted(opts.no_progress), total=len(d.day.steps), unit="steps")
    try:
        bar.__enter__()
        bar.task(f"dealing {plan.shoes} shoe(s)" if not (
            profile.shuffler_mode or profile.shuffle.every_round) else
            f"dealing {plan.shoes} block(s)")
        sim = Simulator(argv, verbose=opts.verbose)
        ports = sim.ports(opts.startup_timeout)
        config = {"devices": {name: {"driver": DRIVERS[name], "port": port}
                              for name, port in ports.items() if name in DRIVERS},
                  "allowlist": d.day.allowlist()}
        try:
            drivers = create_drivers(config)
        except (DeviceError, ValueError) as e:
            raise BenchError(f"cannot build the drivers: {e}", EXIT_FAILED) from e
        sequencer = BenchSequencer(d.skip, start_t=str(d.opening["t"]))
        progress = Progress(session, bar.printer(out),
                            expect=d.scenario.expect if d.scenario else (),
                            block=plan.rounds_per_block,
                            every_round=profile.shuffle.every_round)
        runtime = TableRuntime(session, devices=drivers,
                               driver_names={n: DRIVERS[n] for n in drivers},
                               sequencer=sequencer, on_fed=progress,
                               stop_when=lambda: sequencer.ended, restore_faults=d.restore,
                               backoff=BENCH_BACKOFF)
        witness_in = _witness_listener(d, opts, runtime)
        if d.clear_controller:
            runtime.post_event(DeviceOk(device=CONTROLLER, code=CONTROLLER_ERROR,
                                        detail="bench restarted"))
        console_failed: list[str] = []
        console_reader(ports["console"], runtime, stop_console, console_failed)
        started = time.monotonic()
        cards_before = session.tally.cards
        runtime.start()
        result.failure = watch(runtime, sequencer, sim, bar, console_failed,
                               opts.stall_timeout)
        result.elapsed = time.monotonic() - started
        result.fed_cards = session.tally.cards - cards_before
        result.failure = why_stopped(runtime, sequencer, result.failure)
        progress.finish()
        if progress.first_card is not None:
            result.first_card_s = progress.first_card - begun
        result.sim_cards = (sequencer.cards or {}).get(d.dealer, []) if sequencer.ended \
            else None
    finally:
        bar.__exit__(None, None, None)
        if witness_in is not None:
            witness_in.stop()
        if shown is not None:
            shown.stop()
        stop_console.set()
        if sim is not None:
            sim.stop()
        try:
            if result.sim_cards is not None:  # the simulated day ended: every card is out
                reveal_seed(session, d.seed, d.nonce)
            session.close()  # under 'none' the last batch of records is written here
        except (AuditLogError, OSError) as e:
            result.failure = result.failure or f"the audit log could not be written: {e}"
        finally:
            if fwd is not None:  # the day's last records too, as far as the broker takes them
                out.write(f"bench: {fwd.finish()}\n")
            d.hold.release()


def cmd_bench(args: Any) -> int:
    opts = BenchOptions(profile=args.profile, shoes=args.shoes,
                        rounds_per_block=args.rounds_per_block, seed=args.seed,
                        scenario=args.scenario, log=args.log, anchors=args.anchors,
                        pace=args.pace, durability=args.durability,
                        stall_timeout=args.stall_timeout, verbose=args.verbose,
                        table=args.table, no_progress=args.no_progress,
                        display=getattr(args, "display", None),
                        publish=getattr(args, "publish", None),
                        nats_creds=getattr(args, "nats_creds", None),
                        nats_ca=getattr(args, "nats_ca", None),
                        disclosure=getattr(args, "disclosure", None) or "live",
                        witness_from=getattr(args, "witness_from", None),
                        witness_public=getattr(args, "witness_public", None))
    from controller.app.witness_in import public_key_of
    from floor.forward import ForwardError

    try:
        public_key_of(opts)  # before anything starts (a log, the simulators)
    except ForwardError as e:
        print(f"shoewarden bench: {e}", file=sys.stderr)
        return BenchError(str(e)).code
    try:
        result = run_bench(opts, sys.stdout)
    except BenchError as e:
        print(f"shoewarden bench: {e}", file=sys.stderr)
        return e.code
    print_summary(result, sys.stdout)
    return result.code
