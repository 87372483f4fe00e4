"""Optimize stage: proposers that turn error clusters into candidate edits of harness files."""
