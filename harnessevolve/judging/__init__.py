"""Judging: a candidate through its gates (trials, the floor, held-out variants, code smoke, edit firing)."""
