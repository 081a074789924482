"""The dealer display, served by the table's own controller (``run``/``bench --display``).

It follows the table's own log directory (the same follower as the floor, no index kept),
so it shows only what the log already holds — a card after it left the shoe, a deviation
after it was written — and it keeps working when the floor's network is down.
"""

from __future__ import annotations

from pathlib import Path

from floor.core import Floor
from floor.serve import ServerThread, host_port
from floor.store import FloorStore
from floor.web import display_app

#: the display reads its log in slices of about 20 records, yielding the GIL after each
DISPLAY_SLICE = 8 << 10


class Display:
    """A running display: :meth:`stop` it when the table stops."""

    def __init__(self, log_root: Path, table: str | None, address: str) -> None:
        host, port = host_port(address)
        self.floor = Floor([log_root], FloorStore(":memory:"), keep_records=False,
                           tables=frozenset({table}) if table else None,
                           silent_after=float("inf"), poll_interval=0.02,
                           slice_bytes=DISPLAY_SLICE, yield_gil=True)
        self.web = ServerThread(display_app(self.floor, table), host, port)

    def start(self) -> Display:
        self.web.start()
        return self

    @property
    def url(self) -> str:
        host = self.web.server.config.host
        return f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{self.web.port}/"

    def stop(self) -> None:
        self.web.stop()
        self.floor.stop()
        self.floor.store.close()


def start_display(log_root: str | Path, table: str | None, address: str) -> Display:
    """Serve the dealer display of ``table`` (logs under ``log_root``) at ``address``."""
    return Display(Path(log_root), table, address).start()


class DisplayError(ValueError):
    """``--display`` cannot be served: the address, or a log not in the table layout."""


def display_for_log(log_file: str | Path, address: str) -> Display:
    """The display of the table whose log is ``log_file`` (``<root>/<table>/<table>-….jsonl``,
    as ``bench --log DIR`` and ``run`` write it), started."""
    from controller.audit.files import parse_log_name
    from floor.serve import HostPortError

    path = Path(log_file)
    parsed = parse_log_name(path.name)
    if parsed is None or path.parent.name != parsed.table:
        raise DisplayError(f"--display needs the log in a log directory (--log DIR), not the "
                           f"file {path}")
    try:
        return start_display(path.parent.parent, parsed.table, address)
    except HostPortError as exc:
        raise DisplayError(f"--display {exc}") from None
    except OSError as exc:
        raise DisplayError(f"--display {address}: cannot serve: {exc}") from None
