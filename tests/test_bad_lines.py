"""A bad line costs its line, never the table or the check (issue 8, section 1).

Streams (``shoewarden check``), the dealer console (``shoewarden run``) and audit logs
(``audit verify``/``report``/``replay``/``recover``) all decode at one text boundary
(:mod:`controller.jsontext`) and build events at one place (:func:`parse_event`, which raises
:class:`EventError` and nothing else). A line that fails either is reported with its line
number; every other line is still read.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller import cli
from controller.app.console import DealerConsole
from controller.app.run import EXIT_FAILED, run_table
from controller.audit import table_files
from controller.events import EVENT_TYPES, Event, EventError, parse_event
from controller.profiles import load_profile
from tests.budget import examples

ROOT = Path(__file__).resolve().parent.parent
DAY = ROOT / "config" / "examples" / "gr-blackjack-day.jsonl"
DEEP = b"[" * 1200 + b"]" * 1200

HOSTILE_LINES: list[tuple[bytes, str]] = [
    (b'{"type": []}', "type"),
    (b'{"type": {"a": 1}}', "type"),
    (b'{"type":"shuffle","t":"0001-01-01T00:00:00+01:00"}', "t: a time with no UTC"),
    (b'{"type":"shuffle","t":"9999-12-31T23:59:59-01:00"}', "t: a time with no UTC"),
    (DEEP, "nested"),
    (b'{"type":"stub_count","count":' + b"9" * 5000 + b"}", "number"),
    (b'{"type":"stub_count","count":9007199254740993}', "count"),
    (b'{"type":"dealer_change","dealer":"\\ud800"}', "surrogate"),
    (b'{"type":"shuffle","t":"2026-11-21T10:00:10Z\xff"}', "UTF-8"),
    (b'{"type":"bets_closed","players":99999999999}', "players"),
    (b'{"type":"bets_closed","boxes":[1,2,1000000000]}', "boxes"),
    (b'{"type":"bets_closed","boxes":' + json.dumps(list(range(1, 5000))).encode() + b"}",
     "boxes"),
    (b'{"type":"dealer_change","dealer":"' + b"x" * 5000 + b'"}', "longer"),
    (b'{"type":"deck_check","cards":[[[[[[[[[["7H"]]]]]]]]]]}', "nested"),
    (b'{"type":"cut","offset":1e400}', "number"),
    (b'{"type":"cut","offset":NaN}', "JSON"),
]


def check(tmp_path: Path, data: bytes, capsys: pytest.CaptureFixture[str],
          *extra: str) -> tuple[int, str, str]:
    path = tmp_path / "stream.jsonl"
    path.write_bytes(data)
    code = cli.main(["check", "--profile", "gr-blackjack", *extra, str(path)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def day_lines() -> list[bytes]:
    return [line for line in DAY.read_bytes().split(b"\n") if line]


# ------------------------------------------------------------------------ parse_event


@pytest.mark.parametrize(("line", "what"), HOSTILE_LINES, ids=[w for _, w in HOSTILE_LINES])
def test_parse_event_refuses_with_an_event_error_only(line: bytes, what: str) -> None:
    try:
        obj = json.loads(line.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError):
        return  # not JSON to the standard library either: the text boundary's case
    with pytest.raises(EventError):
        parse_event(obj)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
    | st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from("\ud800\udfff")),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12)
FIELDS = st.sampled_from(["t", "table", "decks", "cards", "offset", "behind", "boxes",
                          "players", "card", "exposed", "to", "action", "count", "dealer",
                          "device", "code", "detail", "kind", "deck_lots", "sabot"])


@settings(max_examples=examples(400), deadline=None)
@given(kind=st.sampled_from(sorted(EVENT_TYPES)) | JSON,
       fields=st.dictionaries(FIELDS, JSON, max_size=5))
def test_parse_event_never_raises_anything_but_event_error(kind: object,
                                                           fields: dict[str, object]) -> None:
    try:
        event = parse_event({"type": kind, **fields})
    except EventError:
        return
    assert isinstance(event, Event)
    json.dumps(event.to_record(), ensure_ascii=False).encode("utf-8")  # writable


# ------------------------------------------------------------------------ check


def test_check_reports_each_bad_line_by_number_and_checks_every_other(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = day_lines()
    bad_at = {}
    for i, (bad, what) in enumerate(HOSTILE_LINES):
        lines.insert(5 + i * 3, bad)
        bad_at[5 + i * 3 + 1] = what
    code, out, err = check(tmp_path, b"\n".join(lines) + b"\n", capsys)
    assert code == cli.EXIT_BAD_INPUT
    assert "Traceback" not in err
    reported = {int(line.split(":")[1]): line for line in err.splitlines()
                if ": bad input: " in line}
    assert sorted(reported) == sorted(bad_at), err
    for number, what in bad_at.items():
        assert what.lower() in reported[number].lower(), reported[number]
    assert f"{len(day_lines())} event(s)" in out  # every good line was checked
    assert "deviations: none" in out


def test_one_invalid_byte_costs_its_line_only(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    lines = day_lines()
    assert len(lines) == 720
    lines[599] = lines[599][:30] + b"\xff" + lines[599][30:]
    code, out, err = check(tmp_path, b"\n".join(lines) + b"\n", capsys)
    assert code == cli.EXIT_BAD_INPUT
    assert err.startswith(f"{tmp_path / 'stream.jsonl'}:600: bad input: not UTF-8 text "
                          f"(column 31)"), err
    assert "719 event(s)" in out


def test_check_log_of_a_stream_with_bad_lines_verifies(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = day_lines()[:50]
    lines[10:10] = [bad for bad, _ in HOSTILE_LINES]
    code, _, _ = check(tmp_path, b"\n".join(lines) + b"\n", capsys,
                       "--log", str(tmp_path / "log.jsonl"))
    assert code == cli.EXIT_BAD_INPUT
    assert cli.main(["audit", "verify", str(tmp_path / "log.jsonl")]) == 0


MUTATIONS = [
    lambda r, line: line[: r.randrange(len(line))],  # cut
    lambda r, line: line[:r.randrange(len(line))] + bytes([r.randrange(256)])
    + line[r.randrange(len(line)):],  # a random byte
    lambda r, line: line.replace(b'"type": "', b'"type": ["', 1),
    lambda r, line: line.replace(b"Z", b"+01:00", 1).replace(b"2026-", b"0001-", 1),
    lambda r, line: line.replace(b"}", b', "x": ' + DEEP + b"}", 1),
    lambda r, line: line.replace(b'"', b'"\\ud800', 2),
    lambda r, line: line.replace(b"6", b"9" * r.choice([20, 400, 5000]), 1),
    lambda r, line: line * 2,
    lambda r, line: b"",
    lambda r, line: line.replace(b'"card": "', b'"card": ' + DEEP[:r.randrange(2, 60)], 1),
]


def test_mutated_streams_never_make_check_fail_untidily(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A few hundred mutated streams (the issue found 450 tracebacks in 2,400): each ends
    with exit 0, 1 or 2, no traceback, and a line number on every bad line."""
    base = day_lines()[:80]
    r = random.Random(8)
    for _ in range(200):
        lines = list(base)
        for _ in range(r.randrange(1, 4)):
            i = r.randrange(len(lines))
            lines[i] = r.choice(MUTATIONS)(r, lines[i])
        code, out, err = check(tmp_path, b"\n".join(lines) + b"\n", capsys)
        assert code in (0, 1, 2) and "Traceback" not in err + out
        assert "summary:" in out
        for line in err.splitlines():
            assert line.split(":")[1].isdigit(), line


# ------------------------------------------------------------------------ the console

CONSOLE_LINES = [
    '{"type": []}', '{"type": "card", "card": "7H", "t": "0001-01-01T00:00:00+01:00"}',
    '{"type": "card", "card": "7H", "t": "yesterday"}', '{"type":"dealer_change","dealer":'
    '"\\ud800"}', "d \udcff\udcfe", "b ²", "b 1 ² 3", "c " + "9" * 5000, "c ١٢٣",
    "p " + "9" * 5000, "n ³", "k shoe\udcff JAM", "k " + "x" * 100 + " JAM", "o ² S-1",
    "m \ud800", "a \ud800", DEEP.decode(), '{"type": "bets_closed", "boxes": [1e400]}',
    "\udcff", "x" * 30_000,
]


@pytest.mark.parametrize("line", CONSOLE_LINES)
def test_a_bad_console_line_is_refused_with_a_reason(line: str) -> None:
    console = DealerConsole(load_profile("gr-blackjack"), "T1",
                            clock=lambda: "2026-11-24T10:00:00Z")
    cmd = console.parse(line + "\n", lambda q: None)
    assert cmd.kind == "error" and cmd.message, cmd


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from("\udcff{}[]\"0123"),
               max_size=60))
def test_no_console_line_makes_the_console_raise(line: str) -> None:
    console = DealerConsole(load_profile("gr-stud-poker"), "T1",
                            clock=lambda: "2026-11-24T10:00:00Z")
    cmd = console.parse(line, lambda q: "\udcff" + q[:3])
    if cmd.kind == "event":
        assert cmd.event is not None
        cmd.event.to_record()
        json.dumps(cmd.event.to_record(), ensure_ascii=False).encode("utf-8")


def test_run_refuses_bad_console_lines_and_the_table_goes_on(tmp_path: Path) -> None:
    config = tmp_path / "table.toml"
    config.write_text('table = "T1"\nprofile = "gr-blackjack"\nlog_dir = "logs"\n'
                      'anchors = "anchors.jsonl"\nanchors_syslog = false\n')
    lines = [*CONSOLE_LINES, "o 6", *CONSOLE_LINES, "s", "quit"]
    out, err = io.StringIO(), io.StringIO()
    code = run_table(str(config), stdin=io.StringIO("\n".join(lines) + "\n"), out=out, err=err)
    text = out.getvalue()
    assert code != EXIT_FAILED, err.getvalue()
    assert "stopped (quit)" in text
    assert text.count("  ? ") >= 2 * len(CONSOLE_LINES) - 2
    assert "> table_open table=T1 decks=6" in text and "> shuffle" in text
    logs = table_files(tmp_path / "logs", "T1")
    assert logs and cli.main(["audit", "verify", *map(str, logs)]) == 0


# ------------------------------------------------------------------------ audit logs


_DAY_LOG: list[bytes] = []


def _day_log(where: Path) -> bytes:
    """The day's log as ``check --log`` writes it, written once per test process (the
    tests below each change a copy; writing it took each of them 0.4 s)."""
    if not _DAY_LOG:
        log = where / "day-log.jsonl"
        assert cli.main(["check", "--profile", "gr-blackjack", "--log", str(log),
                         str(DAY)]) == 0
        _DAY_LOG.append(log.read_bytes())
    return _DAY_LOG[0]


def _log_with_a_deep_line(tmp_path: Path, where: str, depth: int = 1200,
                          inside: bool = False) -> Path:
    """The day's log (through ``check --log``) with one line replaced by — or, ``torn``,
    followed by — a line nested ``depth`` deep (``inside``: a record of the log with one
    more field, nested that deep, its hash left as it was)."""
    deep = b"[" * depth + b"]" * depth
    log = tmp_path / "log.jsonl"
    lines = _day_log(tmp_path).split(b"\n")[:-1]
    if where == "torn":  # (a record cut short: a crash's torn line begins as one does)
        log.write_bytes(b"\n".join(lines) + b"\n" + b'{"event":' + deep[:depth])
        return log
    n = {"first": 0, "middle": 100, "last": len(lines) - 1}[where]
    lines[n] = lines[n][:-1] + b',"x":' + deep + b"}" if inside else deep
    log.write_bytes(b"\n".join(lines) + b"\n")
    return log


@pytest.mark.parametrize("inside", [False, True], ids=["bare", "in-a-record"])
@pytest.mark.parametrize("depth", [300, 1000, 1200])  # orjson: 255 to write, 1024 to read
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_audit_tools_read_a_line_nested_1000_deep_as_a_bad_line(
        tmp_path: Path, where: str, depth: int, inside: bool,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``audit verify``/``recover`` (and replay, report, and the writer reopening the log)
    say which line is bad; ``recover`` used to die of a RecursionError on the last line, and
    ``verify`` on the first."""
    from controller.audit import AuditLog, AuditLogError

    log = _log_with_a_deep_line(tmp_path, where, depth, inside)
    line = {"first": 1, "middle": 101, "last": 940}[where]
    capsys.readouterr()
    before = log.read_bytes()
    for command, exits in (("verify", (1,)), ("recover", (1,)), ("replay", (1, 2)),
                           ("report", (1, 2))):
        code = cli.main(["audit", command, str(log)])
        captured = capsys.readouterr()
        said = captured.out + captured.err
        assert code in exits, (command, code, said)
        assert "Traceback" not in said and "RecursionError" not in said, (command, said)
        assert f"line {line}:" in said or f"line {line} (seq" in said, (command, said)
    assert log.read_bytes() == before  # recover refused: nothing cut, nothing written
    with pytest.raises(AuditLogError) as info:
        AuditLog.open(log, durability="none")
    assert info.value.line == line


def test_audit_recover_cuts_a_torn_line_nested_1000_deep(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _log_with_a_deep_line(tmp_path, "torn")
    assert cli.main(["audit", "verify", str(log)]) == 1
    assert cli.main(["audit", "recover", str(log)]) == 0
    assert "recovered: cut a torn line 941" in capsys.readouterr().out
    assert cli.main(["audit", "verify", str(log)]) == 0
