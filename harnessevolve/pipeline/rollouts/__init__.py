"""Running a harness on tasks and scoring it: the scorer and its set-up, repeated scoring, the
persistent rollout cache, machine-failure tallies, best-of-k, sandboxed checks, and the reference
trajectories the signals compare against (found, covered, generated)."""
