"""Gate stage: quality, performance and held-out gates deciding whether a candidate stays."""
