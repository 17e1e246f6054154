#!/usr/bin/env bash
# usage: roundtrip.sh RELAXC DIR...
# For every .rx file under DIRs that `relaxc check` accepts: print it, print the print, and
# require both prints to be identical. Files that are rejected (diagnostic tests) are counted
# separately and must be rejected consistently.
set -u
relaxc=$1; shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0 rejected=0
while IFS= read -r f; do
  if ! "$relaxc" print "$f" >"$tmp/a.rx" 2>"$tmp/err"; then
    rejected=$((rejected + 1))
    continue
  fi
  if ! "$relaxc" print "$tmp/a.rx" >"$tmp/b.rx" 2>"$tmp/err2"; then
    echo "FAIL: $f: its print does not parse back:"; cat "$tmp/err2"
    failed=$((failed + 1))
  elif ! cmp -s "$tmp/a.rx" "$tmp/b.rx"; then
    echo "FAIL: $f: print is not stable:"; diff "$tmp/a.rx" "$tmp/b.rx" | head -20
    failed=$((failed + 1))
  else
    passed=$((passed + 1))
  fi
done < <(find "$@" -name '*.rx' -not -path '*/Inputs/*' 2>/dev/null | sort)
echo "roundtrip: $rejected files rejected by check (diagnostic tests), not counted"
echo "roundtrip: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
