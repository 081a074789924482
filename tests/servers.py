"""Private NATS and PostgreSQL servers for the tests: Debian's binaries, temp dirs, free ports.

Nothing here depends on a system service: each server is started from its binary in a
directory of its own, on a free port of 127.0.0.1, and stopped at the end. A missing
binary FAILS the test naming the Debian package (``make test`` installs both), never skips:
a floor that was never tested against a real server is not a tested floor.

PostgreSQL refuses to run as root; when the tests run as root (CI), the server runs as an
unprivileged user (``shoewarden-test``, created with ``useradd`` when missing) by ``runuser``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_USER = "shoewarden-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 20,
              greeting: bytes | None = None) -> None:
    """Until ``proc`` listens on ``port``. With ``greeting``, the listener must say it in
    its first bytes: a free port picked here can be taken by another worker's server
    before ours binds it, and then ours exits while someone else's answers (a NATS test
    once talked to a PostgreSQL server: "unexpected EOF", then "connection refused" when
    that one stopped). Raises ``PortTaken`` when the process exited before listening."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise PortTaken(f"{what} exited with {proc.returncode} before listening on "
                            f"127.0.0.1:{port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port),
                                                                     0.2) as s:
            if greeting is None:
                return
            s.settimeout(2)
            if greeting in s.recv(4096):
                return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} in {timeout} s")


class PortTaken(RuntimeError):
    """A server exited before it listened (its port was taken, most often)."""


class NatsServer:
    """``nats-server -js -sd DIR -p PORT -a 127.0.0.1``; :meth:`kill` (SIGKILL) and
    :meth:`start` again on the same port and store dir, as a crashed broker comes back."""

    def __init__(self, work: Path) -> None:
        binary = shutil.which("nats-server")
        if binary is None:
            pytest.fail("nats-server is not installed: the floor's NATS tests need Debian's "
                        "package nats-server (make test installs it)")
        self.binary = binary
        self.store = work / "jetstream"
        self.name = f"sw-test-{uuid.uuid4().hex[:12]}"  # (its greeting names it: wait_port)
        self.proc: subprocess.Popen[bytes] | None = None
        for attempt in range(5):  # a port another worker took first: another port
            self.port = free_port()
            try:
                self.start()
                break
            except PortTaken:
                if attempt == 4:
                    raise

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "-js", "-sd", str(self.store), "-p", str(self.port),
             "-a", "127.0.0.1", "-n", self.name], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc, "nats-server",
                  greeting=f'"server_name":"{self.name}"'.encode())

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name))
    if not found:
        pytest.fail("PostgreSQL is not installed: the database floor's tests need Debian's "
                    "package postgresql (initdb and pg_ctl; make test installs it)")
    return Path(found[-1]).parent


def _as_user() -> list[str]:
    """The prefix that runs a PostgreSQL binary as a user it accepts."""
    if os.geteuid() != 0:
        return []
    if subprocess.run(["id", "-u", PG_USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/false",
                        PG_USER], check=True, capture_output=True)
    return ["runuser", "-u", PG_USER, "--"]


class PostgresServer:
    """A private cluster (``initdb`` in a temp dir, ``pg_ctl start``), trust auth on
    127.0.0.1 only; :meth:`new_database` gives each test a database of its own."""

    def __init__(self) -> None:
        self.bin = _pg_bin()
        self.prefix = _as_user()
        # a dir of its own under /tmp: pytest's tmp dirs are private to root
        self.dir = Path(tempfile.mkdtemp(prefix="shoewarden-pg-"))
        if self.prefix:
            shutil.chown(self.dir, PG_USER)
        self.data = self.dir / "data"
        self.port = free_port()
        subprocess.run([*self.prefix, str(self.bin / "initdb"), "-D", str(self.data),
                        "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"],
                       check=True, capture_output=True)
        opts = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c full_page_writes=off -c synchronous_commit=off")
        subprocess.run([*self.prefix, str(self.bin / "pg_ctl"), "-D", str(self.data), "-w",
                        "-t", "30", "-l", str(self.dir / "server.log"), "-o", opts, "start"],
                       check=True, capture_output=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        subprocess.run([*self.prefix, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m",
                        "immediate", "-w", "stop"], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def nats(work: Path) -> Iterator[NatsServer]:
    server = NatsServer(work)
    try:
        yield server
    finally:
        server.stop()
