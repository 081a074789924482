"""The table records the floor's latest signed checkpoint of its chain in its own log
(``bench --witness-from URL``), with real nats-server and PostgreSQL: the floor signs at
every round end, the table takes each new checkpoint as a ``witness_checkpoint`` input; the
log still verifies and replays, and every recorded checkpoint is the floor's signature on a
record the log holds."""

from __future__ import annotations

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
from floor.store import PostgresStore
from tests.floor_helpers import ROOT
from tests.servers import NatsServer, PostgresServer


@pytest.mark.slow
def test_a_table_records_the_floors_signed_checkpoints_and_its_log_still_replays(
        nats_server: NatsServer, pg_server: PostgresServer, tmp_path: Path) -> None:
    signer, _ = load_or_create_key(tmp_path / "witness.pem")
    floor = Floor([], PostgresStore(pg_server.new_database()), audit_dir=tmp_path / "floorlog",
                  files_on_disk=False, witness=signer)
    consumer = NatsConsumer(floor, Connection([nats_server.url]))
    consumer.start()
    logs = tmp_path / "logs"
    try:
        bench = subprocess.run(
            [sys.executable, "-m", "controller", "bench", "--profile", "gr-blackjack",
             "--shoes", "1", "--seed", "5", "--pace", "0.01", "--log", str(logs),
             "--table", "BJ-01", "--publish", nats_server.url, "--witness-from",
             nats_server.url, "--no-progress"], cwd=ROOT, capture_output=True, text=True,
            timeout=240)
    finally:
        consumer.stop()
        floor.store.close()
    assert bench.returncode == 0, bench.stdout + bench.stderr
    (log,) = sorted((logs / "BJ-01").glob("*.jsonl"))
    records = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    got = [r["event"] for r in records
           if r["kind"] == "input" and r["event"]["type"] == "witness_checkpoint"]
    assert len(got) >= 3, "the floor signs at every round end: several came back"
    by_seq = {r["seq"]: r["hash"] for r in records}
    cps = [Checkpoint(e["table"], e["file"], e["chain_seq"], e["chain_hash"], e["signed_at"],
                      e["key"], e["sig"], n) for n, e in enumerate(got, start=1)]
    (tmp_path / "witness.pub").write_bytes(signer.public_pem())
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


def test_witness_from_needs_a_nats_url(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "controller", "bench", "--profile",
                        "gr-blackjack", "--log", str(tmp_path), "--witness-from", "http://x:1",
                        "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "expected nats://HOST:PORT" in r.stderr
    assert "Traceback" not in r.stderr
