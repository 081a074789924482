"""``shoewarden bench``, ``sim`` and ``ports``: the controller's real drivers against the
simulated table in a child process.

Every profile's day completes with zero deviations and the card check holds (each card
the simulated devices reported is in the audit log once); every bundled scenario meets
its ``expect`` and completes with the card check holding; the log verifies and replays.
No timed assertions: timeouts only bound the waiting.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_audit_helpers import line_of, rehash

from controller.app.bench import (
    EXIT_BAD_INPUT,
    EXIT_DEVIATION,
    EXIT_OK,
    BenchError,
    BenchOptions,
    BenchResult,
    BenchSequencer,
    print_summary,
    read_log_facts,
    run_bench,
)
from controller.app.ports import print_ports
from controller.audit import table_files, verify_file
from controller.audit.replay import replay
from controller.audit.report import build_report
from controller.cards import parse_card
from controller.cli import main
from controller.events import CardDrawn, DeviceFault
from controller.profiles import load_profile, profile_names
from simulators.scenario import load_scenario, scenario_names

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def bench(tmp_path: Path, **kw: object) -> tuple[BenchResult, str]:
    out = io.StringIO()
    opts = BenchOptions(log=str(tmp_path / "logs"), **kw)  # type: ignore[arg-type]
    result = run_bench(opts, out)
    print_summary(result, out)
    return result, out.getvalue()


def log_is_sound(result: BenchResult) -> None:
    assert result.log is not None
    checked = verify_file(result.log)
    assert checked.ok, checked
    replayed = replay([result.log])
    assert not replayed.differences, replayed.differences[:3]


@pytest.mark.parametrize("profile", profile_names())
def test_every_profile_bench_completes_with_zero_deviations(profile: str,
                                                            tmp_path: Path) -> None:
    p = load_profile(profile)
    small = p.shuffler_mode or p.shuffle.every_round  # blocks of rounds: keep them short
    result, out = bench(tmp_path, profile=profile, shoes=1, seed=3, pace=0.0,
                        rounds_per_block=8 if small else None)
    assert result.code == EXIT_OK, out
    assert result.failure is None and result.facts is not None
    assert not result.facts.deviations, out
    assert result.card_check is True and result.sim_cards
    assert result.cards == len(result.sim_cards) == len(result.facts.cards)
    assert result.facts.scripted == list(range(1, len(result.facts.scripted) + 1))
    assert "card check:" in out and "no card lost or counted twice" in out
    log_is_sound(result)
    # the log names each device, its driver, its port (the pty) and its identity
    connected = [json.loads(line)["event"] for line in result.log.read_text().splitlines()
                 if '"type":"device_connected"' in line and '"kind":"input"' in line]
    assert {c["device"] for c in connected} == ({"scanner", "shuffler"} if p.shuffler_mode
                                               else {"shoe", "scanner", "shuffler"})
    assert all(c["port"].startswith("/dev/pts/") and c["serial"] and c["driver"].startswith(
        "swp-") for c in connected)


@pytest.mark.parametrize("name", scenario_names())
def test_every_bundled_scenario_meets_its_expect(name: str, tmp_path: Path) -> None:
    sc = load_scenario(name)
    result, out = bench(tmp_path, scenario=name)
    assert result.code == EXIT_OK, out
    assert result.facts is not None
    assert set(result.facts.deviations) <= set(sc.expect), out
    assert result.card_check is True, out  # no card lost or counted twice
    log_is_sound(result)
    if not any(f.time is not None for f in sc.faults) and sc.expect:
        # faults on cards and dealer mistakes: the expected deviations do occur
        assert set(result.facts.deviations) == set(sc.expect), out
    if "SHUFFLE_SUSPECT" in result.facts.deviations:
        # the bench shows the cards that gave the order away, under the deviation
        lines = out.splitlines()
        at = next(i for i, line in enumerate(lines) if ": SHUFFLE_SUSPECT [" in line)
        assert lines[at + 1].strip().startswith("the run (position:card"), out


def test_an_unexpected_deviation_fails_the_bench(tmp_path: Path) -> None:
    sc = tmp_path / "short-burn.toml"
    sc.write_text('name = "short-burn"\nexpect = []\nprofile = "gr-blackjack"\nseed = 4\n'
                  '[plan]\nshoes = 1\n[[mistake]]\nkind = "burn_four"\n')
    result, _ = bench(tmp_path, scenario=str(sc))
    assert result.code == EXIT_DEVIATION and result.unexpected == ["BURN_COUNT"]
    assert result.card_check is True


def test_bench_command_line(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "controller", "bench", "--profile",
                          "gr-stud-poker", "--shoes", "1", "--rounds-per-block", "3", "--seed",
                          "2", "--log", str(tmp_path / "one.jsonl")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == EXIT_OK, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("bench: profile gr-stud-poker, seed 2")
    assert "block 1 (shuffles 1-3): 3 round(s)" in run.stdout  # a line per block
    assert "result: OK" in run.stdout and "Traceback" not in run.stderr
    assert (tmp_path / "one.jsonl").is_file() and (tmp_path / "anchors.jsonl").is_file()
    # a second run on the finished log resumes it: nothing left to feed, the check holds
    again = subprocess.run([sys.executable, "-m", "controller", "bench", "--profile",
                            "gr-stud-poker", "--shoes", "1", "--rounds-per-block", "3",
                            "--seed", "2", "--log", str(tmp_path / "one.jsonl")],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == EXIT_OK, again.stdout + again.stderr
    assert "resuming one.jsonl" in again.stdout and "no card lost" in again.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--profile", "no-such-profile"], "no-such-profile"),
    (["--scenario", "no-such-scenario"], "no scenario named 'no-such-scenario'"),
    (["--profile", "gr-chemin-de-fer", "--scenario", "dealer-mistakes"],
     "mistake[1].kind: profile gr-chemin-de-fer burns no cards"),
    (["--profile", "gr-blackjack", "--shoes", "0"], "must be at least 1"),
    # a review: the whole day was dealt, then ANCHOR_WRITE_FAILED and exit 1
    (["--profile", "gr-blackjack", "--anchors", "/tmp"], "--anchors /tmp: a directory"),
    (["--profile", "gr-blackjack", "--publish", "nats://127.0.0.1:abc"],
     "argument --publish: 'nats://127.0.0.1:abc'"),
])
def test_bench_bad_input_is_one_line_no_traceback(args: list[str], message: str) -> None:
    run = subprocess.run([sys.executable, "-m", "controller", "bench", *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == EXIT_BAD_INPUT
    assert message in run.stderr and "Traceback" not in run.stderr


def test_bench_refuses_a_log_of_another_day(tmp_path: Path) -> None:
    result, out = bench(tmp_path, profile="gr-stud-poker", shoes=1, rounds_per_block=2, seed=1)
    assert result.code == EXIT_OK, out
    with pytest.raises(BenchError, match=r"holds another bench day \(its seed is not 2\)"):
        bench(tmp_path, profile="gr-stud-poker", shoes=1, rounds_per_block=2, seed=2)


def test_the_bench_log_commits_to_its_seed_and_reveals_it_when_the_day_is_over(
        tmp_path: Path) -> None:
    """Issue 8: the first record held the seed, from which every card of the day can be
    predicted before it is dealt. Now the header holds a hash of it (with a nonce kept in
    <log>.seed, 0600), and the seed comes at the end of the day."""
    import hashlib

    from controller.app.bench import seed_file

    result, out = bench(tmp_path, profile="gr-blackjack", shoes=1, seed=11)
    assert result.code == EXIT_OK, out
    lines = result.log.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    reveal = records[-1]
    assert reveal["kind"] == "seed_reveal" and reveal["seed"] == 11
    before = "\n".join(lines[:-1])
    assert '"seed"' not in before and '"seed":11' not in before  # never before the end
    commitment = records[0]["settings"]["seed_commitment"]
    assert commitment == "sha256:" + hashlib.sha256(
        f"{reveal['nonce']}:11".encode()).hexdigest()
    kept = seed_file(result.log)
    assert oct(kept.stat().st_mode & 0o777) == "0o600"
    assert json.loads(kept.read_text())["nonce"] == reveal["nonce"]
    log_is_sound(result)
    # the auditor's report checks the reveal against the header (a review: no tool did)
    report = build_report([result.log])
    assert report.verified and any("revealed matches the header's commitment" in line
                                   for line in report.verdict), report.verdict
    forged = {**reveal, "seed": 12}  # the reveal re-chained by a forger: the chain holds
    lines[-1] = line_of(rehash(forged)).decode().rstrip("\n")
    result.log.write_text("\n".join(lines) + "\n")
    report = build_report([result.log])
    assert not report.verified
    assert any(line.startswith("seed: DOES NOT MATCH") and "seed 12" in line
               for line in report.verdict), report.verdict


def test_bench_facts_count_unreadable_cards_as_cards(tmp_path: Path) -> None:
    """The stud-foreign-card scenario: a foreign card and an unreadable one; the card check
    counts the unreadable card (logged as UNREADABLE_CARD) and the foreign card."""
    result, _ = bench(tmp_path, scenario="stud-foreign-card")
    assert result.facts is not None and result.sim_cards is not None
    assert "??" in result.sim_cards and result.facts.cards.count("??") == 1
    assert len(result.sim_cards) == result.cards + 1  # the unreadable card is not a `card`
    assert read_log_facts(result.log, "shoe").cards == result.sim_cards  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the sequencer


def test_bench_sequencer_numbers_scripted_events_and_skips_the_durable_ones() -> None:
    seq = BenchSequencer(skip=2)
    seq.console_line({"n": 0, "step": 0, "after": {"shoe": 0},
                      "event": {"type": "table_open", "table": "T1", "decks": 1,
                                "t": "2026-11-21T10:00:00Z"}})
    assert seq.ready() == []  # scripted input 1: already in the log
    seq.console_line({"n": 1, "step": 1, "after": {"shoe": 1}, "device": "shoe",
                      "attach": {"t": "2026-11-21T10:00:05Z"}})
    seq.device_event("shoe", DeviceFault(device="shoe", code="SILENT",
                                         t="2026-11-21T17:00:00.000Z"), counted=False)
    # a live event is fed at once, unnumbered, on the dealer's clock (still the typed event)
    assert seq.ready() == [(DeviceFault(device="shoe", code="SILENT",
                                        t="2026-11-21T10:00:00Z"), None)]
    seq.device_event("shoe", CardDrawn(card=parse_card("AS"), t="2026-11-21T17:00:01.000Z"))
    seq.console_line({"n": 2, "step": 2, "after": {"shoe": 1},
                      "event": {"type": "round_end", "t": "2026-11-21T10:00:09Z"}})
    seq.console_line({"n": 3, "after": {"shoe": 1}, "end": True, "cards": {"shoe": ["AS"]}})
    # the card (scripted 2, with the attached time) is skipped; round_end is number 3
    assert seq.ready() == [({"type": "round_end", "t": "2026-11-21T10:00:09Z"}, 3)]
    assert seq.ordinal == 3 and seq.ended and seq.cards == {"shoe": ["AS"]}
    assert seq.last_t == "2026-11-21T10:00:09Z"


# --------------------------------------------------------------------------- sim and ports


def test_sim_prints_its_ports_and_stops_on_sigterm() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "controller", "sim", "--profile",
                             "gr-stud-poker", "--seed", "1", "--shoes", "1"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ports = json.loads(proc.stdout.readline())
        assert set(ports) == {"shoe", "scanner", "shuffler", "console"}
        assert all(os.path.realpath(ports[d]).startswith("/dev/pts/")
                   for d in ("shoe", "scanner", "shuffler"))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert not any(os.path.exists(p) for p in ports.values())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_ports_without_a_usb_backend_is_one_line_no_traceback() -> None:
    run = subprocess.run([sys.executable, "-m", "controller", "ports"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "Traceback" not in run.stderr
    assert run.stdout.startswith("serial ports (")
    usb_lines = [line for line in run.stdout.splitlines() if line.startswith("usb devices")]
    assert len(usb_lines) == 1
    run = subprocess.run([sys.executable, "-m", "controller", "ports", "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert set(json.loads(run.stdout)) == {"serial", "usb", "usb_error"}


def test_ports_lists_serial_ports_and_usb_devices() -> None:
    from simulators.devices import ContinuousShuffler
    from simulators.usb_backend import SimBackend

    class Port:
        device, description, hwid, serial_number = ("/dev/ttyUSB0", "FT232R USB UART",
                                                    "USB VID:PID=0403:6001 SER=A10K3F",
                                                    "A10K3F")

    out = io.StringIO()
    print_ports(out, backend=SimBackend(ContinuousShuffler()), comports=lambda: [Port()])
    text = out.getvalue()
    assert "/dev/ttyUSB0  FT232R USB UART  hwid USB VID:PID=0403:6001 SER=A10K3F  serial " \
           "A10K3F" in text
    assert "usb devices (1):" in text and "1209:5357" in text and "CS000001" in text
    out = io.StringIO()
    print_ports(out, comports=lambda: [], backend=None)  # this machine: maybe no libusb
    assert out.getvalue().startswith("serial ports (0):")


def test_benches_deal_side_by_side_as_different_tables(tmp_path: Path) -> None:
    """--table names the table in the log (issue 8): two benches into one log directory at
    once, each its own table and chain; a third on a table in use is refused."""
    def bench(table: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "controller", "bench", "--profile",
                                 "gr-blackjack", "--shoes", "1", "--seed", "3", "--log",
                                 str(tmp_path / "logs"), "--table", table, "--pace", "0.01"],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    a, b = bench("BJ-01"), bench("BJ-02")
    # the third starts once both hold their tables (their logs begun): a fixed half
    # second lost the race on a busy host, the third taking BJ-01 first
    deadline = time.monotonic() + 60
    while not all(table_files(tmp_path / "logs", t) for t in ("BJ-01", "BJ-02")):
        assert time.monotonic() < deadline and a.poll() is None and b.poll() is None
        time.sleep(0.05)
    same = subprocess.run([sys.executable, "-m", "controller", "bench", "--profile",
                           "gr-blackjack", "--shoes", "1", "--log", str(tmp_path / "logs"),
                           "--table", "BJ-01"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    out_a, _ = a.communicate(timeout=120)
    out_b, _ = b.communicate(timeout=120)
    assert a.returncode == 0 and b.returncode == 0, (out_a[-500:], out_b[-500:])
    assert same.returncode == 2 and "in use by process" in same.stderr, same.stderr
    for table in ("BJ-01", "BJ-02"):
        (log,) = table_files(tmp_path / "logs", table)
        records = [json.loads(line) for line in log.read_text().splitlines()]
        assert {r["table"] for r in records if r.get("table")} == {table}
        assert main(["audit", "verify", str(log)]) == 0


def _umask_000() -> None:
    os.umask(0)


def test_audit_data_is_0750_and_0640_whatever_the_umask(tmp_path: Path) -> None:
    """Issue 8: under umask 000 the --log root was 0777 (and it holds the anchors)."""
    logs = tmp_path / "a" / "logs"
    run = subprocess.run([sys.executable, "-m", "controller", "bench", "--profile",
                          "gr-blackjack", "--shoes", "1", "--seed", "3", "--log", str(logs)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         preexec_fn=_umask_000)
    assert run.returncode == 0, run.stdout[-500:] + run.stderr[-500:]
    modes = {p.relative_to(tmp_path).as_posix(): oct(p.stat().st_mode & 0o777)
             for p in [tmp_path / "a", *sorted((tmp_path / "a").rglob("*"))]}
    assert modes == {"a": "0o750", "a/logs": "0o750", "a/logs/anchors.jsonl": "0o640",
                     "a/logs/T1": "0o750", "a/logs/T1/.shoewarden.lock": "0o640",
                     "a/logs/T1/T1-2026-11-21.jsonl": "0o640",
                     "a/logs/T1/T1-2026-11-21.jsonl.seed": "0o600"}, modes  # the seed: 0600


def test_a_killed_simulator_leaves_nothing_in_the_temp_dir(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    bench = subprocess.Popen([sys.executable, "-m", "controller", "bench", "--profile",
                              "gr-blackjack", "--shoes", "1", "--pace", "0.05", "--log",
                              str(tmp_path / "logs")], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not list(tmp.glob("shoewarden-sim-*/pid")) and time.monotonic() < deadline:
        time.sleep(0.05)
    (pid_file,) = tmp.glob("shoewarden-sim-*/pid")
    child = int(pid_file.read_text())
    time.sleep(0.5)
    os.kill(child, signal.SIGKILL)  # the simulator dies without cleaning up
    bench.communicate(timeout=60)
    assert bench.returncode != 0
    assert not list(tmp.glob("shoewarden-sim-*"))
    # both killed at once: the next simulator sweeps what they left
    stale = tmp / "shoewarden-sim-stale"
    stale.mkdir()
    (stale / "pid").write_text(f"{child}\n")  # that process is gone
    kept = tmp / "shoewarden-sim-alive"
    kept.mkdir()
    (kept / "pid").write_text(f"{os.getpid()}\n")
    run = subprocess.run([sys.executable, "-m", "controller", "bench", "--profile",
                          "gr-blackjack", "--shoes", "1", "--log", str(tmp_path / "logs2")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-500:]
    assert [p.name for p in tmp.glob("shoewarden-sim-*")] == ["shoewarden-sim-alive"]


def test_bench_refuses_a_log_that_is_another_programs_file(tmp_path: Path) -> None:
    # a review: an input stream given for --log was refused for a missing .seed file
    stream = tmp_path / "stream.jsonl"
    stream.write_text('{"type": "table_open", "table": "T1", "decks": 6}\n')
    run = subprocess.run([sys.executable, "-m", "controller", "bench", "--profile",
                          "gr-blackjack", "--log", str(stream)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == EXIT_BAD_INPUT and "Traceback" not in run.stderr
    assert f"--log {stream}: not an audit log" in run.stderr
    assert stream.read_text().count("\n") == 1  # left as it was
