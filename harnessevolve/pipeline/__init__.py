"""The generation loop that joins the four stages, the run ledger and the CI gate."""
