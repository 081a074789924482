"""``shoewarden sim``: the simulated devices alone, on ptys (delegates to the pty host).

``shoewarden sim --profile NAME [--seed S] [--scenario FILE] [...]`` prints one JSON line
of port paths (``shoe``, ``scanner``, ``shuffler``: symlinks to ptys; ``console``: the
dealer console FIFO) and serves until SIGTERM or Ctrl-C; point a table config's
``[devices.*] port`` at them, or run ``python -m simulators.pty_host --help`` for every
option (``sim`` passes them through).
"""

from __future__ import annotations

from typing import Any


def cmd_sim(args: Any) -> int:
    from simulators.pty_host import main

    argv: list[str] = []
    for opt, value in (("--profile", args.profile), ("--seed", args.seed),
                       ("--scenario", args.scenario), ("--pace", args.pace),
                       ("--shoes", args.shoes), ("--rounds-per-block", args.rounds_per_block),
                       ("--link-dir", args.link_dir), ("--exit-after", args.exit_after),
                       ("--decks", args.decks)):
        if value is not None:
            argv += [opt, str(value)]
    if args.no_wait:
        argv.append("--no-wait")
    if args.no_shuffler:
        argv.append("--no-shuffler")
    argv += ["--dealer", args.dealer]
    if args.print_allowlist is not None:
        argv += ["--print-allowlist", args.print_allowlist]
    return main(argv, prog="shoewarden sim")
