"""``python -m cdc.bases`` / ``weir bases``: load, follow and check local bases."""

import sys

from cdc.bases.cli import main

if __name__ == "__main__":
    sys.exit(main())
