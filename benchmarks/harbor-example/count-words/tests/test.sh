#!/bin/bash
# Passes when /app/word_count.txt holds the number of words in notes.txt (11).
mkdir -p /logs/verifier
if [ "$(tr -d '[:space:]' < /app/word_count.txt 2>/dev/null)" = "11" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo "word_count.txt: expected 11, found '$(cat /app/word_count.txt 2>/dev/null)'"
  echo 0 > /logs/verifier/reward.txt
fi
