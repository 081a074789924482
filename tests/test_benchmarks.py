"""The benchmark scripts still run (``make bench``): each on a small size, to its summary
line, with no traceback. Their figures are judged by ``make bench``, not here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("script", "args", "last"), [
    ("paths.py", ["--events", "3000", "--repeat", "1", "--reopen-records", "3000"], "paths: "),
    ("audit_bench.py", ["--records", "3000", "--replay-records", "2000",
                        "--keyed-records", "2000"], "replay: "),
    ("run.py", ["--repeat", "1"], "peak RSS"),
    ("device_bench.py", ["--cards", "2000", "--shoes", "1"], "bench throughput"),
    ("floor_nats_bench.py", ["--tables", "3", "--repeat", "1", "--live-tables", "3",
                             "--publishers", "2", "--pace", "0.005", "--events", "40",
                             "--cards", "200", "--ab-rounds", "1"],
     "card latency without / with the forwarder"),
])
def test_a_benchmark_runs_to_its_summary(script: str, args: list[str], last: str,
                                         tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode in (0, 1), run.stderr  # 1: a figure missed its target
    assert any(line.startswith(last) or last in line for line in run.stdout.splitlines()), \
        run.stdout
