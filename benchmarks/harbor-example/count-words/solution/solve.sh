#!/bin/bash
cd /app
wc -w < notes.txt > word_count.txt
