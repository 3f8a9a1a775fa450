# ``python -m jetstream_sync`` and the ``jetstream-sync`` console script (setup.cfg points at
# ``main`` here). The command line itself lives in the jetstream_sync.cli package.
"""``python -m jetstream_sync``: runs :func:`jetstream_sync.cli.main`."""

import sys

from .cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
