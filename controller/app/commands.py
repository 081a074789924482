"""The device commands of the ``shoewarden`` CLI: ``run``, ``bench``, ``sim``, ``ports``, ``floor``,
``forward``, ``demo``.

Registered by :func:`controller.cli.build_parser`; each command's module (and with it the
drivers, pyserial, pyusb, the simulators) is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from controller.audit.chain import DURABILITY_POLICIES, Durability
from controller.events import MAX_DECKS
from floor.options import seconds  # (argparse only)

DEMO_TABLES = 24
"""Most tables ``demo`` starts: each is a controller and a simulated table (two processes)
and a dealer display's port; a floor of 24 shows every view, and ``--tables 100000`` tried
to start them all (a review)."""


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _at_most(high: int, what: str) -> Any:
    """A whole number from 1 to ``high``: ``sim --decks 999999`` built a pack of 52 million
    cards (4 GB, a review)."""
    def check(text: str) -> int:
        value = _positive(text)
        if value > high:
            raise argparse.ArgumentTypeError(f"at most {high} {what}, got {value}")
        return value
    return check


def _seconds(text: str) -> float:
    value = seconds(text)
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"must be between 0 and 3600, got {value:g}")
    return value


def _logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("transitions").setLevel(logging.WARNING)  # a line per state change


def cmd_run(args: argparse.Namespace) -> int:
    _logging(args.verbose)
    from controller.app.run import cmd_run as run

    return run(args)


def cmd_bench(args: argparse.Namespace) -> int:
    _logging(args.verbose)
    from controller.app.bench import cmd_bench as bench

    return bench(args)


def cmd_sim(args: argparse.Namespace) -> int:
    from controller.app.sim import cmd_sim as sim

    return sim(args)


def cmd_ports(args: argparse.Namespace) -> int:
    from controller.app.ports import cmd_ports as ports

    return ports(args)


def cmd_floor(args: argparse.Namespace) -> int:
    _logging(False)
    from floor.cli import cmd_floor as floor

    return floor(args)


def cmd_witness_key(args: argparse.Namespace) -> int:
    from floor.cli import cmd_witness_key as witness_key

    return witness_key(args)


def cmd_witness_export(args: argparse.Namespace) -> int:
    from floor.cli import cmd_witness_export as witness_export

    return witness_export(args)


def cmd_repair(args: argparse.Namespace) -> int:
    from floor.cli import cmd_repair as repair

    return repair(args)


def cmd_forward(args: argparse.Namespace) -> int:
    _logging(False)
    from floor.cli import cmd_forward as forward

    return forward(args)


def cmd_demo(args: argparse.Namespace) -> int:
    _logging(False)
    from controller.app.demo import cmd_demo as demo

    return demo(args)


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run", help="run a table: its devices, the dealer console, the audit log",
        description="Run one table with its real devices (config/tables/example.toml) and a "
        "line-based dealer console on stdin; recovers the day's log after a crash.")
    run.add_argument("--table", required=True, metavar="FILE", help="the table config (TOML)")
    run.add_argument("--new-log-reason", metavar="TEXT",
                     help="start a new log file (new chain) when the day's log does not "
                     "verify, recording this reason")
    run.add_argument("--display", metavar="HOST:PORT",
                     help="serve the dealer display (next step, the round's cards, "
                     "deviations, the results board) from this process")
    from floor.options import add_publish_options  # argparse only

    add_publish_options(run)
    run.add_argument("--verbose", action="store_true", help="log device notices on stderr")
    run.set_defaults(func=cmd_run)

    bench = sub.add_parser(
        "bench", help="run the controller against simulated devices on virtual serial ports",
        description="Start the simulated table in a child process (ptys + console FIFO), run "
        "the real drivers and the engine against it, print progress and a summary. Exit 0 "
        "clean, 1 an unexpected deviation or a lost/doubled card, 2 bad input, 3 the run "
        "did not complete.")
    bench.add_argument("--profile", help="profile name or file (default: the scenario's)")
    bench.add_argument("--shoes", type=_positive,
                       help="shoes in the day (shuffler and stud profiles: blocks of "
                       "--rounds-per-block rounds; default 2)")
    bench.add_argument("--rounds-per-block", type=_positive,
                       help="rounds per block where there is no shoe (default 20)")
    bench.add_argument("--seed", type=int, help="seed of the day and the devices (default: "
                       "the scenario's, else random; printed)")
    bench.add_argument("--scenario", help="fault scenario: a name in config/scenarios/ or a "
                       "TOML file")
    bench.add_argument("--log", metavar="FILE|DIR", help="audit log: a .jsonl file, or a "
                       "directory (one file per table per day); an existing log of the same "
                       "day is resumed (default: a new temporary directory)")
    bench.add_argument("--table", metavar="ID",
                       help="the table id written in the log (letters, digits, . _ -; default "
                       "T1): several benches deal side by side as different tables")
    bench.add_argument("--anchors", metavar="FILE",
                       help="anchor file (default: anchors.jsonl beside the logs)")
    bench.add_argument("--pace", type=_seconds, help="seconds between the dealer's steps "
                       "(default: the scenario's, else 0: as fast as the controller reads)")
    bench.add_argument("--durability", default=Durability.INPUT.value,
                       choices=DURABILITY_POLICIES,
                       help="audit log fsync policy (default: after every input event)")
    bench.add_argument("--stall-timeout", type=_seconds, default=30.0,
                       help="give up after this many seconds without progress (default 30)")
    bench.add_argument("--display", metavar="HOST:PORT",
                       help="serve the dealer display from this process (needs --log DIR "
                       "or the default log directory)")
    add_publish_options(bench)
    bench.add_argument("--verbose", action="store_true",
                       help="show the simulator's and the drivers' log on stderr")
    bench.add_argument("--no-progress", action="store_true",
                       help="no progress bar (it is shown only when stderr is a terminal)")
    bench.set_defaults(func=cmd_bench)

    sim = sub.add_parser(
        "sim", help="run the simulated devices alone and print their port paths",
        description="The simulated shoe, scanner and shuffler on ptys and the dealer console "
        "FIFO (python -m simulators.pty_host): prints one JSON line of paths, serves until "
        "SIGTERM or Ctrl-C.")
    sim.add_argument("--profile", help="profile name or file (default: the scenario's)")
    sim.add_argument("--seed", type=int, help="seed of the day and the devices")
    sim.add_argument("--scenario", help="fault scenario name or TOML file")
    sim.add_argument("--pace", type=_seconds, help="seconds between the dealer's steps")
    sim.add_argument("--shoes", type=_positive, help="shoes (blocks) in the day")
    sim.add_argument("--rounds-per-block", type=_positive, help="rounds per block")
    sim.add_argument("--decks", type=_at_most(MAX_DECKS, "decks"), help="decks in the pack")
    sim.add_argument("--no-shuffler", action="store_true",
                     help="shoe and hand games: the dealer shuffles by hand (console event)")
    sim.add_argument("--link-dir", help="directory for the port symlinks and the console FIFO")
    sim.add_argument("--exit-after", type=_seconds,
                     help="exit this many seconds after the day was played")
    sim.add_argument("--no-wait", action="store_true",
                     help="play at once, without waiting for HELLO and a console reader")
    sim.add_argument("--dealer", choices=("simulated", "person"), default="simulated",
                     help="simulated (default): the simulated dealer plays the console steps "
                     "into the console FIFO; person: you type them at shoewarden run's "
                     "console, shown here one at a time (Enter for the next)")
    sim.add_argument("--print-allowlist", nargs="?", const="-", metavar="FILE",
                     help="print the [[allowlist]] entries of the simulated devices (TOML) to "
                     "FILE or stdout, and exit")
    sim.set_defaults(func=cmd_sim)

    from floor.options import (  # argparse only: no web stack until it runs
        add_floor_options,
        add_repair_command,
        add_witness_commands,
    )

    floor = sub.add_parser(
        "floor", help="the pit boss's floor: follow the tables' logs, alerts, pages, API",
        description="Follow the audit logs of any number of tables as they grow, verify each "
        "chain, keep each table's live state, raise an alert for every warning or critical "
        "deviation (acknowledged into the floor's own hash-chained log), and serve the "
        "floor's pages, JSON API and live stream (docs/floor.md).")
    add_floor_options(floor)
    floor.set_defaults(func=cmd_floor)
    add_witness_commands(sub)
    sub.choices["floor-witness-key"].set_defaults(func=cmd_witness_key)
    sub.choices["floor-witness-export"].set_defaults(func=cmd_witness_export)
    add_repair_command(sub)
    sub.choices["floor-repair"].set_defaults(func=cmd_repair)

    forward = sub.add_parser(
        "forward", help="publish table logs on disk to NATS JetStream (an offline table)",
        description="Publish every record of the table logs under --logs DIR to the stream "
        "SHOEWARDEN (subject shoewarden.audit.<table>), resuming each table where the stream "
        "stands: nothing twice, no gap. Exits once all is published, unless --follow.")
    forward.add_argument("--logs", action="append", required=True, metavar="DIR",
                         help="a directory of table logs (DIR/<table>/<table>-<date>.jsonl)")
    add_publish_options(forward, required=True)
    forward.add_argument("--follow", action="store_true",
                         help="keep following the logs as they grow (Ctrl-C stops)")
    forward.add_argument("--table", action="append", metavar="ID",
                         help="only this table's logs (repeat for more)")
    forward.add_argument("--until-eof", action="store_true",
                         help="follow until stdin is closed (the table that started this "
                         "process stopped or died) or SIGTERM, then send what is left "
                         "(--finish-timeout) and print one JSON status line: how run/bench "
                         "--publish start it")
    forward.add_argument("--finish-timeout", type=_seconds, default=10.0, metavar="S",
                         help="with --until-eof: seconds to send what is left (default 10)")
    forward.set_defaults(func=cmd_forward)

    demo = sub.add_parser(
        "demo", help="simulated tables dealing at a human pace, the floor following them",
        description="N simulated tables of different profiles (some with dealer mistakes "
        "and device faults) dealing at a human pace, each with its dealer display, and the "
        "floor following them; prints the URLs. Ctrl-C stops.")
    demo.add_argument("--tables", type=_at_most(DEMO_TABLES, "tables"), default=4,
                      help=f"how many (default 4, at most {DEMO_TABLES})")
    demo.add_argument("--http", default="127.0.0.1:8080", metavar="HOST:PORT",
                      help="the floor's address; the dealer displays take the ports after "
                      "it (default 127.0.0.1:8080)")
    demo.add_argument("--duration", type=_seconds, metavar="S",
                      help="stop after S seconds (default: when the tables close, or Ctrl-C)")
    demo.add_argument("--pace", type=_seconds, default=1.0,
                      help="seconds between a dealer's steps (default 1: a human's pace)")
    demo.add_argument("--log", metavar="DIR", help="where the logs go (default: a new "
                      "temporary directory, printed)")
    demo.set_defaults(func=cmd_demo)

    ports = sub.add_parser("ports", help="list serial ports and USB devices",
                           description="Serial ports (device, description, hwid, serial "
                           "number) and USB devices (vendor:product, serial number).")
    ports.add_argument("--json", action="store_true", help="one JSON object")
    ports.set_defaults(func=cmd_ports)
