#!/usr/bin/env bash
# Fails when a source file of a service, the protocol and platform crates, the sandbox, the client
# or the load generator is over 400 lines: a file holds one idea, and one a newcomer can read
# through. The tests crate is not
# looked at (its scenarios are stories, read one at a time).
#
# Usage: deploy/check-file-sizes.sh [root]   (root: a checkout; the default is this one)
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"
limit=400
found=0
while IFS= read -r file; do
  lines=$(wc -l <"$file")
  if ((lines > limit)); then
    echo "$file: $lines lines (at most $limit): split it into files that hold one idea each"
    found=1
  fi
done < <(find booking/src gateway/src consumer/src loadgen/src protocol/src platform/src sandbox/src client/src -name '*.rs' | sort)
((found == 0)) && echo "file sizes: every source file within $limit lines"
exit "$found"
