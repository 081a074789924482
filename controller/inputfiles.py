"""Whether a path given on the command line can be read as an input file.

A FIFO or a device named by mistake blocks a reader forever (opening a FIFO waits for a
writer; ``/dev/zero`` never ends) and a directory fails deep inside a parser; a missing
file, a directory and a FIFO were all "no such file" to some commands (a review). Every
command asks here first, so each says the same thing.
"""

from __future__ import annotations

import os
import stat


def file_problem(path: str | os.PathLike[str], *, pipes: bool = True) -> str | None:
    """Why ``path`` is not a file one can open and read to its end (None: it is): ``no
    such file``, ``a directory``, ``not a regular file (a FIFO, a socket or a device)``,
    or the system's reason. Asked before opening: opening a FIFO already blocks.

    ``pipes``: a pipe the shell already opened (``<(zcat day.jsonl.gz)``, ``/dev/fd/N``)
    is read once like a file — a writer is there. Not for a reader that reads a file twice
    (``audit verify``). A named FIFO is refused either way: nobody may ever write to it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file"
    except (OSError, ValueError) as e:  # (ValueError: a NUL in the path)
        return f"cannot read: {getattr(e, 'strerror', None) or e}"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode) or (pipes and stat.S_ISFIFO(mode) and open_pipe(path)):
        return None
    return "not a regular file (a FIFO, a socket or a device)"


def open_pipe(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a descriptor this process holds on a pipe (``/dev/fd/63`` is a
    link to ``pipe:[…]``), not a FIFO's name in the file system."""
    try:
        return os.readlink(path).startswith("pipe:")
    except OSError:
        return False
