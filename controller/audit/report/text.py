"""The text report of ``shoewarden audit report``: per day a summary, then its timeline.

Times are printed dated, in UTC, to the second (:func:`~controller.audit.report.model.clock`).
"""

from __future__ import annotations

import os

from controller.audit.report.model import DayReport, Entry, Report, ShoeInfo, clock


def entry_text(e: Entry) -> str:
    if e.label == "rounds":
        span = f"round {e.first}" if e.first == e.last else f"rounds {e.first}–{e.last}"
        returned = f", {e.returned} returned to the shuffler" if e.returned else ""
        return (f"{span}: {e.count} round(s), {e.cards} card(s) dealt{returned}, "
                f"until {clock(e.end)}")
    if e.label == "burn":
        return f"burn: {e.count} card(s)" + (f" ({e.detail})" if e.detail else "")
    if e.severity is not None:
        return f"! {e.label} [{e.severity}] {e.detail}"
    return f"{e.label}: {e.detail}" if e.detail else e.label


def day_summary(day: DayReport) -> list[str]:
    out = [f"== {day.title} (profile {day.profile}, {day.decks or '?'} deck(s)"
           + (f", sabot {day.sabot}" if day.sabot else "") + ")",
           f"  files: {', '.join(os.path.basename(f) for f in day.files)}"
           + (f" in {day.directory}" if day.directory else ""),
           f"  opened {clock(day.opened)}, closed {clock(day.closed) if day.closed else '-'}",
           f"  shoes {len(day.shoes)}, rounds {len(day.rounds)}, cards {day.cards} "
           f"(burned {day.burns}"
           + (f", {day.cards_outside_rounds} outside a round" if day.cards_outside_rounds
              else "") + ")"]
    if day.window is not None:
        lo, hi = day.window
        rule = f"{lo}" if lo == hi else f"{lo}–{hi}"
        rows = []
        for n, s in sorted(day.shoes.items()):
            placed = "-" if s.cut_card_placed is None else str(s.cut_card_placed)
            measured = "-" if s.cut_card_measured is None else str(s.cut_card_measured)
            flag = ""
            for value in (s.cut_card_placed, s.cut_card_measured):
                if value is not None and not lo <= value <= hi:
                    flag = "  OUTSIDE"
            rows.append(f"    shoe {n}: placed {placed}, came out {measured}{flag}")
        out.append(f"  cut card positions (cards behind it; rule {rule}):")
        out += rows or ["    none"]
    sev = day.by_severity()
    if day.deviations:
        out.append(f"  deviations: {len(day.deviations)} ("
                   + ", ".join(f"{s} {n}" for s, n in sev.items()) + ")")
        rules = {d.code: d.rule for d in day.deviations}
        for code, severity, n in day.by_code():
            out.append(f"    {code} [{severity}]: {n} ({rules[code]})")
    else:
        out.append("  deviations: none")
    if day.faults:
        out.append(f"  device faults: {len(day.faults)}")
        for f in day.faults:
            cleared = f"cleared {clock(f['cleared'])}" if f["cleared"] else "NOT cleared"
            out.append(f"    {clock(f['time'])} {f['device']}: {f['code']} ({cleared})")
    else:
        out.append("  device faults: none")
    if day.devices:
        out.append(f"  devices: {len(day.devices)} identified")
        for d in day.devices:
            who = " ".join(str(d[k]) for k in ("model", "serial") if d.get(k))
            fw = f", firmware {d['firmware']}" if d.get("firmware") else ""
            port = f" on {d['port']}" if d.get("port") else ""
            out.append(f"    {clock(d['time'])} {d.get('device')}: {who or '?'}{fw}{port} "
                       f"(seq {d['seq']})")
    if day.dealer_changes:
        out.append(f"  dealer changes: {len(day.dealer_changes)}")
        for c in day.dealer_changes:
            prev = f" (after {c['previous']})" if c["previous"] else ""
            out.append(f"    {clock(c['time'])} dealer {c['dealer']}{prev}")
    else:
        out.append("  dealer changes: none")
    return out


def shoe_heading(n: int, s: ShoeInfo) -> str:
    """A shoe's heading in the timeline (text and HTML alike)."""
    return (f"shoe {n}: {s.rounds} round(s), {s.cards} card(s), {s.burns} burned"
            + (f", cut at {s.cut_offset}" if s.cut_offset is not None else ""))


def timeline_lines(day: DayReport) -> list[str]:
    out = ["  timeline:"]

    def section(name: str, entries: list[Entry]) -> None:
        if not entries:
            return
        out.append(f"    {name}")
        for e in entries:
            out.append(f"      {clock(e.time)}  {entry_text(e)}")
            if e.note:
                out.append(f"      {'':20}    {e.note}")

    section("opening", day.opening)
    for n, s in sorted(day.shoes.items()):
        section(shoe_heading(n, s), s.entries)
    section("closing", day.closing)
    return out


def render_text(report: Report) -> str:
    out: list[str] = [*report.verdict, ""] if report.verdict else []
    for day in report.days:
        out += day_summary(day)
        out += timeline_lines(day)
        out.append("")
    for note in report.notes:
        out.append(f"note: {note}")
    if not report.days:
        out.append("no table day in the log(s)")
    return "\n".join(out).rstrip() + "\n"
