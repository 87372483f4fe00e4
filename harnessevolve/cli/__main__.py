"""``python -m harnessevolve.cli``."""

from harnessevolve.cli.app import main

main()
