#!/bin/bash
cd /app
sort -u names.txt > sorted_names.txt
