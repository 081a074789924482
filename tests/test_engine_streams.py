"""The engine tests' helper (tests/engine_streams.py) takes over a correct day's engine at
the last point it kept before a planted change instead of feeding the day's events again:
that must answer exactly as a run from the first event does."""

from __future__ import annotations

import enum
import random
from typing import Any

import pytest
from engine_streams import PROFILES, SNAPSHOT_EVERY, Run, _resumed, day, drop, events, run


@pytest.mark.parametrize("name", PROFILES)
def test_a_run_resumed_from_a_kept_engine_answers_as_a_run_from_the_start(name: str) -> None:
    steps = day(name, 3)
    rng = random.Random(name)
    # the day itself, and one event dropped at points spread over it (each a slip the
    # engine answers differently from then on)
    cuts = sorted(rng.sample(range(SNAPSHOT_EVERY, len(steps)), 4))
    streams = [events(steps)] + [events(drop(steps, i)) for i in cuts]
    for evs in streams:
        resumed = run(name, evs)
        _, at = _resumed(name, evs)
        assert at >= SNAPSHOT_EVERY  # (a prefix was taken over, or this test tests nothing)
        full = Run.of(name).feed_all(evs)
        assert resumed.outputs == full.outputs
        assert resumed.states == full.states
        assert resumed.sent == full.sent
        assert resumed.engine.context_key() == full.engine.context_key()
        assert _state(resumed.engine) == _state(full.engine)  # every attribute, all the way


def _state(obj: Any, seen: dict[int, int] | None = None) -> Any:
    """An object's whole state as plain values (attributes, items, all the way down; an
    object met again is its first sighting's number), to compare two engines."""
    seen = {} if seen is None else seen
    if obj is None or isinstance(obj, str | int | float | bytes | enum.Enum):
        return obj
    if id(obj) in seen:
        return ("seen", seen[id(obj)])
    seen[id(obj)] = len(seen)
    if isinstance(obj, list | tuple):
        return (type(obj).__name__, [_state(x, seen) for x in obj])
    if isinstance(obj, set | frozenset):
        return (type(obj).__name__, sorted(map(repr, obj)))
    if isinstance(obj, dict):
        return ("dict", [(_state(k, seen), _state(v, seen)) for k, v in obj.items()])
    if callable(obj) and not hasattr(obj, "__dict__"):
        return ("callable", getattr(obj, "__qualname__", repr(obj)))
    slots = [n for c in type(obj).__mro__ for n in getattr(c, "__slots__", ())]
    fields = dict(getattr(obj, "__dict__", {}))
    fields.update((n, getattr(obj, n)) for n in slots if hasattr(obj, n))
    return (type(obj).__qualname__, [(k, _state(v, seen)) for k, v in sorted(fields.items())])
