"""Task synthesis: new executable tasks, each with its own checker, made from a code repository.

``mutate`` finds AST-level mutation sites in a Python source file (flipped comparisons and
operators, off-by-one constants, dropped statements and branches, swapped arguments) and applies
them as text splices, so the rest of the file keeps its formatting. ``testrun`` runs a repository's
test suite in the sandbox and reads one outcome per test. ``synthesize`` keeps a mutant only when
the original passes a stable set of tests and the mutant fails a specific, stable subset of it,
and ``task_writer`` turns each kept mutant into a native task file: the repository at the mutant,
an instruction written from the failing tests' output, a checker that runs pristine copies of the
tests in the sandbox, and the inverse patch as the gold solution.
"""
