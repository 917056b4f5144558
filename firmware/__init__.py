"""The board files fleetwire ships (boot.py, main.py), the freeze recipe (manifest.py) and the
partition table, as `fleetwire.firmware`: `fleetwire deploy` copies the board files from
PATH, where the package is installed or in a checkout."""

import os

PATH = os.path.dirname(os.path.abspath(__file__))
