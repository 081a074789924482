"""Reading back what a NATS JetStream stream holds (the tests' view of the wire)."""

from __future__ import annotations

import asyncio
from typing import Any

from floor.forward import STREAM


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
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
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
