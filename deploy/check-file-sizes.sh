#!/usr/bin/env bash
# Fails when a file of the project's own code is over 400 lines: a file holds one idea, and one
# a newcomer can read through. Looked at: the Rust of every crate (the tests' too), the Lua
# scripts, the shell scripts, and the page's own JavaScript (not what npm installs beside it).
#
# The files over the limit when the check grew to cover them are listed, with their length, in
# deploy/file-sizes-owed.txt: each may shrink and none may grow, a file not listed may not pass
# the limit, and a listed one that fits again must leave the list (so the list only shortens).
#
# Usage: deploy/check-file-sizes.sh [root]   (root: a checkout; the default is this one)
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"
limit=400
owed_file=deploy/file-sizes-owed.txt
declare -A owed=()
if [[ -f "$owed_file" ]]; then
  while read -r path most; do
    [[ -z "$path" || "$path" == \#* ]] && continue
    owed["$path"]="$most"
  done <"$owed_file"
fi
# The page's modules from npm (static/node_modules, and the copies made of them) are not ours.
from_npm() {
  local name
  name="$(basename "$1" .js)"
  [[ -d static/node_modules/$name ]] || grep -qx "/static/$name.js" .gitignore 2>/dev/null
}
files() {
  local dirs=() dir
  for dir in booking gateway consumer loadgen protocol platform sandbox client tests; do
    [[ -d $dir ]] && dirs+=("$dir")
  done
  ((${#dirs[@]})) && find "${dirs[@]}" -name '*.rs' -not -path '*/target/*' -not -path '*/node_modules/*'
  [[ -d lua ]] && find lua -name '*.lua'
  [[ -d deploy ]] && find deploy -name '*.sh' -not -path '*/secrets/*'
  if [[ -d static ]]; then
    local js
    while IFS= read -r js; do
      from_npm "$js" || echo "$js"
    done < <(find static -maxdepth 1 -name '*.js')
  fi
}
found=0
declare -A seen=()
while IFS= read -r file; do
  lines=$(wc -l <"$file")
  seen["$file"]=1
  most="${owed[$file]:-}"
  if [[ -n "$most" ]]; then
    if ((lines > most)); then
      echo "$file: $lines lines, over the $most it is owed at ($owed_file): it may only shrink"
      found=1
    elif ((lines <= limit)); then
      echo "$file: $lines lines, within $limit: take it off $owed_file"
      found=1
    fi
  elif ((lines > limit)); then
    echo "$file: $lines lines (at most $limit): split it into files that hold one idea each"
    found=1
  fi
done < <(files | sort)
for path in "${!owed[@]}"; do
  if [[ -z "${seen[$path]:-}" && -e "$path" ]]; then
    echo "$path: listed in $owed_file but not a file this check reads"
    found=1
  elif [[ -z "${seen[$path]:-}" ]]; then
    echo "$path: listed in $owed_file and gone: take it off the list"
    found=1
  fi
done
((found == 0)) && echo "file sizes: every file within $limit lines, or within what $owed_file allows it"
exit "$found"
