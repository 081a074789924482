"""The temporary directories that hold a pty host's port symlinks and console FIFO.

A host killed before its cleanup leaves its directory behind; each holds the host's
``pid``, so the next host (or the bench that started it) can sweep the directories of
hosts that are gone. Also: whether a directory given with ``--link-dir`` can hold them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

LINK_DIR_PREFIX = "shoewarden-sim-"


def sweep_stale_link_dirs(tmp: str | None = None) -> list[Path]:
    """Remove the temporary link directories of pty hosts that are gone (killed: nothing
    ran their cleanup). Each holds its host's ``pid``; a directory without one, or whose
    process is alive, is left alone. Returns what was removed."""
    removed = []
    for d in Path(tmp or tempfile.gettempdir()).glob(LINK_DIR_PREFIX + "*"):
        try:
            pid = int((d / "pid").read_text().strip())
        except (OSError, ValueError):
            continue
        if _alive(pid):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def bad_link_dir(path: str) -> str | None:
    """Why ``path`` cannot hold the ports and the console FIFO (None: it can)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        return "exists and is not a directory"
    parent = p if p.exists() else next((a for a in p.parents if a.exists()), Path("/"))
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{parent} is not writable"
    where = p.resolve()
    if (any(where.is_relative_to(k) for k in ("/proc", "/sys", "/dev"))
            and not where.is_relative_to("/dev/shm")):  # by component: /procurement is fine
        return "not a place for symlinks and a FIFO (a kernel file system)"
    return None
