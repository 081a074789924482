"""``run``/``bench --publish`` run the forwarder as a child process of the table (no GIL
shared with the engine thread): its lifecycle on a real nats-server — a normal finish, the
table killed (the child finishes and exits), the child killed (the table deals on, says so,
and starts another that resumes where the stream stands)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from floor.forward import Connection, ForwardError
from floor.forward_process import (
    ForwarderProcess,
    child_argv,
    describe_exit,
    forwarder_process_for_log,
    parse_status,
)
from tests.floor_helpers import ROOT, append, grow, table_log
from tests.nats_helpers import stream_messages
from tests.servers import NatsServer, free_port
from tests.test_floor_forward import expected, wait_for

pytestmark = pytest.mark.slow  # real child processes and a real broker


def gone(pid: int) -> bool:
    """The process ended (a zombie not yet reaped by whoever adopted it counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def growing_log(tmp_path: Path) -> tuple[Path, list[bytes]]:
    source = table_log(tmp_path / "source").read_bytes()
    target = tmp_path / "logs" / "BP-01" / "BP-01-2026-11-21.jsonl"
    return target, grow(source, target, [4000, 60_000, 120_017])


def test_the_child_is_given_every_connection_option(tmp_path: Path) -> None:
    argv = child_argv(tmp_path, "BJ-01", Connection(
        ["nats://a:4222", "tls://b:4222"], creds="t.creds", tls_ca="ca.pem",
        disclosure="shoe"))
    assert argv[1:] == ["-m", "controller", "forward", "--logs", str(tmp_path), "--table",
                        "BJ-01", "--until-eof", "--publish", "nats://a:4222", "--publish",
                        "tls://b:4222", "--nats-creds", "t.creds", "--nats-ca", "ca.pem",
                        "--disclosure", "shoe"]
    assert describe_exit(-9) == "-9 (killed by SIGKILL)" and describe_exit(1) == "1"
    assert parse_status(b'noise\n{"published": 3, "caught_up": true}\n') == {
        "published": 3, "caught_up": True}
    assert parse_status(b"Traceback\n") is None
    with pytest.raises(ForwardError, match="needs the log in a log directory"):
        forwarder_process_for_log(tmp_path / "day.jsonl", Connection(["nats://a:1"]),
                                  say=print)


def test_a_normal_finish_publishes_the_whole_log_and_reports_as_the_thread_did(
        nats_server: NatsServer, tmp_path: Path) -> None:
    target, pieces = growing_log(tmp_path)
    append(target, pieces[0])
    table_log(tmp_path / "logs", table="PB-02")  # another table beside it: not this child's
    said: list[str] = []
    fwd = forwarder_process_for_log(target, Connection([nats_server.url]), say=said.append)
    assert fwd.proc is not None
    child = fwd.proc.pid
    for piece in pieces[1:]:
        append(target, piece)
        time.sleep(0.2)
    line = fwd.finish(10)
    want = expected(target)
    assert line == f"published {len(want)} record(s) to NATS"
    assert not fwd.alive_after_stop() and fwd.proc.returncode == 0 and gone(child)
    assert stream_messages(nats_server.url) == want  # this table only, once, in order
    assert said == []


def test_with_the_broker_down_the_table_is_told_what_is_left(tmp_path: Path) -> None:
    target = table_log(tmp_path / "logs")
    fwd = forwarder_process_for_log(target, Connection([f"nats://127.0.0.1:{free_port()}"]),
                                    say=print)
    begun = time.monotonic()
    line = fwd.finish(1)
    assert time.monotonic() - begun < 10  # the finish timeout holds, the table stops
    assert line.startswith("published 0 record(s) to NATS; the broker did not take the "
                           "rest in 1 s")
    assert fwd.alive_after_stop()


PARENT = """
import sys, time
from floor.forward import Connection
from floor.forward_process import forwarder_process_for_log
fwd = forwarder_process_for_log(sys.argv[1], Connection([sys.argv[2]]), say=print)
print(fwd.proc.pid, flush=True)
time.sleep(600)
"""


def test_a_table_killed_leaves_no_forwarder_behind_and_its_log_is_sent_first(
        nats_server: NatsServer, tmp_path: Path) -> None:
    target, pieces = growing_log(tmp_path)
    append(target, pieces[0])
    table = subprocess.Popen([sys.executable, "-c", PARENT, str(target), nats_server.url],
                             cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert table.stdout is not None
    child = int(table.stdout.readline())
    for piece in pieces[1:]:
        append(target, piece)
    time.sleep(0.5)
    assert not gone(child)
    table.kill()  # SIGKILL: nothing of the table's runs any more; its pipe closes
    table.wait()
    wait_for(lambda: gone(child), timeout=20)
    assert stream_messages(nats_server.url) == expected(target)


def test_a_forwarder_killed_is_reported_once_and_started_again_the_table_deals_on(
        nats_server: NatsServer, tmp_path: Path) -> None:
    target, pieces = growing_log(tmp_path)
    append(target, pieces[0])
    said: list[str] = []
    fwd = ForwarderProcess(target.parent.parent, "BP-01", Connection([nats_server.url]),
                           say=said.append, restart_first=0.2).start()
    try:
        first = fwd.proc
        assert first is not None
        wait_for(lambda: len(stream_messages(nats_server.url)) > 0)
        os.kill(first.pid, signal.SIGKILL)
        append(target, pieces[1])  # the table writes on meanwhile
        wait_for(lambda: fwd.proc is not first)
        assert len(said) == 1
        assert f"(pid {first.pid}) exited with status -9 (killed by SIGKILL)" in said[0]
        assert "the table deals on" in said[0]
        for piece in pieces[2:]:
            append(target, piece)
        want = expected(target)
        wait_for(lambda: len(stream_messages(nats_server.url)) == len(want))
    finally:
        line = fwd.finish(10)
    assert fwd.exits == [-signal.SIGKILL] and len(said) == 1
    assert line.startswith("published ") and "did not take the rest" not in line
    assert stream_messages(nats_server.url) == want  # resumed: nothing twice, no gap
    assert [orjson.loads(m[2])["seq"] for m in want] == list(range(1, len(want) + 1))


def children_of(pid: int) -> list[tuple[int, str]]:
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append((int(proc.name), cmdline))
    return out


def test_bench_publish_deals_on_through_its_forwarder_killed_and_says_so(
        nats_server: NatsServer, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    bench = subprocess.Popen(
        [sys.executable, "-m", "controller", "bench", "--profile", "gr-banco-punto",
         "--shoes", "1", "--seed", "5", "--pace", "0.01", "--log", str(logs), "--table",
         "PB-02", "--publish", nats_server.url, "--no-progress"], cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not (found := [p for p, cmd in children_of(bench.pid) if "--until-eof" in cmd]):
            assert time.monotonic() < deadline and bench.poll() is None, "no forwarder child"
            time.sleep(0.05)
        assert "--table PB-02" in dict(children_of(bench.pid))[found[0]]
        time.sleep(0.5)
        os.kill(found[0], signal.SIGKILL)
        out, err = bench.communicate(timeout=240)
    finally:
        if bench.poll() is None:
            bench.kill()
    assert bench.returncode == 0, out + err  # the table dealt its day
    assert err.count("exited with status -9 (killed by SIGKILL)") == 1, err
    assert "bench: published" in out and "did not take the rest" not in out
    path = next((logs / "PB-02").glob("*.jsonl"))
    assert stream_messages(nats_server.url) == expected(path, "PB-02")  # once, in order
