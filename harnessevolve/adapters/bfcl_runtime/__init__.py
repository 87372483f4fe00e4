"""Code the BFCL tasks import inside the sandbox (their python_path): the per-turn checker."""
