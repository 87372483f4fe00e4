"""Evaluate stage: checkers, alignment against reference trajectories, error signals, clusters."""
