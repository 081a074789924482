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
