#!/bin/bash
# The check itself lives in check_total.py beside this script (Harbor copies tests/ to /tests).
mkdir -p /logs/verifier
if python3 /tests/check_total.py /app/total.txt; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
