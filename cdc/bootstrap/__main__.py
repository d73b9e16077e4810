"""``python -m cdc.bootstrap`` / ``spark-submit cdc/bootstrap/__main__.py``: weir bootstrap."""

import sys

from cdc.bootstrap.cli import main

if __name__ == "__main__":
    sys.exit(main())
