"""The ``shoewarden`` command line: check, profiles, chart (and, from
:mod:`controller.app.commands`, the device commands run, bench, sim, ports; from
:mod:`controller.audit_cli`, audit).

Bad input never produces a traceback: a missing file, a bad profile, a
malformed line or a wrong argument is reported with what and where, and the
exit code says which (0 clean, 1 deviations of severity warning or critical,
2 bad input).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
from collections.abc import Iterator, Sequence
from typing import IO, Any

from controller import __version__, audit_cli, jsontext
from controller.app import commands as app_commands
from controller.audit import AuditLog, AuditLogError
from controller.audit.chain import DURABILITY_POLICIES, Durability
from controller.deviations import Deviation, Severity
from controller.engine import TableEngine, mermaid_chart
from controller.events import EventError, parse_event
from controller.inputfiles import file_problem
from controller.jsontext import JsonTextError
from controller.profiles import Profile, ProfileError, load_profile, profile_names
from controller.session import TableSession

EXIT_OK, EXIT_DEVIATION, EXIT_BAD_INPUT = 0, 1, 2


MAX_LINE = 1 << 20
"""The longest input line read, in bytes (a deck check of 20 packs is about 6 KB): a longer
one is bad input, passed over without being held (a 2 GB line had ended in a MemoryError
traceback, a 1.6 GB one had held 3.2 GB — a review)."""


def _read_lines(path: str) -> Iterator[tuple[int, bytes | None]]:
    """The lines of a stream as bytes: each is decoded on its own (by :mod:`controller.jsontext`),
    so a byte that is not UTF-8 makes its line bad and the rest is still read. A line longer
    than :data:`MAX_LINE` is None (read in pieces and dropped)."""
    stream: IO[bytes] = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    try:
        read = functools.partial(stream.readline, MAX_LINE + 1)
        for number, raw in enumerate(iter(read, b""), start=1):
            if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):
                    raw = read()
                yield number, None
            else:
                yield number, raw
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _profile_or_none(command: str, name: str) -> Profile | None:
    """Load a profile, or report why not (``file: key: what is wrong``) and return None."""
    try:
        return load_profile(name)
    except ProfileError as e:
        print(f"shoewarden {command}: {e}", file=sys.stderr)
        return None


def cmd_check(args: argparse.Namespace) -> int:
    profile = _profile_or_none("check", args.profile)
    if profile is None:
        return EXIT_BAD_INPUT
    source = "<stdin>" if args.input == "-" else args.input
    why = None if args.input == "-" else file_problem(args.input)
    if why is not None:
        print(f"shoewarden check: {source}: {why}", file=sys.stderr)
        return EXIT_BAD_INPUT
    audit = None
    if args.log:
        try:
            audit = AuditLog.open(args.log, durability=args.durability)
        except (AuditLogError, OSError) as e:
            print(f"shoewarden check: {args.log}: cannot open the audit log: {e}",
                  file=sys.stderr)
            return EXIT_BAD_INPUT
    session = TableSession(profile, audit, settings={
        "command": "check", "input": source, "durability": args.durability})
    bad_lines = number = 0
    out = sys.stdout
    try:
        for number, raw in _read_lines(args.input):
            if raw is None:
                bad_lines += 1
                _report_bad(source, number, f"line longer than {MAX_LINE:,} bytes: not read")
                continue
            if not raw.strip():
                continue
            try:
                event = parse_event(jsontext.loads(raw))
            except (JsonTextError, EventError) as e:
                bad_lines += 1
                _report_bad(source, number, str(e))
                continue
            for output in session.feed(event, line=number):
                if isinstance(output, Deviation):
                    _report_deviation(out, number, output, as_json=args.json)
    except AuditLogError as e:
        print(f"shoewarden check: {source}:{number}: cannot write the audit log: {e}; "
              f"stopped after {session.tally.events} event(s) (the log verifies up to its "
              "last record)", file=sys.stderr)
        _close_quietly(session)
        return EXIT_BAD_INPUT
    except OSError as e:
        print(f"shoewarden check: {source}: {e.strerror or e}", file=sys.stderr)
        _close_quietly(session)
        return EXIT_BAD_INPUT
    try:  # under the 'none' policy the last records are written here: a failure is news
        session.close()
    except (AuditLogError, OSError) as e:
        print(f"shoewarden check: {source}: cannot write the audit log: {e}; the log verifies "
              "up to its last whole record", file=sys.stderr)
        return EXIT_BAD_INPUT
    _summary(session, bad_lines, sys.stderr if args.json else out)
    if bad_lines:
        return EXIT_BAD_INPUT
    worst = session.tally.worst
    return EXIT_DEVIATION if worst in (Severity.WARNING, Severity.CRITICAL) else EXIT_OK


def _close_quietly(session: TableSession) -> None:
    """Close the session's log; a log that cannot be closed (its disk is full) was already
    reported, and what it holds up to its last whole record stands."""
    with contextlib.suppress(AuditLogError, OSError):
        session.close()


def _report_bad(source: str, line: int, why: str) -> None:
    where = f"{source}:{line}" if line else source
    print(f"{where}: bad input: {why}", file=sys.stderr)


def _report_deviation(out: IO[str], line: int, d: Deviation, *, as_json: bool) -> None:
    if as_json:
        record: dict[str, Any] = {"line": line, **d.to_record()}
        record.pop("type")
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
    else:
        out.write(f"line {line}: {d.code} [{d.severity}] {d.message} ({d.rule})\n")


def _summary(session: TableSession, bad_lines: int, out: IO[str]) -> None:
    t = session.tally
    engine = session.engine
    out.write(
        f"summary: profile {session.profile.name}, table {engine.table or '-'}: "
        f"{t.shoes} shoe(s), {t.rounds} round(s), {t.cards} card(s), {t.events} event(s); "
        f"final state {engine.state}\n"
    )
    if t.deviations:
        parts = ", ".join(f"{code} {n}" for code, n in sorted(t.deviations.items()))
        out.write(f"deviations: {sum(t.deviations.values())} ({parts})\n")
    else:
        out.write("deviations: none\n")
    if bad_lines:
        out.write(f"bad input: {bad_lines} line(s) could not be read (see above)\n")


def cmd_profiles(args: argparse.Namespace) -> int:
    if args.show:
        profile = _profile_or_none("profiles", args.show)
        if profile is None:
            return EXIT_BAD_INPUT
        print(f"{profile.name}: {profile.title}  [{profile.source}]")
        print(f"  game = {profile.game}, card_source = {profile.card_source}")
        for section, values in profile.to_dict().items():
            if not isinstance(values, dict):
                continue
            print(f"  [{section}]  source: {values['source']}")
            for key, value in values.items():
                if key in ("source", "interpretation"):
                    continue
                print(f"    {key} = {json.dumps(value)}")
            if values.get("interpretation"):
                print(f"    interpretation: {values['interpretation']}")
        return EXIT_OK
    rows = []
    for name in profile_names():
        try:
            p = load_profile(name)
        except ProfileError as e:
            print(f"shoewarden profiles: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
        decks = f"{p.decks.min}" if p.decks.min == p.decks.max else f"{p.decks.min}-{p.decks.max}"
        window = p.cut_card.window()
        cut_card = "none" if window is None else (
            f"{window[0]}" if window[0] == window[1] else f"{window[0]}-{window[1]}")
        rows.append((p.name, p.game, decks, p.card_source, cut_card, p.burn.mode, p.source))
    header = ("profile", "game", "decks", "source", "cut card", "burn", "rules")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return EXIT_OK


def cmd_chart(args: argparse.Namespace) -> int:
    profile = _profile_or_none("chart", args.profile)
    if profile is None:
        return EXIT_BAD_INPUT
    sys.stdout.write(mermaid_chart(TableEngine(profile)))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shoewarden",
        description="Table-side card-procedure controller: checks streams against the "
        "regulated procedure and keeps a hash-chained audit log.",
    )
    parser.add_argument("--version", action="version", version=f"shoewarden {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = sub.add_parser("check", help="run the procedure engine over a JSON Lines stream")
    check.add_argument("--profile", required=True, help="profile name or path to a .toml file")
    check.add_argument("--log", help="write the hash-chained audit log to this file")
    check.add_argument("--json", action="store_true", help="one JSON object per deviation")
    check.add_argument("--durability", default=Durability.INPUT.value, choices=DURABILITY_POLICIES,
                       help="audit log fsync policy (default: after every input event)")
    check.add_argument("input", help="input events, one JSON object per line ('-' = stdin)")
    check.set_defaults(func=cmd_check)

    profiles = sub.add_parser("profiles", help="list the procedure profiles")
    profiles.add_argument("--show", metavar="NAME", help="print one profile with its sources")
    profiles.set_defaults(func=cmd_profiles)

    chart = sub.add_parser("chart", help="print the procedure machine as Mermaid")
    chart.add_argument("--profile", required=True, help="profile name or path")
    chart.set_defaults(func=cmd_chart)

    app_commands.register(sub)
    audit_cli.register(sub)
    return parser


#: ``shoewarden floor ACTION …``: commands of the floor's beside serving it (its own options
#: are all flags, so these are parsed as the top-level ``floor-ACTION``)
FLOOR_ACTIONS = ("witness-key", "witness-export", "repair")


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if len(words) >= 2 and words[0] == "floor" and words[1] in FLOOR_ACTIONS:
        words = [f"floor-{words[1]}", *words[2:]]
    args = build_parser().parse_args(words)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("shoewarden: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
