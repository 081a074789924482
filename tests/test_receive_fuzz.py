"""The controller's whole receive path under hostile device bytes (issue 8, "Done when").

A few hundred generated streams (:mod:`simulators.wirefuzz`) go through a real driver, the
runtime's routing, a real session and audit log (:mod:`benchmarks.receive_fuzz`); none may
make the driver raise (an escape), stop the table, or leave a log that does not verify.
``make bench`` runs the same over 100,000 streams.
"""

from __future__ import annotations

import pytest

from benchmarks import receive_fuzz
from controller.session import TableSession
from drivers.shoe import ShoeDriver
from simulators import wirefuzz


def test_hostile_streams_never_escape_stop_the_table_or_break_the_log() -> None:
    summary = receive_fuzz.fuzz(range(300))
    assert summary.streams == 300 and summary.records > 300 * 3
    assert not summary.escapes, summary.escapes[0].escape
    assert not summary.stopped, summary.stopped[0].stopped
    assert not summary.bad_logs, summary.bad_logs[0].bad_log


def test_streams_are_reproducible_from_their_seed() -> None:
    a, b = wirefuzz.generate(12345), wirefuzz.generate(12345)
    assert a.chunks == b.chunks and a.pieces == b.pieces
    assert wirefuzz.generate(12346).chunks != a.chunks


def test_the_streams_reach_the_engine_with_cards_and_hostile_payloads() -> None:
    """A fuzz whose streams never got past the handshake would prove nothing."""
    kinds = [p for seed in range(200) for p in wirefuzz.generate(seed).pieces]
    assert kinds.count("hostile body") > 500 and kinds.count("plausible") > 1000
    cards = sum(receive_fuzz.run_stream(seed).cards for seed in range(100))
    assert cards >= 50


def test_the_harness_counts_a_driver_that_raises_as_an_escape(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self, data, now):  # type: ignore[no-untyped-def]
        raise ValueError("driver bug")
    monkeypatch.setattr(ShoeDriver, "feed", boom)
    seed = next(s for s in range(100) if wirefuzz.generate(s).device == "shoe")
    result = receive_fuzz.run_stream(seed)
    assert result.escape and "driver bug" in result.escape and not result.stopped


def test_the_harness_counts_an_engine_that_raises_as_a_stopped_table(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = TableSession.feed

    def feed(self, event, line=None):  # type: ignore[no-untyped-def]
        if getattr(event, "type", "") == "device_diagnostic":
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
        return real(self, event, line)
    monkeypatch.setattr(TableSession, "feed", feed)
    summary = receive_fuzz.fuzz(range(30))
    assert summary.stopped and not summary.escapes
