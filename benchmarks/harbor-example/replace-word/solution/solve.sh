#!/bin/bash
cd /app
sed -i 's/colour/color/g' docs/*.md
