"""The run folder and its files: the ledger (typed events), the harness lock, their versions.

``pipeline`` writes them; ``report``, ``train`` and the CLI read them; none of those import each
other for it. Everything here depends on ``core`` only (and ``spend.py`` on the usage meter it
mirrors, ``models.usage``)."""
