"""What the engine answers: state changes, dealer prompts, notes, and deviations.

Every output is a frozen value with ``to_record()`` (the dict the audit log
stores), so a replay can compare outputs record by record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from controller.deviations import Deviation


@dataclass(frozen=True, slots=True)
class Transition:
    """The procedure moved from ``source`` to ``dest`` on ``trigger`` (an event type)."""

    #: one object per move (:func:`transition`), never changed: the audit log keeps its
    #: encoding by identity
    interned: ClassVar[bool] = True

    source: str
    dest: str
    trigger: str
    under_fault: bool = False

    def to_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "transition", "from": self.source, "to": self.dest,
                               "on": self.trigger}
        if self.under_fault:
            out["under_fault"] = True
        return out


@dataclass(frozen=True, slots=True)
class Prompt:
    """The next step, as the dealer console shows it."""

    interned: ClassVar[bool] = True  # (one object per text: prompt_of)

    state: str
    text: str

    def to_record(self) -> dict[str, Any]:
        return {"type": "prompt", "state": self.state, "text": self.text}


@dataclass(frozen=True, slots=True)
class Note:
    """A fact worth recording that breaks no rule (last hand, a round's cards, a fault)."""

    kind: str
    text: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        return {"type": "note", "kind": self.kind, "text": self.text, "data": dict(self.data)}


Output = Transition | Prompt | Note | Deviation

_MOVES: dict[tuple[str, str, str, bool], Transition] = {}
_PROMPTS: dict[tuple[str, str], Prompt] = {}


def transition(source: str, dest: str, trigger: str,
               under_fault: bool = False) -> Transition:
    """``Transition(source, dest, trigger, under_fault)``, one object per move (the states
    and event types are few): outputs are immutable, and a frozen dataclass costs about a
    microsecond to make — a state change made one every time, and a prompt."""
    key = (source, dest, trigger, under_fault)
    move = _MOVES.get(key)
    if move is None:
        move = _MOVES[key] = Transition(source, dest, trigger, under_fault)
    return move


def prompt_of(state: str, text: str) -> Prompt:
    """``Prompt(state, text)``, kept as :func:`transition` keeps moves (a prompt's text
    varies little: a burn's count, the cut card's window)."""
    key = (state, text)
    made = _PROMPTS.get(key)
    if made is None:
        if len(_PROMPTS) >= 1024:
            _PROMPTS.clear()
        made = _PROMPTS[key] = Prompt(state, text)
    return made


def consequence(deviation: Deviation, slip: str) -> Note:
    """``deviation`` recorded as following from ``slip``: a note that names the code it
    would have raised, its severity and evidence, not another deviation (one slip, one
    deviation: :mod:`controller.engine.resync`, and a referee's own repeats)."""
    return Note("consequence", f"{deviation.code}: {deviation.message} (a consequence of "
                f"the {slip} above, not counted again)",
                {"code": deviation.code, "severity": str(deviation.severity), "slip": slip,
                 "evidence": dict(deviation.evidence)})
