"""``python -m simulators.pty_host``: the simulated table on ptys (see the package)."""

import sys

from simulators.pty_host.cli import main

sys.exit(main())
