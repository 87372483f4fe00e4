"""Exit 0 when the file named on the command line holds 47, the sum of orders.csv's amounts."""

import sys
from pathlib import Path

try:
    found = Path(sys.argv[1]).read_text().strip()
except OSError as exc:
    sys.exit(f"cannot read the total: {exc}")
if found not in ("47", "47.0"):
    sys.exit(f"total: expected 47, found {found!r}")
