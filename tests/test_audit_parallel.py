"""``audit verify`` on a large log uses every core, and says exactly what one core says.

The file is cut into one piece per core, each verified from the last record of the piece
before it; an intact file gives the same result as a sequential verification (records,
head, MAC head, the hashes asked for), and a file damaged anywhere is verified again on
one core, so its diagnosis is the sequential one. The threshold is made small here.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest
from test_audit_helpers import feed_log, line_of, read_lines, write_lines

from controller.audit import AuditLog, verify_file
from controller.audit import verify as verify_module
from controller.profiles import load_profile
from simulators.dealer import DayPlan, table_day


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, bytes | None]]:
    out = {}
    for name, key in (("plain", None), ("keyed", secrets.token_bytes(32))):
        path = tmp_path_factory.mktemp(name) / "day.jsonl"
        steps = table_day(load_profile("gr-blackjack"), 5, DayPlan(shoes=2))
        with AuditLog.open(path, durability="none", key=key) as log:
            feed_log(log, load_profile("gr-blackjack"), [s.event for s in steps])
        out[name] = (path, key)
    return out


def _sequential(path: Path, key: bytes | None, want: tuple[int, ...] = ()) -> object:
    size = os.path.getsize(path)
    return verify_module._segment(str(path), key, want, 0, size, None, False)


@pytest.mark.parametrize("name", ["plain", "keyed"])
def test_an_intact_large_log_verifies_on_every_core_as_on_one(
        logs: dict[str, tuple[Path, bytes | None]], name: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    path, key = logs[name]
    want = (1, 500, 1000, 1500)
    seq = _sequential(path, key, want)
    size = os.path.getsize(path)
    par = verify_module._verify_parallel(str(path), key, want, size, None)
    assert par is not None and par.ok
    for field in ("records", "head", "head_seq", "mac_head", "macs", "lines", "hashes",
                  "start", "chain", "mac_checked"):
        assert getattr(par, field) == getattr(seq, field), field
    monkeypatch.setattr(verify_module, "PARALLEL_BYTES", size // 4)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert verify_file(path, key=key, want_hashes=want) == par


@pytest.mark.parametrize("where", [0.1, 0.5, 0.9])
def test_a_damaged_large_log_gets_the_one_core_diagnosis(
        logs: dict[str, tuple[Path, bytes | None]], where: float, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    src, _ = logs["plain"]
    path = tmp_path / "day.jsonl"
    lines = read_lines(src)
    n = int(len(lines) * where)
    rec = json.loads(lines[n])
    rec["ts"] = "2026-11-21T23:59:59.999Z"
    lines[n] = line_of(rec)
    write_lines(path, lines)
    size = os.path.getsize(path)
    assert verify_module._verify_parallel(str(path), None, (), size, None) is None
    monkeypatch.setattr(verify_module, "PARALLEL_BYTES", size // 4)
    result = verify_file(path)
    assert not result.ok and result.first_bad_line == n + 1
    assert result == _sequential(path, None)
