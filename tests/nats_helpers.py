"""Reading back what a NATS JetStream stream holds (the tests' view of the wire)."""

from __future__ import annotations

import asyncio
from typing import Any

from floor.forward import STREAM, load_nats


def stream_messages(url: str, subject_prefix: str = "shoewarden.audit.") -> list[Any]:
    """Every message of the stream ``SHOEWARDEN`` on subjects under ``subject_prefix``, in
    stream order: (subject, msg id, data)."""

    async def read() -> list[Any]:
        import nats
        from nats.js.errors import NotFoundError

        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            try:
                info = await js.stream_info(STREAM)
            except NotFoundError:
                return []
            out = []
            for seq in range(max(info.state.first_seq, 1), info.state.last_seq + 1):
                try:
                    msg = await js.get_msg(STREAM, seq)
                except NotFoundError:
                    continue
                if msg.subject.startswith(subject_prefix):
                    out.append((msg.subject, (msg.headers or {}).get("Nats-Msg-Id"),
                                bytes(msg.data)))
            return out
        finally:
            await nc.close()

    return asyncio.run(read())


class Subscriber:
    """A plain NATS subscriber on ``subject``, on a thread of its own: what a listener on the
    network sees, message by message as it arrives (``messages``: the payloads)."""

    def __init__(self, url: str, subject: str) -> None:
        import threading

        self.url, self.subject = url, subject
        self.messages: list[bytes] = []
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        import nats

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        nc = await nats.connect(self.url)

        async def take(msg: Any) -> None:
            self.messages.append(bytes(msg.data))

        await nc.subscribe(self.subject, cb=take)
        await nc.flush()
        self._ready.set()
        await self._stop.wait()
        await nc.close()

    def __enter__(self) -> Subscriber:
        load_nats()  # before the thread: see floor.forward.load_nats
        self._thread.start()
        assert self._ready.wait(10), "the subscriber did not connect"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def forward_once(forwarder: Any, timeout: float = 120) -> None:
    """Run a ``stop_when_done`` forwarder to its end, or fail after ``timeout`` seconds.

    A forwarder never gives up on its broker (the table deals on regardless), so a test's
    NATS server that died made ``run()`` wait for ever: a ``make test`` hung at 99 % on
    a defunct nats-server. Run in its thread, it is stopped and the test fails, naming it."""
    forwarder.start()
    forwarder.join(timeout)
    if forwarder.running():
        forwarder.stop(timeout=10)
        raise AssertionError(f"the forwarder did not finish in {timeout:.0f} s (published "
                             f"{forwarder.published}; is the test's nats-server alive?)")
