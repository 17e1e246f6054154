#!/usr/bin/env bash
# Fails when a tracked C source or header differs from what clang-format (with the committed
# .clang-format) makes of it, and names each such file; `make format` rewrites them.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=()
while IFS= read -r f; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.c' '*.h')
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: not formatted as .clang-format says (run 'make format'):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: $(git ls-files '*.c' '*.h' | wc -l) files formatted ($(clang-format --version))"
