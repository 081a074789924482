"""The key file of a keyed (HMAC) audit log.

Format (docs/audit-log.md, "Keyed logs"): a text file holding the key as
hexadecimal digits, at least 32 bytes (64 hex digits). Blank lines and lines
starting with ``#`` are ignored; the key may be split over several lines and
may contain spaces. Make one with::

    umask 077; python3 -c 'import secrets; print(secrets.token_hex(32))' > audit.key

The file should be readable by its owner only; :func:`load_key` reports a
group- or world-readable key file in :attr:`LoadedKey.warning`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from controller.audit.canonical import key_id
from controller.inputfiles import file_problem

MIN_KEY_BYTES = 32


class KeyFileError(ValueError):
    """A key file that cannot be read or does not hold a usable key."""


@dataclass(frozen=True)
class LoadedKey:
    key: bytes
    key_id: str
    path: str
    warning: str | None = None


def parse_key(text: str, source: str = "<key>") -> bytes:
    """The key bytes from a key file's text."""
    digits = "".join(
        "".join(line.split())
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )
    if not digits:
        raise KeyFileError(f"{source}: no key (expected hexadecimal digits)")
    try:
        key = bytes.fromhex(digits)
    except ValueError:
        raise KeyFileError(
            f"{source}: the key is not hexadecimal (or has an odd number of digits)"
        ) from None
    if len(key) < MIN_KEY_BYTES:
        raise KeyFileError(
            f"{source}: the key is {len(key)} bytes; at least {MIN_KEY_BYTES} are required"
        )
    return key


def load_key(path: str | os.PathLike[str]) -> LoadedKey:
    """Read a key file; raises :class:`KeyFileError` (never ``OSError``) when it is unusable."""
    name = os.fspath(path)
    why = file_problem(name)  # (a FIFO blocked the command: a review)
    if why == "no such file":
        raise KeyFileError(f"{name}: no such key file")
    if why is not None:
        raise KeyFileError(f"{name}: cannot read the key file: {why}")
    try:
        with open(name, encoding="ascii") as f:
            text = f.read()
        mode = os.stat(name).st_mode
    except FileNotFoundError:
        raise KeyFileError(f"{name}: no such key file") from None
    except UnicodeDecodeError:
        raise KeyFileError(f"{name}: not a key file (a key is hexadecimal text)") from None
    except OSError as exc:
        raise KeyFileError(f"{name}: cannot read the key file: {exc.strerror or exc}") \
            from None
    key = parse_key(text, name)
    warning = None
    if stat.S_IMODE(mode) & 0o077:
        warning = (f"{name}: key file mode is {stat.S_IMODE(mode):04o}; "
                   "it should be readable by its owner only (chmod 600)")
    return LoadedKey(key, key_id(key), name, warning)
