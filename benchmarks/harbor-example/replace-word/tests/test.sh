#!/bin/bash
# Passes when no "colour" is left in /app/docs and the rest of each file is unchanged.
mkdir -p /logs/verifier
ok=1
grep -rq colour /app/docs && ok=0
[ "$(cat /app/docs/palette.md)" = $'# Palette\nPick a color for the header.\nThe color of links is blue.' ] || ok=0
[ "$(cat /app/docs/notes.md)" = $'# Notes\nEach color has a name.' ] || ok=0
echo $ok > /logs/verifier/reward.txt
