"""The verdict of a bench run: the card check, the deviations the scenario did not expect,
the exit status, and the summary that states them.

Read from the finished audit log (:mod:`controller.app.bench.logfacts`), never from
memory: the card check compares every card the simulated devices reported leaving them
with the cards in the log, in order.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from controller.app.bench.logfacts import LogFacts, read_log_facts
from controller.app.bench.options import EXIT_DEVIATION, EXIT_FAILED, EXIT_OK
from controller.audit.records import LogReadError
from controller.session import TableSession
from simulators.scenario import Scenario


@dataclass
class BenchResult:
    code: int
    profile: str
    seed: int
    scenario: str | None
    log: Path | None = None
    facts: LogFacts | None = None
    sim_cards: list[str] | None = None
    card_check: bool | None = None
    unexpected: list[str] = field(default_factory=list)
    failure: str | None = None
    resumed_at: int = 0
    shoes: int = 0
    rounds: int = 0
    cards: int = 0
    events: int = 0
    elapsed: float = 0.0
    fed_cards: int = 0
    #: seconds from the start of the run to the first card fed (None: no card)
    first_card_s: float | None = None


def judge(result: BenchResult, session: TableSession, path: Path, dealer: str,
          scenario: Scenario | None) -> BenchResult:
    """Fill in the figures and the exit status of a run that has ended."""
    t = session.tally
    result.shoes, result.rounds, result.cards, result.events = t.shoes, t.rounds, t.cards, \
        t.events
    try:
        result.facts = read_log_facts(path, dealer)
    except LogReadError as e:
        result.failure = result.failure or f"cannot read the log back: {e}"
        return result
    expect = set(scenario.expect) if scenario is not None else set()
    result.unexpected = sorted(c for c in result.facts.deviations if c not in expect)
    if result.sim_cards is not None:
        result.card_check = result.facts.cards == result.sim_cards
    if result.failure is not None:
        result.code = EXIT_FAILED
    elif result.unexpected or not result.card_check:
        result.code = EXIT_DEVIATION
    else:
        result.code = EXIT_OK
    return result


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(counter.items())) if counter else "none"


def print_summary(r: BenchResult, out: IO[str]) -> None:
    f = r.facts
    out.write(f"summary: profile {r.profile}, seed {r.seed}, scenario {r.scenario or '-'}\n")
    out.write(f"  shoes {r.shoes}, rounds {r.rounds}, cards {r.cards}, inputs {r.events}"
              + (f"; {r.fed_cards} card(s) in {r.elapsed:.2f} s this run" if r.elapsed else "")
              + (f"; first card {r.first_card_s:.2f} s after the start"
                 if r.first_card_s is not None else "")
              + "\n")
    if f is not None:
        out.write(f"  deviations: {_counts(f.deviations)}\n")
        out.write(f"  device faults: {_counts(f.faults)}\n")
        out.write(f"  reconnects: {_counts(f.reconnects)}\n")
        out.write(f"  protocol errors: {_counts(f.protocol_errors)}\n")
        if f.recoveries:
            out.write(f"  resumed: {f.recoveries} time(s) after an unclean stop\n")
    if r.card_check is None:
        out.write("  card check: not done (the day did not end)\n")
    else:
        assert f is not None and r.sim_cards is not None
        unread = f.cards.count("??")
        verdict = "OK, no card lost or counted twice" if r.card_check else "FAILED"
        out.write(f"  card check: {len(r.sim_cards)} card(s) reported by the simulated "
                  f"devices, {len(f.cards)} in the audit log"
                  + (f" ({unread} unreadable, logged as UNREADABLE_CARD)" if unread else "")
                  + f": {verdict}\n")
        if not r.card_check:
            for i, (a, b) in enumerate(zip(r.sim_cards, f.cards, strict=False)):
                if a != b:
                    out.write(f"    first difference at card {i + 1}: simulator {a}, log {b}\n")
                    break
    if r.log is not None:
        out.write(f"  audit log: {r.log} (check it: shoewarden audit verify {r.log})\n")
    if r.failure is not None:
        out.write(f"result: FAILED: {r.failure}\n")
    elif r.code == EXIT_DEVIATION:
        why = []
        if r.unexpected:
            why.append("deviation(s) the scenario does not expect: " + ", ".join(r.unexpected))
        if not r.card_check:
            why.append("the card check failed")
        out.write(f"result: FAILED: {'; '.join(why)}\n")
    else:
        out.write("result: OK\n")
    out.flush()
