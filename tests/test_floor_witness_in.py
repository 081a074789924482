"""The table records the floor's latest signed checkpoint of its chain in its own log
(``bench --witness-from URL``), with real nats-server and PostgreSQL: the floor signs at
every round end, the table takes each new checkpoint as a ``witness_checkpoint`` input; the
log still verifies and replays, and every recorded checkpoint is the floor's signature on a
record the log holds."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from controller.audit.witness import (
    Checkpoint,
    check_signatures,
    load_or_create_key,
    load_public_key,
)
from floor.consume import NatsConsumer
from floor.core import Floor
from floor.forward import Connection
from floor.options import nats_urls, positive_seconds
from floor.store import PostgresStore
from tests.floor_helpers import ROOT
from tests.servers import NatsServer, PostgresServer


@pytest.mark.slow
def test_a_table_records_the_floors_signed_checkpoints_and_its_log_still_replays(
        nats_server: NatsServer, pg_server: PostgresServer, tmp_path: Path) -> None:
    bench, _, logs = _bench_beside_a_floor("witness", tmp_path, nats_server, pg_server)
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert "refused" not in bench.stderr
    (log,) = sorted((logs / "BJ-01").glob("*.jsonl"))
    records = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    got = [r["event"] for r in records
           if r["kind"] == "input" and r["event"]["type"] == "witness_checkpoint"]
    assert len(got) >= 3, "the floor signs at every round end: several came back"
    by_seq = {r["seq"]: r["hash"] for r in records}
    cps = [Checkpoint(e["table"], e["file"], e["chain_seq"], e["chain_hash"], e["signed_at"],
                      e["key"], e["sig"], n) for n, e in enumerate(got, start=1)]
    good, bad = check_signatures(cps, load_public_key(tmp_path / "witness.pub"))
    assert bad == [] and len(good) == len(cps)  # the floor's own signatures
    for cp in cps:  # each on a record of this very log, at a round end
        assert (cp.table, cp.file) == ("BJ-01", log.name) and by_seq[cp.seq] == cp.hash
    seqs = [cp.seq for cp in cps]
    assert seqs == sorted(set(seqs))  # each once, newer each time
    for cmd in ("verify", "replay"):
        r = subprocess.run([sys.executable, "-m", "controller", "audit", cmd, str(log)],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (cmd, r.stdout, r.stderr)


def _bench_beside_a_floor(checked_with: str, tmp_path: Path, nats_server: NatsServer,
                          pg_server: PostgresServer
                          ) -> tuple[subprocess.CompletedProcess[str], NatsConsumer, Path]:
    """A floor signing with the key ``witness.pem`` consumes a blackjack bench as table
    BJ-01, which publishes to ``nats_server`` and takes the floor's checkpoints from it,
    checked with the public half of ``<checked_with>.pem``: (the bench's result, the
    floor's consumer, stopped, the bench's log directory)."""
    signer, _ = load_or_create_key(tmp_path / "witness.pem")
    checker, _ = load_or_create_key(tmp_path / f"{checked_with}.pem")
    public = tmp_path / f"{checked_with}.pub"
    public.write_bytes(checker.public_pem())
    logs = tmp_path / "logs"
    floor = Floor([], PostgresStore(pg_server.new_database()), audit_dir=tmp_path / "floorlog",
                  files_on_disk=False, witness=signer)
    consumer = NatsConsumer(floor, Connection([nats_server.url]))
    consumer.start()
    try:
        bench = subprocess.run(
            [sys.executable, "-m", "controller", "bench", "--profile", "gr-blackjack",
             # a step every 20 ms: the day lasts about 8 s, some 16 of the table's polls of
             # the witness subject (every 0.5 s); at 10 ms a run beside the rest of the
             # suite once saw 2 new checkpoints where 7 is usual
             "--shoes", "1", "--seed", "5", "--pace", "0.02", "--log", str(logs),
             "--table", "BJ-01", "--publish", nats_server.url, "--witness-from",
             nats_server.url, "--witness-public", str(public), "--no-progress"], cwd=ROOT,
            capture_output=True, text=True, timeout=240)
    finally:
        consumer.stop()
        floor.store.close()
    return bench, consumer, logs


@pytest.mark.slow
def test_checkpoints_signed_by_another_key_are_refused_not_recorded(
        nats_server: NatsServer, pg_server: PostgresServer, tmp_path: Path) -> None:
    # anyone who can publish on shoewarden.witness.<table> could put a checkpoint of their
    # making into the table's log; with the floor's public key the table records none
    bench, consumer, logs = _bench_beside_a_floor("other", tmp_path, nats_server, pg_server)
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert consumer.witnessed, "the floor signed and published checkpoints"
    assert "refused, not recorded" in bench.stderr and "not valid under the witness key" \
        in bench.stderr
    (log,) = sorted((logs / "BJ-01").glob("*.jsonl"))
    assert not [x for x in log.read_bytes().splitlines() if b'"witness_checkpoint"' in x]


def test_witness_public_is_checked_before_the_run(tmp_path: Path) -> None:
    for extra, said in ((["--witness-from", "nats://127.0.0.1:1", "--witness-public",
                          str(tmp_path / "nope.pub")], "--witness-public"),
                        (["--witness-public", str(tmp_path / "nope.pub")],
                         "--witness-public needs --witness-from")):
        r = subprocess.run([sys.executable, "-m", "controller", "bench", "--profile",
                            "gr-blackjack", "--log", str(tmp_path), "--no-progress", *extra],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and said in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
        assert not any(tmp_path.rglob("*.jsonl"))  # refused before a log was begun


def test_witness_from_needs_a_nats_url(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "controller", "bench", "--profile",
                        "gr-blackjack", "--log", str(tmp_path), "--witness-from", "http://x:1",
                        "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "expected nats://HOST:PORT" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(("url", "said"), [
    ("nats://127.0.0.1:abc", "Port could not be cast"), ("nats://[::1", "Invalid IPv6 URL"),
    ("nats://", "no host"), ("nats://127.0.0.1:99999", "out of range"),
    ("nats://h:4222,http://h:1", "'http://h:1': expected nats://HOST:PORT"),
])
def test_a_malformed_nats_url_is_refused_at_the_command_line(url: str, said: str) -> None:
    # a review: `forward --publish nats://127.0.0.1:abc` retried it forever without a word,
    # and `bench --publish` with it said OK having published nothing
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(said)):
        nats_urls(url)
    assert nats_urls("nats://h:4222, tls://h:4223") == "nats://h:4222, tls://h:4223"
    r = subprocess.run([sys.executable, "-m", "controller", "forward", "--logs", "/nonexistent",
                        "--publish", url], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "argument --publish" in r.stderr and said in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("text", ["-1", "0", "nan", "inf", "soon"])
def test_floor_silent_after_takes_positive_seconds_only(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected seconds"):
        positive_seconds(text)
    assert positive_seconds("2.5") == 2.5
