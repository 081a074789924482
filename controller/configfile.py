"""Reading the TOML files shoewarden is configured with: profiles, scenarios, table configs.

Every such file fails the same way — ``file: key: what is wrong`` — and can be named
either by path or, for the bundled kinds, by name in their directory. The loaders
differ only in their schema, so the reading, the error type and the name lookup
live here once.
"""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path
from typing import Any

MAX_BYTES = 256 * 1024
"""The largest configuration file read (the bundled ones are a few KB): a bigger one, or a
device such as ``/dev/zero``, is refused before it is read, not read until memory runs out."""
MAX_LINE = 8 * 1024
"""The longest line read: Python's TOML parser takes time and memory quadratic in a dotted
key's parts (a 40 KB key: 6 s; a 200 KB one: out of memory), and no setting needs a line
this long."""


class ConfigFileError(ValueError):
    """A configuration file that cannot be used: ``file: key: what is wrong``."""

    def __init__(self, file: str, key: str, why: str) -> None:
        self.file, self.key, self.why = file, key, why
        super().__init__(f"{file}: {key}: {why}" if key else f"{file}: {why}")


def read_toml(path: Path, error: type[ConfigFileError],
              missing: str | None = None) -> dict[str, Any]:
    """The decoded TOML document at ``path``, or ``error(file, "", why)``.

    ``missing`` replaces the "cannot read: …" message for a file that does not exist.
    """
    file = str(path)
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            raise error(file, "", "cannot read: " + ("a directory" if stat.S_ISDIR(mode)
                                                     else "not a regular file"))
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise error(file, "", f"larger than {MAX_BYTES // 1024} KB: not a configuration "
                                  "file")
        long = next((n for n, line in enumerate(data.split(b"\n"), 1)
                     if len(line) > MAX_LINE), None)
        if long is not None:
            raise error(file, "", f"line {long} is longer than {MAX_LINE} bytes: not a "
                                  "configuration file")
        text = data.decode("utf-8").removeprefix("\ufeff")  # (an editor's byte order mark:
        # TOML has none, and "Invalid statement (at line 1, column 1)" did not say so)
    except FileNotFoundError as e:
        raise error(file, "", missing or f"cannot read: {e.strerror or e}") from e
    except OSError as e:
        raise error(file, "", f"cannot read: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        before = e.object[:e.start]  # named by line and column, as tomllib names its errors
        line, column = before.count(b"\n") + 1, e.start - before.rfind(b"\n")
        raise error(file, "", f"not valid TOML: not UTF-8 text ({e.reason}) (at line {line}, "
                              f"column {column})") from e
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise error(file, "", f"not valid TOML: {e}") from e
    except RecursionError as e:  # (arrays or tables nested thousands deep)
        raise error(file, "", "not valid TOML: nested too deep to read") from e


def names_in(directory: Path) -> list[str]:
    """The bundled files' names (stems of ``*.toml``), sorted."""
    return sorted(p.stem for p in directory.glob("*.toml"))


def find_named(name_or_path: str, directory: Path, what: str,
               error: type[ConfigFileError]) -> Path:
    """A file given by path (``*.toml`` or an existing path), else ``directory/NAME.toml``."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or candidate.exists():
        return candidate
    path = directory / f"{name_or_path}.toml"
    if not path.exists():
        known = ", ".join(names_in(directory)) or "none"
        raise error(str(path), "", f"no {what} named {name_or_path!r} (known: {known})")
    return path


def check_stem(path: Path, name: str, error: type[ConfigFileError]) -> None:
    """A bundled file's ``name`` key must equal its file name."""
    if name != path.stem:
        raise error(str(path), "name", f"{name!r} differs from the file name")
