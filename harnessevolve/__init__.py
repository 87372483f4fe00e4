"""harnessevolve: evolve an LLM agent's harness against benchmark tasks, behind gates."""

__version__ = "0.1.0"
