"""``--dealer person``: a person types the console steps at ``shoewarden run``'s dealer console.

The devices play their own steps; at each console step the person is shown what to type
(the console's short command where there is one) and the day goes on when they press
Enter. Apart from the host because it is the one part that talks to a human.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulators.pty_host.host import PtyHost


def console_command(event: dict[str, Any]) -> str:
    """What a person types at ``shoewarden run``'s dealer console for a console step: the
    short command where there is one, else the event as JSON (which the console takes)."""
    kind = event["type"]
    short = {"shuffle": "s", "shoe_loaded": "l", "round_end": "e", "players_left": "x",
             "table_close": "q"}
    if kind in short:
        return short[kind]
    if kind == "table_open" and not event.get("deck_lots"):
        return f"o {event.get('decks', '')} {event.get('sabot') or ''}".rstrip()
    if kind == "cut":
        return f"c {event['offset']}"
    if kind == "cut_card_placed":
        return "p" + (f" {event['behind']}" if event.get("behind") is not None else "")
    if kind == "bets_closed" and event.get("boxes") is not None:
        return "b " + " ".join(str(b) for b in event["boxes"])
    if kind == "bets_closed" and event.get("players") is not None:
        return f"b {event['players']}"
    if kind == "stub_count":
        return f"n {event['count']}"
    if kind == "discards_returned":
        return f"r {event['count']}"
    if kind == "dealer_change":
        return f"d {event['dealer']}"
    if kind == "action" and len(event) <= 3:
        return f"a {event['action']}"
    return json.dumps({k: v for k, v in event.items() if k not in ("t", "table")})


#: seconds between the last step of one device and the first of another (--dealer person)
DEVICE_SWITCH_GAP = 0.25


def play_for_a_person(host: PtyHost, stdin: Any, stdout: Any, pace: float) -> None:
    """``--dealer person``: the devices play their steps by themselves (one per ``pace``
    seconds); at each console step the person is shown what to type at ``shoewarden run``'s
    dealer console, and the day goes on when they press Enter here."""
    steps = host.steps
    played: Counter[str] = Counter()  # the device steps so far, by event type
    last_device: str | None = None
    while not host.player.done and not host.stopping:
        i = host.player.i
        step = steps[i]
        device = host.player.device_for(step)
        if device is not None and last_device is not None and device != last_device:
            # a step of another device than the last one (the scanner's count, then the
            # shuffler's shuffle): at a real table seconds apart, here microseconds. run
            # reads each device on its own thread and takes them as they arrive, so give
            # the first one time to arrive before the next device speaks
            time.sleep(max(pace, DEVICE_SWITCH_GAP))
        if device is not None:
            last_device = device
        if device is None:
            after = ", ".join(f"{k} {n}" for k, n in sorted(played.items())) or "nothing"
            stdout.write(f"step {i + 1}/{len(steps)} ({step.event['type']}): type at the "
                         f"dealer console:  {console_command(step.event)}\n  once run shows "
                         f"the devices' inputs so far ({after}), then press Enter here "
                         "(Ctrl-D stops)\n")
            stdout.flush()
            if not stdin.readline():
                return
        host.step(1)
        while host.player.i <= i and not host.stopping:
            time.sleep(0.01)
        if host.player.device_for(step) is not None:
            played[step.event["type"]] += 1
            if pace:
                time.sleep(pace)
    if host.player.done:
        stdout.write("the simulated day has been played; Ctrl-C stops the devices\n")
        stdout.flush()
