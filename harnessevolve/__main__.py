"""``python -m harnessevolve``."""

from harnessevolve.cli.app import main

main()
