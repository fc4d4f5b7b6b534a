#!/usr/bin/env bash
# Prints one hash of the sources a GPU bundle is built from (every file under
# compiler/, dialects/, runtime/, examples/ and test/Unit/, by path and
# content), so that gpu-check.sh can tell whether the bundle it runs was
# built from the tree it runs in: the GPU machine's copy of the tree need not
# carry a current .git.
# Usage: source-hash.sh [ROOT]
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"
find compiler dialects runtime examples test/Unit -name __pycache__ -prune \
  -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum |
  cut -d' ' -f1
