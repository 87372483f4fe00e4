#!/usr/bin/env bash
# Regenerates benchmarks/swe-synth/ from semantic_version 2.10.0 (BSD-2-Clause), fetched from PyPI
# as its source distribution. Run from the project root:  bash benchmarks/swe-synth/generate.sh
# The Django integration (an optional extra upstream) is left out: its tests need Django.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
he=${HE:-harnessevolve}
py=${PYTHON:-python3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download --quiet --no-deps --no-binary :all: "semantic_version==2.10.0" -d "$tmp"
tar -xzf "$tmp"/semantic_version-2.10.0.tar.gz -C "$tmp"
repo="$tmp/semantic_version-2.10.0"
rm -rf "$repo"/docs "$repo"/tests/django_test_app "$repo"/tests/test_django.py "$repo"/tests/setup_django.py \
  "$repo"/semantic_version/django_fields.py "$repo"/tox.ini "$repo"/Makefile "$repo"/setup.cfg \
  "$repo"/MANIFEST.in "$repo"/ChangeLog "$repo"/README.rst "$repo"/CREDITS "$repo"/PKG-INFO
cp "$repo/LICENSE" "$here/LICENSE-semantic_version"
"$he" tasks synthesize --repo "$repo" --out "$here" --count 24 --seed 0 --name semver
