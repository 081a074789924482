"""The floor: live views of the tables from their audit logs (docs/floor.md).

A layer of its own, above the controller's core and below the composition root: it reads
audit records — files a table is writing, or (issue 12) records from a message bus — and
never reaches into a table's engine, drivers or devices. ``controller/app`` imports it to
serve the dealer display beside a running table and to run ``shoewarden floor``/``demo``.

- :mod:`floor.follow` — follow log directories as they grow (whole lines only);
- :mod:`floor.core` — :class:`~floor.core.Floor`: chain check, live state, alerts, acks;
- :mod:`floor.tablestate` — a table's state folded from its records;
- :mod:`floor.alerts`, :mod:`floor.store` — alerts; the SQLite index;
- :mod:`floor.views`, :mod:`floor.roads` — what the pages show; the baccarat board;
- :mod:`floor.rounds` — the hand look-up (the audit report's layout);
- :mod:`floor.web`, :mod:`floor.serve`, :mod:`floor.display` — Starlette apps, uvicorn,
  the dealer display; :mod:`floor.cli`, :mod:`floor.options` — ``shoewarden floor``.
"""
