"""Scoring: a Scorer runs a harness on tasks and scores them (rollout cache, repeats, best-of-k,
sandboxed checks, references)."""
