"""Serving an app with uvicorn: in the foreground (the floor) or on a thread (the display).

The dealer display runs inside the table's controller: its asyncio loop lives in a thread of
its own (uvicorn's ``Server.run`` there, which installs no signal handler off the main
thread), and it reads the table's log from disk. So nothing it does — a slow browser, a
stuck stream — can reach the engine thread, which only appends to its log as it always did.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn


class HostPortError(ValueError):
    """A ``--http``/``--display`` value that is not ``HOST:PORT``."""


def host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``:PORT`` for every interface), with a message naming what is wrong."""
    host, sep, port = text.rpartition(":")
    if not sep:
        raise HostPortError(f"{text!r}: expected HOST:PORT, e.g. 127.0.0.1:8080")
    try:
        number = int(port)
    except ValueError:
        raise HostPortError(f"{text!r}: the port {port!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise HostPortError(f"{text!r}: the port must be 0–65535")
    return (host.strip("[]") or "0.0.0.0"), number


def _close_streams(app: Any) -> None:
    """End the app's open event streams (its :class:`floor.web.Hub`, if it has one)."""
    hub = getattr(getattr(app, "state", None), "hub", None)
    if hub is not None:
        hub.close()


class _Server(uvicorn.Server):
    """uvicorn's server, ending the app's open event streams as a signal stops it.

    An event stream never ends by itself: uvicorn's graceful shutdown waited for it, then
    cancelled it after ``timeout_graceful_shutdown`` and logged the cancellation as
    "Exception in ASGI application" with a traceback — on every stop of a floor a browser
    was watching (``systemctl stop``, Ctrl-C). Ended first, each stream finishes as a
    normal response and the browser reconnects to whichever floor serves it next."""

    def handle_exit(self, sig: int, frame: Any) -> None:
        _close_streams(self.config.app)
        super().handle_exit(sig, frame)


def listen(host: str, port: int, what: str) -> socket.socket:
    """A socket listening on ``host:port``, bound before the server starts: a port in use is
    one line naming ``what`` (uvicorn would log it and exit 3), and the port the OS chose
    for port 0 is known before the floor says where it serves."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        raise OSError(f"{what}: cannot listen: {exc.strerror or exc}") from None


def server(app: Any, host: str, port: int) -> uvicorn.Server:
    # (a stream still open after a second, a client that does not read, is cancelled)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            lifespan="on", timeout_graceful_shutdown=1)
    return _Server(config)


class ServerThread:
    """An app served on a daemon thread; :meth:`start` returns once it listens."""

    def __init__(self, app: Any, host: str, port: int) -> None:
        self.app = app
        self.server = server(app, host, port)
        self.thread = threading.Thread(target=self.server.run, name="web", daemon=True)

    def start(self, timeout: float = 10.0) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive():
                raise OSError("the web server did not start (is the address in use?)")
            if time.monotonic() > deadline:
                raise OSError("the web server did not start in time")
            time.sleep(0.01)
        return self

    @property
    def port(self) -> int:
        """The port it listens on (the one the OS chose for port 0)."""
        for s in self.server.servers:
            for sock in s.sockets:
                return int(sock.getsockname()[1])
        return int(self.server.config.port)

    def stop(self) -> None:
        _close_streams(self.app)  # open event streams end, so the shutdown need not cancel them
        self.server.should_exit = True
        self.thread.join(timeout=10)
