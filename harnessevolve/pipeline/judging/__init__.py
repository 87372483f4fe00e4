"""Whether a candidate is kept: the judge and its trials, the floor and held-out variants, the code
smoke check, the CI gate (``harnessevolve gate``) and, after acceptance, whether the edit fired."""
