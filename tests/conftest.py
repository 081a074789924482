"""pytest configuration for the whole suite: the Hypothesis profiles.

- ``ci`` (when ``CI`` is set): reproducible, the same examples every run, and a failure
  is printed with the data to replay it;
- ``quick`` (``HYPOTHESIS_PROFILE=quick``, as ``make quick`` sets it): a tenth of the
  examples, for the inner loop while editing (a test that sets its own count takes it
  through ``tests.budget.examples``);
- otherwise Hypothesis's defaults: local runs keep exploring new examples.

Helpers shared by tests are plain modules (``engine_streams``, ``test_audit_helpers``),
imported by name.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("quick", max_examples=10, deadline=None)
if os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])
elif os.environ.get("CI"):
    settings.load_profile("ci")


# --------------------------------------------------------------------- real servers

import tempfile  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from tests.servers import NatsServer, PostgresServer, nats, postgres  # noqa: E402


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """One private PostgreSQL per test process (each test takes a database of its own)."""
    with postgres() as server:
        yield server


@pytest.fixture
def nats_server() -> Iterator[NatsServer]:
    """A private JetStream server per test (a test may SIGKILL it and start it again)."""
    with tempfile.TemporaryDirectory(prefix="shoewarden-nats-") as work, nats(Path(work)) as s:
        yield s


#: the longest test files (``pytest --durations=0``, seconds on this 2-core machine), run
#: first: ``make test`` hands whole files to its workers (``--dist loadfile``) in collection
#: order, and a long file collected last (test_shuffle_screen.py, alphabetically late) kept
#: one worker busy for up to half a minute after the other had finished
LONGEST_FIRST = (
    "test_app_bench.py",  # 37
    "test_shuffle_screen.py",  # 24
    "test_benchmarks.py",  # 21
    "test_floor_nats_e2e.py",  # 19
    "test_app_crash.py",  # 18
    "test_floor_live.py",  # 17
    "test_floor_forward_process.py",  # 16
    "test_engine_deviations.py",  # 15
    "test_floor_witness_in.py",  # 13
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # (stable: else as is)
