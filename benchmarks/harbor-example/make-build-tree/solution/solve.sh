#!/bin/bash
mkdir -p /app/build/bin /app/build/lib
touch /app/build/README
