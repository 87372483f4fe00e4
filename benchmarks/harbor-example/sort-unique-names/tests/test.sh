#!/bin/bash
# Passes when /app/sorted_names.txt has the unique names of names.txt in alphabetical order.
mkdir -p /logs/verifier
expected=$'anton\nbasil\nkai\nmira\nzoe'
if [ "$(cat /app/sorted_names.txt 2>/dev/null)" = "$expected" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo "sorted_names.txt differs from the expected list"
  echo 0 > /logs/verifier/reward.txt
fi
