#!/bin/bash
cd /app
awk -F, 'NR > 1 { s += $3 } END { print s }' orders.csv > total.txt
