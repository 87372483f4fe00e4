"""Exit 0 when the file named on the command line holds 47, the sum of orders.csv's amounts."""

import sys

try:
    found = open(sys.argv[1]).read().strip()
except OSError as exc:
    sys.exit(f"cannot read the total: {exc}")
if found not in ("47", "47.0"):
    sys.exit(f"total: expected 47, found {found!r}")
