"""What holds audit data is 0750 (directories) and 0640 (files), whatever the umask.

A controller started under ``umask 000`` must not leave its logs, anchors or lock world
writable (``mkdir(parents=True)`` gives 0777 there), nor one started under ``umask 077``
unreadable to the auditors' group. So every directory this package creates is made 0750
and every file 0640 explicitly (``chmod`` is not subject to the umask). Directories that
already exist are left as they are: they belong to whoever made them (``/tmp``, say).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

DIR_MODE = 0o750
FILE_MODE = 0o640


def make_dirs(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` and any missing parents, each 0750; returns the path."""
    p = Path(path)
    missing = []
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            os.mkdir(d, DIR_MODE)
            os.chmod(d, DIR_MODE)
    return Path(path)


def open_file(path: str | os.PathLike[str], flags: int) -> int:
    """``os.open`` with ``O_CREAT``: a file this call creates is made 0640."""
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return os.open(path, flags & ~os.O_EXCL & ~os.O_CREAT)
    try:
        os.fchmod(fd, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd
