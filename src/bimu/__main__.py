"""``python -m bimu``: the same command line as ``bimu`` (for environments without the script on PATH)."""

import sys

from bimu.cli import main

if __name__ == "__main__":  # pragma: no branch
    sys.exit(main())
