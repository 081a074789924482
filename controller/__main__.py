"""``python -m controller`` is the same as the ``shoewarden`` console script."""

from controller.cli import main

raise SystemExit(main())
