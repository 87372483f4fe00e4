"""``harnessevolve compare``: is a harness change better than spending the same budget on sampling?

A *plan* (``plan.py``) names the agent model, the benchmark, the seed harness, the seeds and the
*arms* (the seed harness as it is, evolve runs, best-of-k at matched rollouts, fixed harness
folders). Each (arm, seed) is a *cell* (``cells.py``): its own folder under the output folder
and, once it finished, a small result file (``results.py``) that can be committed and merged
with cells made on other machines or days (``merge.py``) into one table (``table.py``).
``runner.py`` runs the cells one after the other, skipping finished ones on ``--resume``.
"""
