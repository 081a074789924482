"""``shoewarden audit``: verify, replay, report and recover audit logs.

- ``audit verify LOG… [--key FILE] [--anchors FILE] [--json]`` — the hash chain
  (and HMAC chain, and anchors) over one file, a table's rotated files, or
  several tables at once. Exit 0 intact, 1 tampered (the first broken record
  named with file and line), 2 unreadable input (or a key that is not the log's).
- ``audit replay LOG…`` — re-run the engine on the logged inputs with the
  logged profile and settings; every difference named by seq. Exit 0
  identical, 1 different, 2 unreadable.
- ``audit report LOG… [--round N] [--html FILE] [--log-dir DIR] [--key F] [--anchors F]``
  — the chain's verdict first, then per table and day; a timeline per shoe; a disputed
  round laid out. Exit 0, 1 the chain does not verify, 2 unreadable.
- ``audit recover LOG [--key FILE] [--anchors FILE]`` — cut a torn last line,
  write the ``recovery`` record and restore lost outputs. Exit 0 recovered,
  1 refused (the log is damaged, not torn), 2 unreadable.

No traceback for bad input: every error is one line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from controller.audit import (
    AnchorFileError,
    AnchorSink,
    AuditLogError,
    KeyFileError,
    load_key,
    read_anchors,
    verify_set,
)
from controller.audit.anchors import anchor_file_problem
from controller.audit.records import LogReadError
from controller.inputfiles import file_problem
from controller.progressbar import ProgressBar, total_bytes, wanted

EXIT_OK, EXIT_FAIL, EXIT_BAD_INPUT = 0, 1, 2


def _err(command: str, message: str) -> None:
    print(f"shoewarden audit {command}: {message}", file=sys.stderr)


def _key(command: str, path: str | None) -> bytes | None:
    if path is None:
        return None
    loaded = load_key(path)  # KeyFileError is reported by the caller
    if loaded.warning:
        _err(command, f"warning: {loaded.warning}")
    return loaded.key


def _wrong_file(command: str, logs: list[str]) -> bool:
    """Say so of a file given that is no audit log at all (empty, or another program's
    JSON lines): the wrong file, not a log that was altered; or no file to read at all (a
    FIFO, read, blocked the command: a review). True when one was."""
    from controller.audit.sets import not_a_log

    wrong = False
    for path in logs:
        why = file_problem(path)
        if why is None and Path(path).is_file():  # (a pipe is read once: by the command)
            with contextlib.suppress(OSError):
                why = not_a_log(Path(path))
        if why is not None:
            _err(command, f"{path}: {why}")
            wrong = True
    return wrong


def _once(command: str, logs: list[str]) -> list[str]:
    """The logs, each file once: a file named twice (a shell glob and its own name) would
    be read twice — every round, card and count doubled. ``verify`` groups them itself."""
    out: list[str] = []
    seen: set[str] = set()
    for path in logs:
        real = os.path.realpath(path)
        if real in seen:
            _err(command, f"note: {path} is given more than once: read once")
            continue
        seen.add(real)
        out.append(path)
    return out


def _bar(args: argparse.Namespace) -> ProgressBar:
    """A bar over the bytes of the logs, on a terminal only (see controller.progressbar)."""
    return ProgressBar(enabled=wanted(args.no_progress), total=total_bytes(args.logs))


def cmd_verify(args: argparse.Namespace) -> int:
    try:
        key = _key("verify", args.key)
        anchor_notes: list[str] = []
        anchors = read_anchors(args.anchors, anchor_notes) if args.anchors else None
    except (KeyFileError, AnchorFileError) as exc:
        _err("verify", str(exc))
        return EXIT_BAD_INPUT
    witness: list[Any] = []
    forged: list[str] = []
    if args.witness is not None or args.witness_key is not None:
        from controller.audit.witness import WitnessError

        try:
            witness, forged = _witness(args.witness, args.witness_key)
        except WitnessError as exc:
            _err("verify", str(exc))
            return EXIT_BAD_INPUT
        # only checkpoints signed by the witness count as anchors: a forged one proves nothing
        anchors = [*(anchors or []), *(cp.as_anchor() for cp in witness)]
    try:
        with _bar(args) as bar:
            result = verify_set(args.logs, key=key, anchors=anchors, partial=args.partial,
                                meter=bar.meter)
    except MemoryError:  # (a forged line of gigabytes: no line this table writes is near)
        _err("verify", "a line of the log is too long to read in memory: the file is not "
             "as the table wrote it (its records are a few KB)")
        return EXIT_BAD_INPUT
    for table in result.tables:
        table.notes += anchor_notes
    code = result.exit_code
    if forged and code == EXIT_OK:
        code = EXIT_FAIL
    if args.json:
        out: dict[str, Any] = {"ok": code == EXIT_OK, "exit": code,
                               "unreadable": result.unreadable,
                               "tables": [t.to_dict() for t in result.tables]}
        if args.witness is not None:
            out["witness"] = {"checkpoints": len(witness) + len(forged),
                              "bad_signatures": forged}
        print(json.dumps(out, ensure_ascii=False))
    else:
        for line in result.lines():
            print(line)
        if args.witness is not None:
            for line in forged:
                print(f"WITNESS: {line}")
            print(f"witness: {len(witness) + len(forged)} checkpoint(s) from {args.witness}, "
                  f"{len(witness)} signed by the witness key"
                  + (f", {len(forged)} NOT" if forged else ""))
    for u in result.unreadable:
        _err("verify", u)
    return code


def _witness(where: str | None, public_key: str | None) -> tuple[list[Any], list[str]]:
    """``--witness FILE|URL`` with ``--witness-key PUB``: the checkpoints whose signature
    is the witness's, and a sentence for each one whose signature is not."""
    from controller.audit.witness import (
        WitnessError,
        check_signatures,
        load_public_key,
        read_checkpoints,
    )

    if where is None or public_key is None:
        raise WitnessError("--witness FILE|URL and --witness-key PUB go together: the "
                           "checkpoints and the floor's public key they are checked under")
    public = load_public_key(public_key)
    return check_signatures(read_checkpoints(where), public)


def cmd_replay(args: argparse.Namespace) -> int:
    from controller.audit.replay import ReplayError, replay

    args.logs = _once("replay", args.logs)
    if _wrong_file("replay", args.logs):
        return EXIT_BAD_INPUT
    try:
        with _bar(args) as bar:
            result = replay(args.logs, meter=bar.meter)
    except (ReplayError, LogReadError) as exc:
        _err("replay", str(exc))
        return EXIT_BAD_INPUT
    except Exception as exc:  # a doctored log can hold anything: still no traceback
        _err("replay", f"cannot replay the log: {type(exc).__name__}: {exc}")
        return EXIT_BAD_INPUT
    for note in result.notes:
        print(f"note: {note}")
    shown = result.differences[: args.max_differences]
    for d in shown:
        print(f"DIFFERENT: {d}")
    more = len(result.differences) - len(shown)
    if more > 0:
        print(f"… and {more} more difference(s)")
    verdict = "identical" if result.identical else f"{len(result.differences)} difference(s)"
    print(f"replay: {result.inputs} input(s), {result.outputs} output(s) compared, "
          f"{result.headers} session(s): {verdict}")
    return EXIT_OK if result.identical else EXIT_FAIL


def _html_problem(html: Path, logs: list[str]) -> str | None:
    """Why the report's page cannot be written at ``html`` — asked before the report is
    built. Never over a log: a review's ``--html LOG LOG`` replaced the audit log with
    the page."""
    from controller.audit.sets import not_a_log

    try:
        if html.is_dir():
            return "a directory"
        if not html.parent.is_dir():
            return "its directory does not exist"
        if not html.exists():
            return None
        if any(os.path.samefile(html, log) for log in logs if os.path.exists(log)):
            return "it is one of the logs given: the page would overwrite it"
        if html.is_file() and html.stat().st_size and not_a_log(html) is None:
            return "it holds an audit log: the page would overwrite it"
    except OSError as exc:
        return f"cannot use it: {exc.strerror or exc}"
    return None


def cmd_report(args: argparse.Namespace) -> int:
    from controller.audit.replay import ReplayError
    from controller.audit.report import build_report, render_round, render_text
    from controller.audit.report.html import render_html

    try:
        key = _key("report", args.key)
        anchors = read_anchors(args.anchors) if args.anchors else None
    except (KeyFileError, AnchorFileError) as exc:
        _err("report", str(exc))
        return EXIT_BAD_INPUT
    args.logs = _once("report", args.logs)
    if _wrong_file("report", args.logs):
        return EXIT_BAD_INPUT
    for d in args.log_dir or ():
        if not Path(d).is_dir():  # (the sabot history would be read from nowhere, unsaid)
            _err("report", f"--log-dir {d}: no such directory")
            return EXIT_BAD_INPUT
    if args.html and (why := _html_problem(Path(args.html), args.logs)) is not None:
        # (said after the whole report was built and printed: a review)
        _err("report", f"--html {args.html}: {why}")
        return EXIT_BAD_INPUT
    try:
        with _bar(args) as bar:
            report = build_report(args.logs, log_dirs=args.log_dir, key=key, anchors=anchors,
                                  meter=bar.meter)
    except (ReplayError, LogReadError) as exc:
        _err("report", str(exc))
        return EXIT_BAD_INPUT
    except Exception as exc:  # a doctored log can hold anything: still no traceback
        _err("report", f"cannot read the log: {type(exc).__name__}: {exc}")
        return EXIT_BAD_INPUT
    rounds = None
    try:  # (laid out from the records as written: a doctored log's odd value is one line)
        if args.round is not None:
            text = render_round(report, args.round, args.table)
            if text is None:
                _err("report", f"no round {args.round} in the log(s)"
                     + (f" for table {args.table}" if args.table else ""))
                return EXIT_BAD_INPUT
            rounds = report.find_round(args.round, args.table)
        else:
            if args.table is not None:  # one table's days of the logs given
                report.days = [d for d in report.days if d.table == args.table]
                if not report.days:
                    _err("report", f"no day of table {args.table} in the log(s)")
                    return EXIT_BAD_INPUT
            text = render_text(report)
        page = render_html(report, rounds) if args.html else None
    except Exception as exc:
        _err("report", f"cannot lay out the log: a record holds a value of an unexpected "
             f"kind ({type(exc).__name__}: {exc}); `audit verify` and `audit replay` still "
             "read it")
        return EXIT_BAD_INPUT
    sys.stdout.write(text)
    if page is not None:
        try:
            Path(args.html).write_text(page, encoding="utf-8")
        except OSError as exc:
            _err("report", f"{args.html}: {exc.strerror or exc}")
            return EXIT_BAD_INPUT
        print(f"html: {args.html}")
    if not report.verified:
        _err("report", "the chain does not verify (see the first lines of the report)")
        return EXIT_FAIL
    return EXIT_OK


def cmd_recover(args: argparse.Namespace) -> int:
    from controller.audit.lock import LogInUseError, hold_table
    from controller.audit.recovery import recover
    from controller.audit.replay import ReplayError

    if _wrong_file("recover", [args.log]):  # (nothing of a table's to recover: left as is)
        return EXIT_BAD_INPUT
    if args.anchors and (why := anchor_file_problem(args.anchors)) is not None:
        _err("recover", f"--anchors {why}")
        return EXIT_BAD_INPUT
    try:
        key = _key("recover", args.key)
        anchors = AnchorSink(args.anchors, syslog=not args.no_syslog) if args.anchors else None
        with hold_table(Path(args.log).parent):  # never under a controller still writing
            result = recover(args.log, key=key, anchors=anchors, reason=args.reason,
                             whole=True)
            result.log.close()
    except (KeyFileError, LogInUseError) as exc:
        _err("recover", str(exc))
        return EXIT_BAD_INPUT
    except AuditLogError as exc:
        _err("recover", f"refused: {exc}")
        return EXIT_FAIL
    except (ReplayError, LogReadError, OSError) as exc:
        _err("recover", str(exc))
        return EXIT_BAD_INPUT
    print(result.summary())
    for d in result.differences[:5]:
        print(f"note: the log does not replay identically: {d}")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``audit`` and its subcommands to the ``shoewarden`` parser's subparsers."""
    audit = sub.add_parser("audit", help="verify, replay, report and recover audit logs")
    cmds = audit.add_subparsers(dest="audit_command", required=True, metavar="SUBCOMMAND")

    verify = cmds.add_parser(
        "verify", help="check the hash chain (and HMAC, anchors) of logs",
        description="Exit 0 intact, 1 tampered (the first broken record named), 2 unreadable.")
    verify.add_argument("logs", nargs="+", metavar="LOG",
                        help="log files: one, a table's rotated files, several tables")
    verify.add_argument("--key", metavar="FILE", help="key file of a keyed log (hex, ≥ 32 bytes)")
    verify.add_argument("--anchors", metavar="FILE",
                        help="anchor file (JSON Lines of table, file, seq, hash, ts, reason)")
    verify.add_argument("--witness", metavar="FILE|URL",
                        help="the floor's signed checkpoints (JSON Lines from `shoewarden floor "
                        "witness-export`, or http(s)://FLOOR/api/witness/TABLE): each must be "
                        "signed under --witness-key and its (file, seq, hash) be in the log")
    verify.add_argument("--witness-key", metavar="PUB",
                        help="the floor's witness public key (PEM), with --witness")
    verify.add_argument("--partial", action="store_true",
                        help="the logs given are knowingly part of a table's set: a file the "
                             "chain or the anchors know of and not given is a note, not a "
                             "failure")
    verify.add_argument("--json", action="store_true", help="one JSON object on stdout")
    verify.add_argument("--no-progress", action="store_true",
                        help="no progress bar (it is shown only on a terminal anyway)")
    verify.set_defaults(func=cmd_verify)

    replay = cmds.add_parser(
        "replay", help="re-run the engine on the logged inputs and compare the outputs",
        description="Exit 0 identical, 1 different, 2 unreadable.")
    replay.add_argument("logs", nargs="+", metavar="LOG", help="log file(s), in order")
    replay.add_argument("--max-differences", type=int, default=20, metavar="N",
                        help="show at most N differences (default 20)")
    replay.add_argument("--no-progress", action="store_true",
                        help="no progress bar (it is shown only on a terminal anyway)")
    replay.set_defaults(func=cmd_replay)

    report = cmds.add_parser(
        "report", help="per table and day: shoes, rounds, cards, deviations, timeline",
        description="The chain's verdict first (as audit verify), then the report. Exit 0, "
        "1 when the chain does not verify (the report is still printed), 2 when a log "
        "cannot be read.")
    report.add_argument("logs", nargs="+", metavar="LOG", help="log file(s), in order")
    report.add_argument("--key", metavar="FILE", help="key file of a keyed log: the verdict "
                        "checks every MAC")
    report.add_argument("--anchors", metavar="FILE", help="anchor file: the verdict checks "
                        "the anchors too")
    report.add_argument("--round", type=int, metavar="N",
                        help="lay out round N card by card (a disputed round)")
    report.add_argument("--table", help="only this table (with --round: its round N)")
    report.add_argument("--html", metavar="FILE", help="also write one self-contained HTML file")
    report.add_argument("--log-dir", action="append", metavar="DIR",
                        help="where the logs of earlier days are (sabot rotation); "
                        "default: the logs' directories")
    report.add_argument("--no-progress", action="store_true",
                        help="no progress bar (it is shown only on a terminal anyway)")
    report.set_defaults(func=cmd_report)

    rec = cmds.add_parser(
        "recover", help="cut a torn last line and write the recovery record",
        description="Exit 0 recovered, 1 refused (damaged, not torn), 2 unreadable.")
    rec.add_argument("log", metavar="LOG")
    rec.add_argument("--key", metavar="FILE", help="key file of a keyed log")
    rec.add_argument("--anchors", metavar="FILE", help="append the recovery anchor here")
    rec.add_argument("--no-syslog", action="store_true", help="do not send the anchor to syslog")
    rec.add_argument("--reason", default="restart after an unclean stop",
                     help="the reason written into the recovery record")
    rec.set_defaults(func=cmd_recover)
