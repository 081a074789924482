"""The shoewarden command line, run as a user would (subprocess) and in-process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from controller.audit import verify_file
from controller.cli import MAX_LINE, main

ROOT = Path(__file__).resolve().parent.parent
DAY = ROOT / "config" / "examples" / "gr-blackjack-day.jsonl"
MISTAKES = ROOT / "config" / "examples" / "gr-banco-punto-mistakes.jsonl"


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "controller", *args], input=stdin,
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_correct_day_exits_0_with_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--profile", "gr-blackjack", str(DAY)]) == 0
    out = capsys.readouterr().out
    assert "2 shoe(s)" in out and "deviations: none" in out


def test_mistakes_exit_1_and_name_line_code_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--profile", "gr-banco-punto", str(MISTAKES)]) == 1
    out = capsys.readouterr().out.splitlines()
    burn = [line for line in out if "BURN_COUNT" in line]
    assert burn and burn[0].startswith("line 14: BURN_COUNT [warning]")
    assert "001 BP §9" in burn[0]
    assert any("CARD_BEFORE_BETS_CLOSED [critical]" in line for line in out)


def test_json_output_fields(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--profile", "gr-banco-punto", "--json", str(MISTAKES)]) == 1
    captured = capsys.readouterr()
    records = [json.loads(line) for line in captured.out.splitlines()]
    assert {r["code"] for r in records} == {"BURN_COUNT", "CARD_BEFORE_BETS_CLOSED",
                                            "CUT_CARD_POSITION"}
    for r in records:
        assert {"code", "severity", "line", "message", "rule", "evidence"} <= set(r)
        assert r["rule"].startswith("gr-banco-punto ")
    assert "summary:" in captured.err  # stdout stays pure JSON Lines


def test_bad_lines_are_reported_and_the_rest_still_checked(tmp_path: Path) -> None:
    lines = [
        '{"type":"table_open","table":"T","decks":6,"t":"2026-11-21T10:00:00Z"}',
        "not json",
        '{"type":"card","card":"1Z"}',
        '{"type":"bogus"}',
        "",
        '{"type":"cut"}',
        '{"type":"shuffle"}',  # valid: shuffled without the opening check
    ]
    stream = tmp_path / "s.jsonl"
    stream.write_text("\n".join(lines) + "\n")
    result = run("check", "--profile", "gr-blackjack", str(stream))
    assert result.returncode == 2
    err = result.stderr
    for n, field in ((2, "not valid JSON"), (3, "card: bad card '1Z'"), (4, "type: unknown"),
                     (6, "offset: missing")):
        assert f"{stream}:{n}: bad input: {field}" in err
    assert "line 7: CHECK_MISSING" in result.stdout
    assert "Traceback" not in err


@pytest.mark.parametrize(("args", "needle"), [
    (["check", "--profile", "no-such-profile", "x.jsonl"], "no profile named 'no-such-profile'"),
    (["check", "--profile", "gr-blackjack", "missing.jsonl"], "missing.jsonl: no such file"),
    (["check", "--profile", "gr-blackjack", "--durability", "sometimes", "x"], "invalid choice"),
    (["check"], "required"),
    (["frobnicate"], "invalid choice"),
    (["profiles", "--show", "nope"], "no profile named 'nope'"),
    (["chart", "--profile", "nope"], "no profile named 'nope'"),
])
def test_bad_arguments_exit_2_without_traceback(args: list[str], needle: str) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert needle in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_profile_file_names_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "broken.toml"
    bad.write_text((ROOT / "config/profiles/gr-blackjack.toml").read_text()
                   .replace('name = "gr-blackjack"', 'name = "broken"')
                   .replace('mode = "five"', 'mode = "six"'))
    result = run("check", "--profile", str(bad), str(DAY))
    assert result.returncode == 2
    assert f"{bad}: burn.mode: 'six' is not one of" in result.stderr


def test_non_utf8_input(tmp_path: Path) -> None:
    stream = tmp_path / "bin.jsonl"
    stream.write_bytes(b'{"type":"shuffle"}\n\xff\xfe\n')
    result = run("check", "--profile", "gr-blackjack", str(stream))
    assert result.returncode == 2
    assert "not UTF-8" in result.stderr and "Traceback" not in result.stderr


def test_stdin_input() -> None:
    result = run("check", "--profile", "gr-blackjack", "-", stdin=DAY.read_text())
    assert result.returncode == 0, result.stderr


def test_log_is_written_and_verifies(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    assert main(["check", "--profile", "gr-banco-punto", "--log", str(log),
                 str(MISTAKES)]) == 1
    assert verify_file(log).ok
    records = [json.loads(line) for line in log.read_text().splitlines()]
    header = records[0]
    assert header["kind"] == "header"
    assert header["profile"]["name"] == "gr-banco-punto"
    assert header["profile"]["burn"]["source"] == "001 BP §9"
    assert header["software"]["name"] == "shoewarden" and header["table"] == "BP-01"
    inputs = [r for r in records if r["kind"] == "input"]
    assert len(inputs) == sum(1 for line in MISTAKES.read_text().splitlines() if line.strip())
    assert inputs[0]["line"] == 1
    devs = [r for r in records if r["kind"] == "output" and r["output"]["type"] == "deviation"]
    assert len(devs) == 3


def test_profiles_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles"]) == 0
    listing = capsys.readouterr().out
    for name in ("gr-blackjack", "gr-blackjack-shuffler", "gr-chemin-de-fer",
                 "gr-baccarat-two-tableaux", "gr-banco-punto", "gr-banco-punto-shuffler",
                 "gr-stud-poker", "live-baccarat", "live-blackjack", "ru-blackjack"):
        assert name in listing
    assert main(["profiles", "--show", "ru-blackjack"]) == 0
    shown = capsys.readouterr().out
    assert "on_dealer_change = 1" in shown and "source: 004 §3.8" in shown


def test_chart_is_generated_from_the_machine(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chart", "--profile", "gr-blackjack-shuffler"]) == 0
    chart = capsys.readouterr().out
    assert chart.startswith("stateDiagram-v2")
    assert "round --> return_discards: round_end" in chart
    # (an edge's label lists every event that takes it: a load after the shuffler's own
    # shuffle between rounds takes the same one)
    assert re.search(r"return_discards --> ready: .*\bdiscards_returned\b", chart)
    assert "cut_card" not in chart.replace("cut_card_placed", "")  # no cut card in this game
    assert main(["chart", "--profile", "gr-blackjack"]) == 0
    assert re.search(r"round --> last_round: .*\bcut_card\b", capsys.readouterr().out)


@pytest.mark.parametrize("name", ["gr-blackjack", "gr-blackjack-shuffler", "gr-stud-poker"])
def test_the_charted_machine_holds_the_graph_the_engine_runs(name: str) -> None:
    """The machine is built from the engine's graph when asked for: every (event, state)
    pair and destination of the graph is one of its transitions, it has no other, and
    building it mid-day moves nothing (it has no model: the engine keeps the state)."""
    from engine_streams import day, events, run

    engine = run(name, events(day(name)[:2])).engine
    state = engine.state
    machine = engine.machine
    assert engine.state == state != "closed"
    charted = {(trigger, source, t.dest)
               for trigger, event in machine.events.items()
               for source, ts in event.transitions.items() for t in ts}
    assert charted == {(trigger, source, dest)
                       for (trigger, source), dests in engine.graph.items() for dest in dests}
    assert engine.machine is machine


def test_console_script_and_module_agree() -> None:
    result = run("--version")
    assert result.returncode == 0 and result.stdout.startswith("shoewarden ")


def test_a_line_too_long_to_be_an_event_is_passed_over_not_held(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a 2 GB line ended in a MemoryError traceback (a review): a line over MAX_LINE is read
    # in pieces and dropped, named by its number, and the lines after it are still checked
    stream = tmp_path / "long.jsonl"
    stream.write_bytes(b'{"type":"table_open","table":"T1","decks":6}\n'
                       + b'{"type":"card","card":"' + b"A" * (2 * MAX_LINE) + b'"}\n'
                       + b'{"type":"table_close"}\n' + b"x" * (MAX_LINE + 5))
    assert main(["check", "--profile", "gr-blackjack", str(stream)]) == 2
    captured = capsys.readouterr()
    assert f"{stream}:2: bad input: line longer than {MAX_LINE:,} bytes: not read" in captured.err
    assert f"{stream}:4: bad input: line longer than" in captured.err
    assert "line 3: CHECK_MISSING" in captured.out  # the close after it was read


def test_a_command_that_writes_no_log_does_not_import_structlog(tmp_path: Path) -> None:
    """structlog's import is half a command's start (its ``dev`` module pulls in rich): it
    is imported when a log is opened, not by the command line itself."""
    probe = ("import sys, contextlib, io\n"
             "from controller.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             f"    main(['check', '--profile', 'gr-blackjack', {str(DAY)!r}])\n"
             "print('structlog' in sys.modules)\n"
             "from controller.audit import AuditLog\n"
             f"AuditLog.open({str(tmp_path / 'log.jsonl')!r}, durability='none').close()\n"
             "print('structlog' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True"]


def test_a_log_of_a_stream_with_no_event_holds_its_header(tmp_path: Path) -> None:
    """Every line bad: the log was left empty, which verify rightly reads as a wiped log."""
    stream = tmp_path / "bad.jsonl"
    stream.write_text('garbage\n{"x": 1}\n')
    log = tmp_path / "log.jsonl"
    assert main(["check", "--profile", "gr-blackjack", str(stream), "--log", str(log)]) == 2
    result = verify_file(log)
    assert result.ok and result.records == 1
    assert json.loads(log.read_text().splitlines()[0])["kind"] == "header"


@pytest.mark.parametrize("argv", [
    ["check", "--profile", "gr-blackjack", "{F}"], ["check", "--profile", "gr-blackjack", "{D}"],
    ["audit", "verify", "{F}"], ["audit", "verify", "{D}"], ["audit", "replay", "{F}"],
    ["audit", "report", "{F}"], ["audit", "recover", "{F}"], ["audit", "recover", "{D}"],
    ["audit", "verify", "--key", "{F}", "{L}"], ["audit", "verify", "--anchors", "{F}", "{L}"],
])
def test_a_fifo_or_a_directory_given_as_a_file_is_named_not_waited_on(
        tmp_path: Path, argv: list[str]) -> None:
    # a review: replay, report and --key opened a FIFO and waited forever for a writer; check,
    # verify and recover called a FIFO, a device and a directory "no such file"
    fifo, log = tmp_path / "fifo", tmp_path / "T1-2026-11-21.jsonl"
    os.mkfifo(fifo)
    log.write_text("")
    args = [a.format(F=fifo, D=tmp_path, L=log) for a in argv]
    said = "not a regular file" if "{F}" in argv else "a directory"
    result = subprocess.run([sys.executable, "-m", "controller", *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert said in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_a_profile_saved_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    # a review: "not valid TOML: Invalid statement (at line 1, column 1)", no word of the BOM
    text = (ROOT / "config" / "profiles" / "gr-blackjack.toml").read_text(encoding="utf-8")
    bom = tmp_path / "bom-blackjack.toml"
    bom.write_bytes(b"\xef\xbb\xbf" + text.replace('name = "gr-blackjack"',
                                                   'name = "bom-blackjack"').encode())
    result = run("profiles", "--show", str(bom))
    assert result.returncode == 0 and result.stdout.startswith("bom-blackjack:"), result.stderr


def test_report_html_to_a_missing_directory_is_refused_before_the_report(
        tmp_path: Path) -> None:
    # a review: the whole report was built and printed, then "No such file or directory"
    log = tmp_path / "day.jsonl"
    assert run("check", "--profile", "gr-blackjack", "--log", str(log), str(DAY)).returncode == 0
    result = run("audit", "report", "--html", str(tmp_path / "none" / "r.html"), str(log))
    assert result.returncode == 2 and result.stdout == ""
    assert "--html" in result.stderr and "its directory does not exist" in result.stderr


def test_a_pipe_the_shell_opened_is_read_like_a_file(tmp_path: Path) -> None:
    # a review of the FIFO check: `audit replay <(zcat day.jsonl.gz)` and `--key <(pass …)`
    # had worked and were refused; a pipe the shell opened has its writer
    log = tmp_path / "day.jsonl"
    assert run("check", "--profile", "gr-blackjack", "--log", str(log), str(DAY)).returncode == 0
    py = sys.executable
    replay = subprocess.run(["bash", "-c", f"{py} -m controller audit replay <(cat {log})"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert replay.returncode == 0 and "identical" in replay.stdout, replay.stderr
    check = subprocess.run(["bash", "-c", f"{py} -m controller check --profile gr-blackjack "
                            f"<(cat {DAY})"], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
    assert check.returncode == 0 and "deviations: none" in check.stdout, check.stderr
