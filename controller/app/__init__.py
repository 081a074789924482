"""The composition root: where the controller meets the devices (docs/architecture.md).

``controller/`` core (engine, rules, events, profiles, audit log, session) knows no bytes
and no ports and never imports ``drivers`` or ``simulators``. This package is the only
place in ``controller/`` that does: it wires drivers, the dealer console and the audit
log to one :class:`~controller.session.TableSession` and runs them.

- :mod:`controller.app.runtime` — the table runtime: one event queue, one engine thread;
- :mod:`controller.app.tableconfig` — the table config file (devices, allowlist, log);
- :mod:`controller.app.console` — the dealer console's line commands;
- :mod:`controller.app.run` — ``shoewarden run``: real devices, the dealer console,
  crash recovery;
- :mod:`controller.app.bench` — ``shoewarden bench``: simulated devices in a child
  process, resume after a crash (imports ``simulators``);
- :mod:`controller.app.sim` — ``shoewarden sim`` (imports ``simulators``);
- :mod:`controller.app.ports` — ``shoewarden ports``;
- :mod:`controller.app.commands` — registers the commands with the CLI (imports the rest
  only when a command runs, so ``shoewarden check`` loads no driver).
"""
