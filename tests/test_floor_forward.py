"""The table-side forwarder on a real nats-server: every record once, in order, no gap,
through a broker killed with SIGKILL and a forwarder restarted."""

from __future__ import annotations

import asyncio
import select
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from floor.forward import (
    STREAM,
    WRONG_LAST_SEQUENCE,
    Connection,
    Forwarder,
    audit_subject,
    msg_id,
)
from tests.floor_helpers import ROOT, append, grow, table_log
from tests.nats_helpers import forward_once, stream_messages
from tests.servers import NatsServer


def expected(path: Path, table: str = "BP-01") -> list[tuple[str, str, bytes]]:
    return [(audit_subject(table), msg_id(table, path.name, orjson.loads(line)["seq"]), line)
            for line in path.read_bytes().splitlines()]


def wait_for(cond, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_log_on_disk_is_published_once_in_order_and_a_rerun_sends_nothing(
        nats_server: NatsServer, tmp_path: Path) -> None:
    path = table_log(tmp_path / "logs")
    first = Forwarder([tmp_path / "logs"], Connection([nats_server.url]), stop_when_done=True)
    forward_once(first)
    assert first.error is None and first.published == len(expected(path))
    assert stream_messages(nats_server.url) == expected(path)
    again = Forwarder([tmp_path / "logs"], Connection([nats_server.url]), stop_when_done=True)
    forward_once(again)  # a restart asks the stream where it stands: nothing to resend
    assert (again.published, again.duplicates) == (0, 0)
    assert stream_messages(nats_server.url) == expected(path)


def test_a_damaged_line_stops_its_table_at_it_says_where_and_the_command_exits_1(
        nats_server: NatsServer, tmp_path: Path) -> None:
    """A review: a line that is no record (here bytes that are not UTF-8) was retried
    forever, silently — `forward` never ended and published nothing more."""
    path = table_log(tmp_path / "logs")
    lines = path.read_bytes().splitlines(keepends=True)
    lines[5] = b'{"kind":"input","seq":\xff}\n'
    path.write_bytes(b"".join(lines))
    run = [sys.executable, "-m", "controller", "forward", "--logs", str(tmp_path / "logs"),
           "--publish", nats_server.url]
    r = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert f"{path}: line 6: a record that is not JSON: not published, nor anything after " \
        "it of table BP-01" in r.stderr and "Traceback" not in r.stderr
    assert "5 record(s) published" in r.stdout
    assert stream_messages(nats_server.url) == [  # the records before it, once, in order
        (audit_subject("BP-01"), msg_id("BP-01", path.name, orjson.loads(line)["seq"]),
         line.rstrip(b"\n")) for line in lines[:5]]


def test_credentials_and_ca_files_that_are_none_are_refused_at_once(tmp_path: Path) -> None:
    """nats-py reads a credentials file in a loop that ends only at its JWT's BEGIN line: a
    file without one hung the forwarder silently (a review); a CA file that is no PEM was
    retried forever."""
    bad = tmp_path / "bad"
    bad.write_text("garbage\n")
    for option, url, said in (("--nats-creds", "nats://127.0.0.1:1",
                               "not a NATS credentials file (no user JWT and no NKEY seed"),
                              ("--nats-ca", "tls://127.0.0.1:1",
                               "not a PEM file of CA certificates")):
        r = subprocess.run([sys.executable, "-m", "controller", "forward", "--logs",
                            str(tmp_path), "--publish", url, option, str(bad)], cwd=ROOT,
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and f"{option} {bad}: {said}" in r.stderr, r.stderr


@pytest.mark.slow  # (end to end: processes and servers started and killed)
def test_a_growing_log_reaches_the_stream_whole_through_a_broker_killed_and_restarted(
        nats_server: NatsServer, tmp_path: Path) -> None:
    source_dir = tmp_path / "source"
    source = table_log(source_dir).read_bytes()
    target = tmp_path / "logs" / "BP-01" / "BP-01-2026-11-21.jsonl"
    pieces = grow(source, target, [4000, 4001, 60_000, 120_017, 200_000])
    fwd = Forwarder([tmp_path / "logs"], Connection([nats_server.url]))
    fwd.start()
    try:
        for i, piece in enumerate(pieces):
            append(target, piece)
            if i == 2:
                nats_server.kill()  # SIGKILL: acks in flight are lost, the table writes on
                time.sleep(3)  # longer than a publish waits for its ack
            if i == 3:
                nats_server.start()
            time.sleep(0.2)
        want = expected(target)
        wait_for(lambda: fwd.cursors.get("BP-01") is not None
                 and fwd.cursors["BP-01"].seq == orjson.loads(want[-1][2])["seq"])
    finally:
        fwd.stop()
    assert fwd.error is None and fwd.failures > 0
    assert stream_messages(nats_server.url) == want  # once each, in order, no gap


def test_the_stream_refuses_a_record_that_does_not_follow_the_tables_last(
        nats_server: NatsServer, tmp_path: Path) -> None:
    path = table_log(tmp_path / "logs")
    forward_once(Forwarder([tmp_path / "logs"], Connection([nats_server.url]),
                           stop_when_done=True))
    lines = path.read_bytes().splitlines()

    async def publish_stale() -> int:
        import nats
        from nats.js.errors import APIError

        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        try:  # as a forwarder that missed the table's last record would
            await js.publish(audit_subject("BP-01"), lines[-1], stream=STREAM, headers={
                "Nats-Msg-Id": "BP-01:other:1", "Nats-Expected-Last-Subject-Sequence": "1"})
        except APIError as exc:
            return int(exc.err_code or 0)
        finally:
            await nc.close()
        return 0

    assert asyncio.run(publish_stale()) == WRONG_LAST_SEQUENCE
    assert stream_messages(nats_server.url) == expected(path)


def test_forward_on_the_command_line(nats_server: NatsServer, tmp_path: Path) -> None:
    path = table_log(tmp_path / "logs")
    run = [sys.executable, "-m", "controller", "forward", "--logs", str(tmp_path / "logs"),
           "--publish", nats_server.url]
    r = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=60)
    n = len(expected(path))
    assert r.returncode == 0 and f"{n} record(s) published, 0 already" in r.stdout
    assert stream_messages(nats_server.url) == expected(path)
    bad = subprocess.run([*run[:-1], "http://x:1"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "expected nats://HOST:PORT" in bad.stderr
    assert "Traceback" not in bad.stderr




def test_a_broker_out_of_reach_is_one_line_and_its_return_another_never_a_traceback(
        tmp_path: Path) -> None:
    """The broker down when the forwarder starts (a table's child writes to the dealer's
    terminal): one line saying it cannot be reached, however many attempts; one when it
    is reached; then every record goes."""
    path = table_log(tmp_path / "logs")
    broker = NatsServer(tmp_path)
    broker.kill()  # its port known, nothing listening there yet
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller", "forward", "--logs", str(tmp_path / "logs"),
         "--publish", broker.url], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        assert proc.stderr is not None
        # its first attempt failed (however slow the start; a silent forwarder fails here)
        assert select.select([proc.stderr], [], [], 30)[0], "nothing said in 30 s"
        first = proc.stderr.readline()
        time.sleep(1.0)  # two attempts more at 0.5 s
        assert proc.poll() is None
        broker.start()
        out, err = proc.communicate(timeout=60)
        err = first + err
    finally:
        if proc.poll() is None:
            proc.kill()
        broker.stop()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "encountered error" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert f"NATS {broker.url}: cannot reach the broker" in lines[0]
    assert lines[1].endswith(f"NATS {broker.url}: connected")
    n = len(path.read_bytes().splitlines())
    assert f"{n} record(s) published" in out, out


@pytest.mark.parametrize(("args", "said"), [
    (["--table", "a/b"], "--table: table id 'a/b' cannot name a log file"),
    (["--table", "T9"], "--table T9: no log of it under"),
    (["--witness-public", "pub.pem"], "--witness-from and --witness-public are run's and "
     "bench's"),
])
def test_forward_refuses_what_it_cannot_do(tmp_path: Path, args: list[str], said: str) -> None:
    """A review: each printed '0 record(s) published … tables none' and exited 0."""
    r = subprocess.run([sys.executable, "-m", "controller", "forward", "--logs", str(tmp_path),
                        "--publish", "nats://127.0.0.1:1", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr
