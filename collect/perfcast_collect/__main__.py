"""``python3 -m perfcast_collect …`` (run from ``collect/``, or with ``collect/`` on ``PYTHONPATH``)."""

import sys

from .cli import main

sys.exit(main())
