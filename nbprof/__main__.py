"""``python -m nbprof torch|cprofile script.py [args]``: see :mod:`nbprof.cli`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
