#!/usr/bin/env python3
"""``python3 collect/collect.py …`` from anywhere (also ``torchrun … collect/collect.py comm``): runs the CLI of
the ``perfcast_collect`` package beside this file."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from perfcast_collect.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
