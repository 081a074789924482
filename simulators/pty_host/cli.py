"""``python -m simulators.pty_host``: the command line of the simulated table on ptys.

Prints one JSON line of port paths, then serves until SIGTERM / SIGINT (exit 0); 2 for
bad input. ``shoewarden sim`` and ``shoewarden bench`` (its child process) run this.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import sys
import threading
from pathlib import Path

from simulators.dealer import DayPlan
from simulators.pty_host.host import PtyHost
from simulators.pty_host.linkdirs import bad_link_dir
from simulators.pty_host.person import play_for_a_person
from simulators.scenario import load_scenario


def main(argv: list[str] | None = None, prog: str = "python -m simulators.pty_host") -> int:
    ap = argparse.ArgumentParser(prog=prog,
                                 description="Simulated shoe, scanner and shuffler on ptys.")
    ap.add_argument("--profile", help="profile name or file (default: the scenario's)")
    ap.add_argument("--seed", type=int, help="seed of the day and the devices (default: the "
                    "scenario's, else random)")
    ap.add_argument("--scenario", help="scenario name or TOML file")
    ap.add_argument("--pace", type=float, help="seconds between steps (default 0: as fast as "
                    "the controller reads)")
    ap.add_argument("--no-shuffler", action="store_true",
                    help="shoe and hand games: the dealer shuffles by hand (console event)")
    ap.add_argument("--shoes", type=int, help="shoes in the day (DayPlan.shoes)")
    ap.add_argument("--rounds-per-block", type=int, help="DayPlan.rounds_per_block")
    ap.add_argument("--decks", type=int, help="decks in the pack")
    ap.add_argument("--table", help="the table id the day opens (DayPlan.table, default T1)")
    ap.add_argument("--link-dir", help="directory for the port symlinks and the console FIFO "
                    "(default: a new temporary directory, removed at exit)")
    ap.add_argument("--exit-after", type=float, help="exit this many seconds after the day "
                    "was played (default: serve until SIGTERM)")
    ap.add_argument("--no-wait", action="store_true",
                    help="play without waiting for HELLO on every device and a console reader")
    ap.add_argument("--exit-with-parent", action="store_true",
                    help="exit (cleaning up) when the process that started this one is gone"
                    if prog.startswith("python") else argparse.SUPPRESS)
    ap.add_argument("--dealer", choices=("simulated", "person"), default="simulated",
                    help="simulated (default): the simulated dealer plays the console steps "
                    "into the console FIFO (for shoewarden bench); person: a person types "
                    "them at shoewarden run's console, shown here one at a time")
    ap.add_argument("--print-allowlist", nargs="?", const="-", metavar="FILE",
                    help="print the [[allowlist]] entries of the simulated devices (TOML, for a "
                    "table config) to FILE or stdout, and exit")
    args = ap.parse_args(argv)
    if args.link_dir is not None:
        why = bad_link_dir(args.link_dir)
        if why is not None:
            ap.error(f"--link-dir {args.link_dir}: {why}")
    from controller.profiles import ProfileError
    from simulators.scenario import ScenarioError

    def log(msg: str) -> None:
        print(f"pty_host: {msg}", file=sys.stderr, flush=True)

    try:
        scenario = load_scenario(args.scenario) if args.scenario else None
        profile_name = args.profile or (scenario.profile if scenario else None)
        if not profile_name:
            ap.error("--profile is required (the scenario names no profile)")
        plan = DayPlan()
        if scenario is not None:
            plan = scenario.day_plan(plan)
        for opt, attr in (("shoes", "shoes"), ("rounds_per_block", "rounds_per_block"),
                          ("decks", "decks"), ("table", "table")):
            if getattr(args, opt) is not None:
                setattr(plan, attr, getattr(args, opt))
        person = args.dealer == "person"
        if person and plan.start == DayPlan().start:
            # the person types at `run`'s console, which stamps each input with the real
            # clock: the day's dates (a deck lot's first use) are today's, or the lots age
            # with the calendar (DECK_EXPIRED ten days after the plan's fixed date)
            plan.start = dt.datetime.now(dt.UTC).replace(microsecond=0)
        host = PtyHost(profile_name, args.seed, plan=plan, scenario=scenario, pace=args.pace,
                       shuffler="none" if args.no_shuffler else None,
                       link_dir=args.link_dir, wait_for_hello=not args.no_wait,
                       wait_for_console=not args.no_wait and not person, log=log,
                       manual=person,
                       parent_pid=os.getppid() if args.exit_with_parent else None)
    except (ProfileError, ScenarioError) as e:
        print(f"{ap.prog}: error: {e}", file=sys.stderr)
        return 2
    if args.print_allowlist is not None:
        return _print_allowlist(host, args.print_allowlist, ap.prog)
    try:
        ports = host.open()
    except OSError as e:
        print(f"{ap.prog}: error: --link-dir {host.link_dir}: {e.strerror or e}",
              file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: host.request_stop())
    signal.signal(signal.SIGINT, lambda *_: host.request_stop())
    signal.signal(signal.SIGHUP, lambda *_: host.request_stop())
    print(json.dumps(ports), flush=True)
    log(f"profile {host.profile.name} seed {host.seed} ({len(host.steps)} steps)")
    try:
        if person:
            host._thread = threading.Thread(target=host.serve, name="pty-host",
                                            kwargs={"exit_after": args.exit_after},
                                            daemon=True)
            host._thread.start()
            play_for_a_person(host, sys.stdin, sys.stdout, args.pace or 0.0)
            while host._thread.is_alive():
                host._thread.join(0.2)
        else:
            host.serve(exit_after=args.exit_after)
    finally:
        host.close()
    return 0


def _print_allowlist(host: PtyHost, target: str, prog: str) -> int:
    lines = [f"# the simulated devices of {prog} (profile {host.profile.name})"]
    for entry in host.allowlist():
        lines.append("[[allowlist]]")
        lines += [f'{k} = "{v}"' for k, v in entry.items()]
        lines.append("")
    text = "\n".join(lines)
    if target == "-":
        sys.stdout.write(text)
        return 0
    try:
        Path(target).write_text(text, encoding="utf-8")
    except OSError as e:
        print(f"{prog}: error: {target}: {e.strerror or e}", file=sys.stderr)
        return 2
    return 0
