"""The audit log's own error: what cannot be opened or written safely, and where."""

from __future__ import annotations


class AuditLogError(Exception):
    """The audit log cannot be opened or written safely.

    ``path`` and ``line`` (1-based) locate the problem when it is in a file.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}: " if line is None else f"{path}: line {line}: "
        super().__init__(where + message)
