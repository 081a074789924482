"""shoewarden controller: the procedure engine, the rules it enforces and the audit log.

This layer knows no bytes and no ports. Devices reach it only as typed input
events (see ``controller.events``); it answers with outputs (state changes,
dealer prompts, deviations). See docs/architecture.md.
"""

__version__ = "0.1.0"

from controller import native

native.prefer_source(__name__)  # (controller.rounds: a stale compiled module never runs)
