"""Whether a path given on the command line can be read as an input file.

A FIFO or a device named by mistake blocks a reader forever (opening a FIFO waits for a
writer; ``/dev/zero`` never ends) and a directory fails deep inside a parser; a missing
file, a directory and a FIFO were all "no such file" to some commands (a review). Every
command asks here first, so each says the same thing.
"""

from __future__ import annotations

import os
import stat


def file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` is not a regular file one can open (None: it is): ``no such file``,
    ``a directory``, ``not a regular file (a FIFO, a socket or a device)``, or the
    system's reason. Asked before opening: opening a FIFO already blocks."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file"
    except (OSError, ValueError) as e:  # (ValueError: a NUL in the path)
        return f"cannot read: {getattr(e, 'strerror', None) or e}"
    if stat.S_ISDIR(mode):
        return "a directory"
    if not stat.S_ISREG(mode):
        return "not a regular file (a FIFO, a socket or a device)"
    return None
