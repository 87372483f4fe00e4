#!/bin/bash
# This verifier writes no reward file: its exit status decides.
cd /app
[ -d build/bin ] && [ -d build/lib ] && [ -f build/README ] && [ ! -s build/README ]
