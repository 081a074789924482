"""Crash test (issue 5): a bench run killed with SIGKILL at random moments, restarted each
time on the same log, finishes the table day with nothing lost and nothing twice.

A reference bench run of the day (uninterrupted) gives the day's scripted inputs. Then the
same day runs in another log directory; each run is killed with SIGKILL at a random point
of the log's growth (mid-frame, mid-round, between the fsynced input and its outputs, …),
and restarted: the bench recovers the log, rebuilds the engine and continues from the
first input not yet durable. When a kill leaves an output record last (outputs are not
fsynced under the default durability: a power cut could leave one half written), the
first such time and half the others the test also tears that line. Then:

- the final run completes and its card check holds;
- ``shoewarden audit verify`` and ``audit replay`` accept the log;
- every input record that was in the log when a run was killed is in the final log with
  the same seq and hash (no durable input lost);
- the scripted inputs (``line`` 1…N) appear once each, in order, and are exactly the
  reference run's (none lost, none twice);
- the simulator child of a killed bench exits by itself (``--exit-with-parent``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from controller.audit.files import table_files

ROOT = Path(__file__).resolve().parent.parent
DAY = ["--profile", "gr-blackjack", "--shoes", "1", "--seed", "5", "--pace", "0"]
KILLS = 22


def bench(log_dir: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "controller", "bench", *DAY, "--log",
                             str(log_dir), *extra], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def log_file(log_dir: Path) -> Path | None:
    files = table_files(log_dir, "T1")
    return files[-1] if files else None


def records(path: Path) -> list[dict[str, Any]]:
    out = []
    with open(path, "rb") as f:
        for raw in f:
            if raw.endswith(b"\n"):
                out.append(json.loads(raw))
    return out


def scripted(path: Path) -> list[tuple[int, dict[str, Any]]]:
    return [(r["line"], r["event"]) for r in records(path)
            if r["kind"] == "input" and isinstance(r.get("line"), int)]


def children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(cond: Any, timeout: float = 30.0, step: float = 0.0005) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return False


def size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


@pytest.mark.slow
def test_bench_killed_at_random_moments_finishes_the_day(tmp_path: Path) -> None:
    rng = random.Random(20261121)
    ref_dir, dir_ = tmp_path / "reference", tmp_path / "crashed"
    ref = bench(ref_dir)
    out, err = ref.communicate(timeout=120)
    assert ref.returncode == 0, out + err
    ref_log = log_file(ref_dir)
    assert ref_log is not None
    reference = scripted(ref_log)
    assert [n for n, _ in reference] == list(range(1, len(reference) + 1))
    final_size = size(ref_log)

    durable: dict[int, str] = {}  # seq -> hash of every input seen in the log at a kill
    counts = {"kills": 0, "torn": 0, "with_child": 0}

    def last_is_output() -> bool:
        path = log_file(dir_)
        if path is None:
            return False
        with open(path, "rb") as f:
            f.seek(max(0, size(path) - 4096))
            tail = f.read()
        return tail.endswith(b"\n") and b'"kind":"output"' in tail.rsplit(b"\n", 2)[-2]

    def anchored(path: Path) -> int:
        """The last seq the bench anchored of this file (its anchor file: beside the log)."""
        anchors = dir_ / "anchors.jsonl"
        data = anchors.read_bytes() if anchors.exists() else b""
        # (a kill in the middle of an anchor's write leaves its line torn: not an anchor)
        lines = data.splitlines() if data.endswith(b"\n") else data.splitlines()[:-1]
        return max((a["seq"] for a in map(json.loads, filter(None, lines))
                    if a["file"] == path.name), default=0)

    def cycle(kill_when: Any) -> bool:
        """One bench run, killed once ``kill_when()`` holds; False if the day ended first."""
        proc = bench(dir_)
        assert wait_for(lambda: kill_when() or proc.poll() is not None, 60.0)
        time.sleep(rng.uniform(0, 0.002))
        kids = children(proc.pid)
        if proc.poll() is not None:  # the day ended before the kill point
            proc.communicate()
            return False
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        counts["kills"] += 1
        if kids:  # the simulated devices (its child) notice and exit by themselves
            counts["with_child"] += 1
            assert wait_for(lambda: not any(alive(k) for k in kids), 10.0, 0.01), kids
        path = log_file(dir_)
        assert path is not None
        for r in records(path):
            if r["kind"] == "input":
                assert durable.setdefault(r["seq"], r["hash"]) == r["hash"]
        data = path.read_bytes()
        last_start = data.rstrip(b"\n").rfind(b"\n") + 1
        last = json.loads(data[last_start:]) if data.endswith(b"\n") else None
        # a power cut loses only what was never synced: an anchor follows an fsync, so an
        # anchored record is on the disk (one torn there is damage, and refused as such)
        if (last is not None and last["kind"] == "output" and last["seq"] > anchored(path)
                and (counts["torn"] == 0 or rng.random() < 0.5)):
            cut = rng.randrange(last_start + 1, len(data) - 1)
            with open(path, "r+b") as f:  # a power cut in the middle of a non-durable write
                f.truncate(cut)
            counts["torn"] += 1
        return True

    for fraction in sorted(rng.uniform(0.03, 0.97) for _ in range(KILLS)):
        target = max(int(final_size * fraction), size(log_file(dir_)) + 1)
        if not cycle(lambda target=target: size(log_file(dir_)) >= target):
            break
    for _ in range(20):  # make sure a torn write was recovered at least once
        if counts["torn"]:
            break
        start = size(log_file(dir_))
        if not cycle(lambda start=start: size(log_file(dir_)) > start and last_is_output()):
            break
    assert counts["kills"] >= 20 and counts["with_child"] >= 10, counts
    assert counts["torn"] >= 1, counts

    final = bench(dir_)
    out, err = final.communicate(timeout=120)
    assert final.returncode == 0, out + err
    assert "card check:" in out and "OK, no card lost or counted twice" in out
    assert "resuming" in out
    path = log_file(dir_)
    assert path is not None and len(table_files(dir_, "T1")) == 1

    for cmd in (["audit", "verify", str(path)], ["audit", "replay", str(path)]):
        res = subprocess.run([sys.executable, "-m", "controller", *cmd], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stdout + res.stderr

    final_records = records(path)
    by_seq = {r["seq"]: r for r in final_records}
    for seq, hash_ in durable.items():  # no durable input lost (nor rewritten)
        assert seq in by_seq and by_seq[seq]["hash"] == hash_, seq
    assert scripted(path) == reference  # each scripted input once, in order, as uninterrupted
    recoveries = [r for r in final_records if r["kind"] == "recovery"]
    assert len(recoveries) >= counts["kills"]  # one per restart (and per killed restart)
    assert sum(1 for r in recoveries if r["cut"] is not None) >= counts["torn"]
