"""One simulated device's pty: the master the host serves, the slave a driver opens by path.

A device is reached through a stable symlink (``<link dir>/shoe``) to its current pty,
like a USB serial adapter under ``/dev/serial/by-id``. A ``disconnect`` fault takes the
link down (the symlink disappears, the pty closes) and brings it back on a new pty
under the same name, so a driver re-finds the device by reopening the same path.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import termios
import tty
from dataclasses import dataclass, field
from enum import StrEnum


class PtyLinkState(StrEnum):
    """Where a device's pty is (equal to its plain string)."""

    UP = "up"  # the pty is open and served
    DRAINING = "draining"  # a disconnect is due: the controller reads what is left first
    DOWN = "down"  # unplugged: no pty, no symlink, until ``up_at``


@dataclass
class PtyLink:
    """The pty of one device and what is waiting to go out on it."""

    name: str
    path: str  # the stable symlink
    master: int = -1
    slave: int = -1
    pts: str = ""
    outbox: bytearray = field(default_factory=bytearray)
    state: PtyLinkState = PtyLinkState.UP
    since: float = 0.0
    up_at: float = 0.0
    generation: int = 0
    last_write: float = 0.0

    def up(self) -> None:
        """Open a new pty and point the symlink at it (atomically: a driver never sees the
        name missing once it is back)."""
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo, no line editing, no CR/LF translation
        os.set_blocking(master, False)
        self.master, self.slave, self.pts = master, slave, os.ttyname(slave)
        self.outbox.clear()
        self.state = PtyLinkState.UP
        self.generation += 1
        tmp = self.path + ".new"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        os.symlink(self.pts, tmp)
        os.replace(tmp, self.path)

    def down(self) -> None:
        """Unplug: remove the symlink, close the pty, drop what was not sent."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        for fd in (self.master, self.slave):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.master = self.slave = -1
        self.outbox.clear()
        self.state = PtyLinkState.DOWN

    def unread(self) -> int:
        """Bytes written to the controller that it has not read yet."""
        return pending_input(self.slave)


def pending_input(fd: int) -> int:
    """Bytes waiting to be read on a tty fd (the controller has not read them yet)."""
    try:
        buf = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
        return int(struct.unpack("i", buf)[0])
    except OSError:
        return 0
