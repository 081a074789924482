"""Simulated table hardware on real ptys, driven by the simulated dealer's table day.

``python -m simulators.pty_host --profile NAME [--seed S] [--scenario FILE]`` prints one
JSON line, then serves until SIGTERM / SIGINT (exit 0)::

    {"shoe": "/tmp/shoewarden-sim-x/shoe", "scanner": ".../scanner",
     "shuffler": ".../shuffler", "console": ".../console"}

Each device path is a symlink to the pty the device is on (open it with pyserial exactly
like /dev/ttyUSB0); ``console`` is a FIFO carrying the dealer console as JSON Lines. After
a ``disconnect`` fault the symlink disappears and comes back pointing at a new pty, like a
USB serial adapter re-plugged under a stable /dev/serial/by-id name: a driver re-finds the
device by reopening the same path. :class:`PtyHost` is the same thing in-process
(``start()`` / ``stop()``, one thread running ``select()``), for tests.

The day is played once every device has been greeted (HELLO) and a console reader is
connected. :class:`TablePlayer` (pure, no I/O) maps each step of the step list:

- ``deck_check`` → the scanner scans the cards;
- ``shuffle`` → the batch shuffler (shoe and hand games) or the continuous shuffler
  shuffles; with ``--no-shuffler`` (shoe and hand games) it is a console event;
- ``card`` → the shoe draws it (shoe games; for hand-dealt games the shoe model is the card
  reader), or the continuous shuffler delivers it;
- ``cut_card`` → the shoe reports CUT_CARD_OUT; ``discards_returned`` (continuous shuffler)
  → DISCARDS_ACCEPTED;
- everything else (table_open, cut, cut_card_placed, shoe_loaded, bets_closed, action,
  stub_count, round_end, dealer_change, players_left, table_close, …) → the console.

Console lines (one per step, in step order, plus notes) — see docs/devices.md::

    {"n": 7, "step": 7, "phase": "cut", "after": {"shoe": 0, "scanner": 1, "shuffler": 1},
     "event": {"type": "cut", "offset": 120, "t": "…"}}
    {"n": 12, "step": 12, "phase": "burn", "after": {"shoe": 1, …}, "device": "shoe",
     "attach": {"t": "…"}}
    {"n": 40, "after": {…}, "note": "fault", "fault": {"kind": "jam", "device": "shoe", …}}
    {"n": 900, "after": {…}, "end": true}

``after[d]`` is the number of event messages (devices.EVENT_MESSAGES) device ``d`` had
queued when the line was written. A line's event comes after exactly those messages.

The package, in the order a step flows: :mod:`.player` (the day's steps → device
actions and console lines, no I/O), :mod:`.ptys` (one device's pty and its stable
symlink), :mod:`.console` (the console FIFO), :mod:`.host` (:class:`PtyHost`: the
``select()`` loop that serves them), :mod:`.person` (``--dealer person``), :mod:`.linkdirs`
(temporary link directories) and :mod:`.cli` (the command line).
"""

from simulators.pty_host.cli import main
from simulators.pty_host.host import BURST, PtyHost
from simulators.pty_host.linkdirs import LINK_DIR_PREFIX, sweep_stale_link_dirs
from simulators.pty_host.person import DEVICE_SWITCH_GAP, console_command, play_for_a_person
from simulators.pty_host.player import CARRIED, TablePlayer, make_devices

__all__ = [
    "BURST", "CARRIED", "DEVICE_SWITCH_GAP", "LINK_DIR_PREFIX", "PtyHost", "TablePlayer",
    "console_command", "main", "make_devices", "play_for_a_person", "sweep_stale_link_dirs",
]
