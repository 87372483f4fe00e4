"""The command-line interface (typer). Errors become messages and exit codes here, and only here."""
