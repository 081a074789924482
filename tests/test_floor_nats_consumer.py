"""The database floor's consumer on a real nats-server and PostgreSQL: a floor whose first
try at the stream or its consumer fails (JetStream not ready yet on a server just started)
tries again, and then takes every record."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import floor.consume
from floor.consume import NatsConsumer
from floor.core import Floor
from floor.forward import Connection, Forwarder
from floor.store import PostgresStore
from tests.floor_helpers import table_log
from tests.servers import NatsServer, PostgresServer


def test_a_floor_whose_first_try_at_the_stream_fails_tries_again_and_takes_every_record(
        nats_server: NatsServer, pg_server: PostgresServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    path = table_log(tmp_path / "logs")
    n = len(path.read_bytes().splitlines())
    tries: list[int] = []
    real = floor.consume.ensure_stream

    async def not_ready_at_first(js: Any) -> None:
        tries.append(1)
        if len(tries) == 1:
            raise TimeoutError("JetStream not ready")
        await real(js)

    monkeypatch.setattr(floor.consume, "ensure_stream", not_ready_at_first)
    db = pg_server.new_database()
    consumer = NatsConsumer(Floor([], PostgresStore(db), audit_dir=tmp_path / "floorlog",
                                  files_on_disk=False), Connection([nats_server.url]))
    consumer.start()
    try:
        fwd = Forwarder([tmp_path / "logs"], Connection([nats_server.url]),
                        stop_when_done=True)
        fwd.run()
        assert fwd.error is None and fwd.published == n
        deadline = time.monotonic() + 30
        while consumer.received < n:
            assert time.monotonic() < deadline, (consumer.received, n, consumer.failures)
            time.sleep(0.05)
    finally:
        consumer.stop()
    assert len(tries) >= 2 and consumer.failures >= 1
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM audit_records").fetchone() == (n,)
