"""Proposing: the proposal context and the optimizer agent (its workspace, diff and history)."""
