#!/usr/bin/env bash
# scripts/deps-check.sh: the implementation of `scripts/deps.sh --check [BUILD_DIR...]`.
# Lists every Debian package that the build and the tests use and that scripts/deps.sh does not
# name; exit status 1 when there is any, 0 and one line "OK" otherwise. Run through deps.sh (it
# reads deps.sh's PACKAGES list); `bash scripts/deps-check.sh [BUILD_DIR...]` does the same.
#
# "Use" is computed from the tree and the build, never typed in here:
#  static pass (a clean clone, before any build):
#   - every `#include <...>` in the tree's .c and .h files (emitted-code templates in string
#     literals too), resolved with the include search paths of cc, gcc and clang-16 (C) and
#     clang++-16 (C++, the SIMT emulator compiles emitted CUDA C and MSL with it);
#   - find_program / find_library / find_path / find_file names and COMMAND programs of the
#     CMake files; absolute /usr/... paths named by CMake files, test scripts, lit config, the
#     Makefile and .ci/run (a bin directory among them joins the PATH commands resolve in);
#   - the programs that test scripts, lit RUN lines, Makefile recipes and .ci/run run;
#   - the Python modules imported by the tests' Python files (tests/lit, and any .py a CMake
#     file names);
#   - the libraries the sources dlopen ("lib*.so*" string literals), through ldconfig;
#   - the sanitizer runtimes of every -fsanitize=... the CMake files use, for gcc
#     (-print-file-name=libasan.so ...) and clang-16 (libclang_rt.asan-x86_64.a ...);
#   - the Vulkan ICD and layer JSON files the tests point at (by path, or by the layer names
#     "VK_LAYER_*" in the sources) and the library each one names.
#  dynamic pass (for each BUILD_DIR given, else for build/ and build-asan/ when they exist):
#   - the headers in the compilers' depfiles (CMakeFiles/**/*.o.d), the libraries and tools in
#     link.txt, the files CMakeCache.txt found, and the DT_NEEDED libraries (readelf -d) of every ELF file built (the relaxc
#     binaries, the tests, the SIMT emulator's cached kernels).
# Each file is mapped to its package with one batched `dpkg -S` (trying the realpath and the
# merged-/usr twin /lib <-> /usr/lib too). A package counts as named when deps.sh lists it, when
# it is in the Depends/Pre-Depends closure of a listed package, or when it is Essential: yes.
# Not packages, so not reported: the tree's own files, the build directories, and /usr/local
# (the machine image's CUDA toolkit under /usr/local/cuda is not a Debian package: NVRTC and
# the CUDA driver are found at run time and their tests skip without them). Files that are in no
# package and what cannot be found at all are printed as notes; they do not fail the check.
set +e -uo pipefail # sourced by deps.sh, which runs under set -e

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "${PACKAGES+x}" ]; then # run directly: take the lists from deps.sh
  eval "$(sed -n '/^PACKAGES=(/,/^)/p; /^ARM64_PACKAGES=(/,/^)/p; /^OPTIONAL=(/,/^)/p' "$ROOT/scripts/deps.sh")"
fi
# the arm64 group (deps.sh --arm64) is named where it is installed (dpkg's names carry no :arm64)
for p in "${ARM64_PACKAGES[@]:-}"; do
  if [ -n "$p" ] && dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    PACKAGES+=("${p%%:*}")
  fi
done

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
: >"$TMP/files" # PATH<TAB>why
: >"$TMP/notes" # text
SYS_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
EXTRA_PATH=""

use() { printf '%s\t%s\n' "$1" "$2" >>"$TMP/files"; }
note() { printf '%s\n' "$1" >>"$TMP/notes"; }
# missing KEY TEXT: something the tree uses that this machine lacks. A failure, unless KEY is in
# deps.sh's OPTIONAL list (what Debian does not ship, or what only other platforms have).
: >"$TMP/unresolved"
missing() {
  if [[ " ${OPTIONAL[*]:-} " == *" $1 "* ]]; then
    note "$2 (optional in deps.sh)"
  else
    printf '%s\n' "$2" >>"$TMP/unresolved"
  fi
}

# the tree's files (no .git, no build directories: anything holding a CMakeCache.txt, or a
# top-level directory git ignores, such as bench/gpu.sh's downloaded build-gpu-deps)
cd "$ROOT" || exit 2
prune=(-name .git)
for d in ./*/; do
  if [ -f "$d/CMakeCache.txt" ] || git check-ignore -q "${d%/}" 2>/dev/null; then
    prune+=(-o -path "${d%/}")
  fi
done
find . \( "${prune[@]}" \) -prune -o -type f -print | sed 's|^\./||' | sort >"$TMP/tree"
grep -E '\.(c|h)$' "$TMP/tree" >"$TMP/csrc"
grep -E '(^|/)CMakeLists\.txt$|\.cmake$|\.cmake\.in$' "$TMP/tree" >"$TMP/cmake"
# shell text CI runs: .ci/run, the Makefile, tests/**/*.sh, and every script of the tree that
# one of these runs (bash scripts/deps.sh, source .../deps-check.sh), followed transitively
{ grep -E '^tests/.*\.sh$' "$TMP/tree"; echo .ci/run; echo Makefile; } >"$TMP/shell"
while :; do
  xargs -d '\n' cat <"$TMP/shell" | sed -E 's/(^|[[:space:]])#.*$//' |
    grep -E '(^|[[:space:];&|(@])(bash|sh|source|\.)[[:space:]]' | grep -oE '[A-Za-z0-9_-]+\.sh\b' | sort -u |
    while read -r n; do grep -E "(^|/)${n//./\\.}$" "$TMP/tree"; done | sort -u >"$TMP/shell.more"
  sort -u "$TMP/shell" "$TMP/shell.more" >"$TMP/shell.all"
  [ "$(wc -l <"$TMP/shell.all")" -eq "$(sort -u "$TMP/shell" | wc -l)" ] && break
  mv "$TMP/shell.all" "$TMP/shell"
done
# not this file: its text is patterns about commands, not commands (its own tools are the
# Essential coreutils, findutils, grep, sed, dpkg, and awk and python3, which deps.sh names)
grep -vx 'scripts/deps-check.sh' "$TMP/shell" >"$TMP/shell.all"
mv "$TMP/shell.all" "$TMP/shell"
grep -E '^tests/lit/.*\.(test|rx)$' "$TMP/tree" >"$TMP/lit"

# command -> file in SYS_PATH (plus the bin directories the tree names)
resolve_cmd() { PATH="$EXTRA_PATH$SYS_PATH" type -P -- "$1" 2>/dev/null; }

# ---- absolute paths the CMake files, scripts and lit config name ---------------------------
while IFS=$'\t' read -r f p; do
  p="${p%/}"
  case "$p" in /usr/local/*) continue ;; esac
  if [ -d "$p" ]; then
    case "$p" in
      /bin | /sbin | /usr/bin | /usr/sbin) ;;
      */bin) EXTRA_PATH="$EXTRA_PATH$p:" ;; # e.g. /usr/lib/llvm-14/bin, first on lit's PATH
    esac
  elif [ -e "$p" ]; then
    use "$p" "named in $f"
  fi
done < <(cat "$TMP/cmake" "$TMP/shell" <(grep -E '^tests/lit/.*\.(py|in)$' "$TMP/tree") |
  xargs -d '\n' grep -oE '(^|[^A-Za-z0-9_.$}-])/(usr|lib|etc|opt|bin|sbin)/[A-Za-z0-9_.+/-]*' |
  sed -E 's|:[^/]*/|\t/|' | sort -u)

# ---- programs run: lit RUN lines, test scripts, Makefile recipes, .ci/run, CMake COMMANDs ----
# The first word of every simple command; words that name no program (keywords, variables,
# functions, shell builtins) resolve to nothing here and are dropped.
first_words() { # shell text on stdin -> the first word of each simple command
  sed -E 's/\$\(|`|\|\||&&|[|;(){}!]/\n/g' |
    sed -E 's/^[[:space:]@-]*//; s/^([A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*[[:space:]]+)*//' |
    sed -E 's/^(exec|env|command|nohup|time|then|do|else|xargs)[[:space:]]+//' |
    awk '{print $1}' | grep -E '^[A-Za-z0-9_][A-Za-z0-9_.+-]*$' | sort -u
}
# lit RUN lines run with the bin directories the tree names (RX_LLVM_BIN) first on PATH
xargs -d '\n' grep -hE 'RUN:' <"$TMP/lit" | sed -E 's/^.*RUN:[[:space:]]*//' | first_words |
  sed 's/^/lit\t/' >"$TMP/words"
{
  # a line marked "deps-check: optional" runs a program only when it is there (sudo)
  xargs -d '\n' cat <"$TMP/shell" | grep -v 'deps-check: optional' | sed -E 's/(^|[[:space:]])#.*$//' |
    first_words
  xargs -d '\n' cat <"$TMP/cmake" | tr '\n' ' ' |
    grep -oE 'COMMAND[[:space:]]+[A-Za-z0-9_][A-Za-z0-9_.+-]*' | awk '{print $2}'
  echo cc # CMake's default C compiler (project(... LANGUAGES C))
} | sort -u | sed 's/^/sh\t/' >>"$TMP/words"
while IFS=$'\t' read -r kind w; do
  # a name that is also a shell builtin (echo, test, printf) runs as the builtin in sh/bash
  # scripts but as the program in lit's internal shell: count the program either way
  if [ "$kind" = lit ]; then
    p="$(resolve_cmd "$w")" && [ -n "$p" ] || continue
    src="$(xargs -d '\n' grep -lwF -- "$w" <"$TMP/lit" 2>/dev/null | head -1)"
  else
    p="$(PATH="$SYS_PATH" type -P -- "$w")" && [ -n "$p" ] || continue
    src="$(cat "$TMP/shell" "$TMP/cmake" | xargs -d '\n' grep -lwF -- "$w" 2>/dev/null | head -1)"
  fi
  [ -n "$src" ] || src="CMake's default compiler"
  use "$p" "runs '$w' ($src)"
done <"$TMP/words"

# ---- CMake find_* calls -----------------------------------------------------------------------
cc_dirs() { # LANG COMPILER: the compiler's <...> include search path
  "$2" -E -Wp,-v -x "$1" /dev/null 2>&1 >/dev/null |
    sed -n '/search starts here:/,/End of search list/p' | grep '^ /' | sed 's/^ //; s/ (framework directory)$//'
}
C_COMPILERS=() CXX_COMPILERS=()
for c in cc gcc clang-16; do p="$(resolve_cmd "$c")" && C_COMPILERS+=("$p"); done
p="$(resolve_cmd clang++-16)" && CXX_COMPILERS+=("$p")
[ ${#C_COMPILERS[@]} -eq 0 ] && missing cc "no C compiler (cc, gcc, clang-16) to resolve #include <...> with"
LIB_DIRS=()
if p="$(resolve_cmd cc)"; then
  IFS=: read -r -a LIB_DIRS < <("$p" -print-search-dirs | sed -n 's/^libraries: =//p')
fi
LIB_DIRS+=(/usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib /lib)
INC_DIRS=()
for c in "${C_COMPILERS[@]}"; do mapfile -t -O ${#INC_DIRS[@]} INC_DIRS < <(cc_dirs c "$c"); done
INC_DIRS+=(/usr/include)

find_in() { # NAME DIR... : first DIR/NAME that exists
  local n="$1" d
  shift
  for d in "$@"; do [ -e "$d/$n" ] && { realpath -s "$d/$n"; return 0; }; done
  return 1
}
find_lib() { # NAME (cmake find_library style)
  case "$1" in
    *.a | *.so | *.so.*) find_in "$1" "${LIB_DIRS[@]}" ;;
    *) find_in "lib$1.so" "${LIB_DIRS[@]}" || find_in "lib$1.a" "${LIB_DIRS[@]}" ;;
  esac
}
while IFS=$'\t' read -r kind f args; do
  read -r -a a <<<"$args"
  names=() paths=() mode=names
  for ((i = 1; i < ${#a[@]}; i++)); do
    case "${a[$i]}" in
      NAMES) mode=names ;;
      PATHS | HINTS) mode=paths ;;
      [A-Z_]*[A-Z]) [[ "${a[$i]}" =~ ^[A-Z_]+$ ]] && mode=skip || { [ $mode = names ] && names+=("${a[$i]}"); } ;;
      *) case $mode in names) names+=("${a[$i]}") ;; paths) paths+=("${a[$i]}") ;; esac ;;
    esac
  done
  [ $mode = skip ] && [ ${#names[@]} -eq 0 ] && continue
  # names built from a loop variable (lib${part}.a): the link commands of the dynamic pass see them
  [[ "${names[*]}" != *'$'* ]] || [ "$(printf '%s\n' "${names[@]}" | grep -vc '\$')" -gt 0 ] || continue
  found=""
  for n in "${names[@]}"; do
    case "$n" in *'$'*) continue ;; esac
    case "$kind" in
      program) found="$(PATH="$(printf '%s:' "${paths[@]}")$EXTRA_PATH$SYS_PATH" type -P -- "$n")" ;;
      library) found="$(find_lib "$n")" ;;
      path | file) found="$(find_in "$n" "${paths[@]}" "${INC_DIRS[@]}")" ;;
    esac
    [ -n "$found" ] && break
  done
  if [ -n "$found" ]; then
    use "$found" "find_$kind(${a[0]}) in $f"
  else
    missing "${a[0]}" "find_$kind(${a[0]}) in $f: none of '${names[*]}' found"
  fi
done < <(while read -r f; do
  tr '\n' ' ' <"$f" | grep -oE 'find_(program|library|path|file)\([^)]*\)' |
    sed -E "s|^find_([a-z]+)\(([^)]*)\)|\1\t$f\t\2|"
done <"$TMP/cmake")

# ---- #include <...> -------------------------------------------------------------------------
xargs -d '\n' grep -oE '#[[:space:]]*include[[:space:]]*<[^>]+>' <"$TMP/csrc" |
  sed -E 's/^([^:]*):.*<([^>]+)>$/\2\t\1/' | sort -u -t $'\t' -k1,1 >"$TMP/includes"
while IFS=$'\t' read -r h src; do
  # a header the tree provides itself (the Objective-C runtime's stub the Metal compile check
  # uses): no package needed, even where one on this machine has the same name
  grep -qE "(^|/)${h//./\\.}$" "$TMP/tree" && continue
  hit=0
  for c in "${C_COMPILERS[@]}" "${CXX_COMPILERS[@]}"; do
    lang=c
    case " ${CXX_COMPILERS[*]} " in *" $c "*) lang="c++" ;; esac
    [ -f "$TMP/dirs.$lang.${c//\//_}" ] || cc_dirs $lang "$c" >"$TMP/dirs.$lang.${c//\//_}"
    mapfile -t dirs <"$TMP/dirs.$lang.${c//\//_}"
    if p="$(find_in "$h" "${dirs[@]}")"; then
      use "$p" "#include <$h> in $src (${c##*/})"
      hit=1
    fi
  done
  if [ $hit = 0 ] && ! grep -qE "(^|/)${h//./\\.}$" "$TMP/tree"; then
    missing "$h" "#include <$h> in $src: not found"
  fi
done <"$TMP/includes"

# ---- Python modules of the tests -----------------------------------------------------------
{
  grep -E '^tests/lit/.*\.py$' "$TMP/tree"
  while read -r py; do
    xargs -d '\n' grep -lF "$(basename "$py")" <"$TMP/cmake" >/dev/null && echo "$py"
  done < <(grep -E '\.py$' "$TMP/tree")
} | sort -u >"$TMP/py"
if [ -s "$TMP/py" ] && PY="$(resolve_cmd python3)"; then
  xargs -d '\n' grep -hoE '^[[:space:]]*(import|from)[[:space:]]+[A-Za-z_][A-Za-z0-9_]*' <"$TMP/py" |
    awk '{print $2}' | sort -u |
    # a module the tree holds itself (tests/lit/Inputs/onnx_wire.py) is not a package
    grep -vxFf <(grep -E '\.py$' "$TMP/tree" | sed -E 's|.*/||; s|\.py$||') >"$TMP/mods"
  # plus `python3 -c "import x"` in lit RUN lines
  xargs -d '\n' grep -hoE 'python3 -c .*import[[:space:]]+[A-Za-z_][A-Za-z0-9_, ]*' <"$TMP/lit" |
    sed -E 's/.*import[[:space:]]+//' | tr ', ' '\n\n' | grep -v '^$' >>"$TMP/mods"
  sort -u "$TMP/mods" | "$PY" -c '
import importlib.util, sys
for m in sys.stdin.read().split():
    try:
        s = importlib.util.find_spec(m)
    except Exception:
        s = None
    o = s.origin if s else None
    print(m + "\t" + (o if o and o not in ("built-in", "frozen") else ("" if s else "?")))
' | while IFS=$'\t' read -r m o; do
    if [ "$o" = "?" ]; then
      missing "$m" "python module '$m' (tests' Python files): not importable by $PY"
    elif [ -n "$o" ]; then
      use "$o" "python module '$m' imported by the tests"
    fi
  done
  use "$PY" "python3 runs the tests' Python files"
fi

# ---- dlopen'd libraries --------------------------------------------------------------------
ldconfig -p 2>/dev/null | awk -F' => ' '/=>/ {split($1, a, " "); print a[1] "\t" $2}' >"$TMP/ldcache"
xargs -d '\n' grep -ohE '"lib[A-Za-z0-9_+-]+\.so(\.[0-9]+)*"' <"$TMP/csrc" | tr -d '"' | sort -u |
  while read -r l; do
    p="$(awk -F'\t' -v l="$l" '$1 == l {print $2; exit}' "$TMP/ldcache")"
    if [ -n "$p" ]; then use "$p" "dlopen(\"$l\") in the sources"; else echo "$l"; fi
  done >"$TMP/nolib"
# a library found under one of its names is enough (libvulkan.so.1 or libvulkan.so)
while read -r l; do
  base="${l%%.so*}"
  grep -q "^$base\.so" <(cut -f1 "$TMP/ldcache") ||
    missing "$base" "dlopen(\"$l\") in the sources: not on this machine"
done <"$TMP/nolib"

# ---- sanitizer runtimes --------------------------------------------------------------------
xargs -d '\n' grep -ohE -- '-fsanitize=[a-z,-]+' <"$TMP/cmake" | sed 's/-fsanitize=//' | tr ',' '\n' |
  sort -u >"$TMP/sanitizers"
while read -r s; do
  case "$s" in
    address) gccrt=libasan.so clangrt=asan ;;
    undefined) gccrt=libubsan.so clangrt=ubsan_standalone ;;
    fuzzer) gccrt="" clangrt=fuzzer ;;
    *) continue ;; # fuzzer-no-link: instrumentation only
  esac
  if [ -n "$gccrt" ] && c="$(resolve_cmd gcc)"; then
    p="$("$c" -print-file-name="$gccrt")"
    if [ "${p#/}" != "$p" ] && [ -e "$p" ]; then use "$(realpath "$p")" "gcc -fsanitize=$s runtime"; else missing "$gccrt" "gcc: no $gccrt for -fsanitize=$s"; fi
  fi
  if c="$(resolve_cmd clang-16)"; then
    p="$("$c" -print-file-name="libclang_rt.$clangrt-x86_64.a")"
    if [ "${p#/}" != "$p" ] && [ -e "$p" ]; then
      use "$(realpath "$p")" "clang-16 -fsanitize=$s runtime"
    else
      missing "libclang_rt.$clangrt" "clang-16: no libclang_rt.$clangrt-x86_64.a for -fsanitize=$s"
    fi
  fi
done <"$TMP/sanitizers"

# ---- Vulkan ICDs and layers ----------------------------------------------------------------
json_lib() { # JSON WHY: the library a Vulkan ICD/layer manifest names
  local l
  l="$(grep -oE '"library_path"[[:space:]]*:[[:space:]]*"[^"]+"' "$1" | sed -E 's/.*"([^"]+)"$/\1/' | head -1)"
  [ -z "$l" ] && return
  case "$l" in
    /*) [ -e "$l" ] && use "$l" "$2" ;;
    */*) [ -e "$(dirname "$1")/$l" ] && use "$(realpath "$(dirname "$1")/$l")" "$2" ;;
    *) p="$(awk -F'\t' -v l="$l" '$1 == l {print $2; exit}' "$TMP/ldcache")"
       [ -n "$p" ] && use "$p" "$2" || missing "$l" "$1 names $l: not found" ;;
  esac
}
while IFS=$'\t' read -r p _; do
  case "$p" in *.json) json_lib "$p" "library of $p" ;; esac
done < <(cat "$TMP/files")
xargs -d '\n' grep -ohE '"VK_LAYER_[A-Za-z0-9_]+"' <"$TMP/csrc" | tr -d '"' | sort -u | while read -r layer; do
  hit=0
  for j in /usr/share/vulkan/*layer.d/*.json /etc/vulkan/*layer.d/*.json; do
    [ -f "$j" ] && grep -q "\"name\"[[:space:]]*:[[:space:]]*\"$layer\"" "$j" || continue
    use "$j" "Vulkan layer $layer (named in the sources)"
    json_lib "$j" "library of Vulkan layer $layer"
    hit=1
  done
  [ $hit = 1 ] || missing "$layer" "Vulkan layer $layer (named in the sources): no manifest on this machine"
done

# ---- dynamic pass: what the builds actually used -------------------------------------------
DIRS=("$@")
if [ ${#DIRS[@]} -eq 0 ]; then
  for d in build build-asan; do [ -f "$d/CMakeCache.txt" ] && DIRS+=("$d"); done
fi
for b in "${DIRS[@]}"; do
  if [ ! -f "$b/CMakeCache.txt" ]; then
    note "$b: not a configured build directory; skipped"
    continue
  fi
  # the files the project's find_* calls found, the compilers, make and cmake (not the other
  # CMAKE_* tools: CMake records every one it can find; those it runs are in link.txt below)
  sed -nE 's/^([A-Za-z0-9_]+):(FILEPATH|PATH|STRING|INTERNAL)=(\/.*)$/\1\t\3/p' "$b/CMakeCache.txt" |
    grep -E '^(CMAKE_(C|CXX)_COMPILER|CMAKE_MAKE_PROGRAM|CMAKE_COMMAND|CMAKE_CTEST_COMMAND|[^C][A-Z0-9_]*|C[^M][A-Z0-9_]*)\s' |
    while IFS=$'\t' read -r var p; do
      [ -f "$p" ] && use "$(realpath -s "$p")" "$b/CMakeCache.txt: $var"
    done
  # headers the compilers read
  find "$b" -path '*/CMakeFiles/*' -name '*.o.d' -print0 | xargs -0 -r cat |
    tr ' \\' '\n\n' | sed 's/:$//' | grep '^/' | sort -u | while read -r p; do
      use "$(realpath -s "$p")" "a header compiled in $b (depfiles)"
    done
  # what the link commands name
  find "$b" -path '*/CMakeFiles/*' -name link.txt -print0 | xargs -0 -r cat | tr ' ' '\n' |
    sort -u | while read -r t; do
      case "$t" in
        -l*) p="$(find_lib "${t#-l}")" && use "$p" "$t in $b's link commands" ;;
        /*.a | /*.so | /*.so.*) [ -e "$t" ] && use "$t" "linked in $b" ;;
        /*) [ -x "$t" ] && [ -f "$t" ] && use "$t" "link driver in $b" ;;
      esac
    done
  # shared libraries the built programs and kernels load: their DT_NEEDED entries (one readelf
  # for many files; not ELF files are skipped by it), found through the ldconfig cache; not the
  # tests' virtual environments (build/venv-*: PyPI wheels such as numpy's, their own libraries)
  find "$b" -path "$b/venv-*" -prune -o -type f \( -perm -u+x -o -name '*.so' \) -size +1k -print0 |
    xargs -0 -r readelf -d 2>/dev/null | sed -nE 's/.*\(NEEDED\).*\[(.*)\]$/\1/p' | sort -u |
    while read -r l; do
      p="$(awk -F'\t' -v l="$l" '$1 == l {print $2; exit}' "$TMP/ldcache")"
      if [ -n "$p" ]; then use "$p" "loaded by programs built in $b (DT_NEEDED $l)"; else missing "$l" "$b: $l, needed by a built program, not in the ldconfig cache"; fi
    done
done

# ---- files -> packages -----------------------------------------------------------------------
# not packages: the tree, the build directories, /usr/local (the image's CUDA toolkit)
awk -F'\t' -v root="$ROOT/" '
  index($1, root) == 1 || $1 ~ /^\/usr\/local\// || $1 ~ /^\/(tmp|proc|dev|sys)\// { next }
  !seen[$1]++ { print }' "$TMP/files" >"$TMP/used"
# each file under its own name, then its merged-/usr twin (/lib <-> /usr/lib), its realpath and
# that one's twin; the first of these that a package owns names the file's package (so
# /usr/bin/clang-format is clang-format's, not clang-format-14's); one dpkg -S for all
cut -f1 "$TMP/used" | while read -r p; do
  r="$(realpath "$p" 2>/dev/null || echo "$p")"
  n=0
  for q in "$p" "$r"; do
    printf '%s\t%d\t%s\n' "$p" $((n++)) "$q"
    case "$q" in
      /usr/lib/* | /usr/bin/* | /usr/sbin/*) printf '%s\t%d\t%s\n' "$p" $((n++)) "${q#/usr}" ;;
      /lib/* | /lib64/* | /bin/* | /sbin/*) printf '%s\t%d\t%s\n' "$p" $((n++)) "/usr$q" ;;
    esac
  done
done >"$TMP/aliases"
cut -f3 "$TMP/aliases" | sort -u | xargs -d '\n' -r dpkg -S 2>/dev/null |
  grep -v '^diversion ' | sed -E 's/^(.*): (\/.*)$/\2\t\1/' >"$TMP/owners"
# file -> its packages
awk -F'\t' 'NR == FNR { own[$1] = own[$1] ? own[$1] ", " $2 : $2; next }
  ($3 in own) && (!($1 in best) || $2 < best[$1]) { best[$1] = $2; pk[$1] = own[$3] }
  END { for (f in pk) print f "\t" pk[f] }' "$TMP/owners" "$TMP/aliases" |
  awk -F'\t' '{ n = split($2, a, ", "); for (i = 1; i <= n; i++) { sub(/:.*/, "", a[i]); print $1 "\t" a[i] } }' |
  sort -u >"$TMP/file-pkg"
cut -f1 "$TMP/file-pkg" | sort -u >"$TMP/owned"
cut -f1 "$TMP/used" | sort -u | comm -23 - "$TMP/owned" | while read -r p; do
  note "$p: in no Debian package ($(awk -F'\t' -v p="$p" '$1 == p {print $2; exit}' "$TMP/used"))"
done

# ---- what deps.sh names: its list, their Depends/Pre-Depends closure, Essential packages -------
dpkg-query -W -f='${Package}\t${Status}\t${Essential}\t${Provides}\t${Depends}, ${Pre-Depends}\n' 2>/dev/null |
  awk -F'\t' '$2 ~ / installed$/' >"$TMP/installed"
printf '%s\n' "${PACKAGES[@]}" >"$TMP/listed"
awk -F'\t' '
  function strip(s) { gsub(/\([^)]*\)|\[[^]]*\]|<[^>]*>/, "", s); gsub(/[ \t]/, "", s); sub(/:.*/, "", s); return s }
  FILENAME == ARGV[1] {
    inst[$1] = 1; deps[$1] = $5
    if ($3 == "yes") named[$1] = "Essential"
    n = split($4, pv, ","); for (i = 1; i <= n; i++) { v = strip(pv[i]); if (v != "") prov[v] = prov[v] " " $1 }
    next
  }
  { named[$1] = "listed"; queue[++q] = $1 }
  END {
    for (h = 1; h <= q; h++) {
      p = queue[h]; n = split(deps[p], d, ",")
      for (i = 1; i <= n; i++) {
        m = split(d[i], alt, "|")
        for (j = 1; j <= m; j++) {
          a = strip(alt[j]); if (a == "") continue
          cand = (a in inst) ? a : ""
          if (a in prov) cand = cand prov[a]
          k = split(cand, c, " ")
          for (l = 1; l <= k; l++) if (c[l] != "" && !(c[l] in named)) { named[c[l]] = "via " p; queue[++q] = c[l] }
        }
      }
    }
    for (p in named) print p "\t" named[p]
  }' "$TMP/installed" "$TMP/listed" | sort >"$TMP/named"

status=0
while read -r p; do
  grep -q "^$p	" "$TMP/installed" || { echo "deps.sh --check: $p is in deps.sh's list but not installed (run bash scripts/deps.sh)"; status=1; }
done <"$TMP/listed"
# a file is covered when any package that owns it is named
awk -F'\t' 'NR == FNR { named[$1] = 1; next } { all[$1] = all[$1] " " $2; if ($2 in named) ok[$1] = 1 }
  END { for (f in all) if (!(f in ok)) print f "\t" substr(all[f], 2) }' "$TMP/named" "$TMP/file-pkg" |
  sort -t $'\t' -k2,2 -k1,1 >"$TMP/missing"
if [ -s "$TMP/unresolved" ]; then
  status=1
  echo "deps.sh --check: used by the tree but not on this machine (a package deps.sh should name,"
  echo "  or, when no Debian package has it, an entry of deps.sh's OPTIONAL list):"
  sort -u "$TMP/unresolved" | sed 's/^/  /'
fi
if [ -s "$TMP/missing" ]; then
  status=1
  echo "deps.sh --check: packages the build and tests use that scripts/deps.sh does not name:"
  awk -F'\t' 'NR == FNR { if (!($1 in why)) why[$1] = $2; next }
    { if ($2 in shown) { more[$2]++; next } shown[$2] = 1; order[++n] = $2; file[$2] = $1 }
    END { for (i = 1; i <= n; i++) { p = order[i]
      printf "  %-28s %s: %s%s\n", p, file[p], why[file[p]], more[p] ? " (and " more[p] " more files)" : "" } }' \
    "$TMP/used" "$TMP/missing"
fi
if [ -s "$TMP/notes" ] && { [ $status -ne 0 ] || [ -n "${DEPS_CHECK_VERBOSE:-}" ]; }; then
  echo "deps.sh --check: notes (not failures):"
  sort -u "$TMP/notes" | sed 's/^/  /'
fi
if [ -n "${DEPS_CHECK_VERBOSE:-}" ]; then
  echo "deps.sh --check: packages used (files), and why each counts as named:"
  cut -f2 "$TMP/file-pkg" | sort | uniq -c | while read -r n p; do
    printf '  %-32s %4d  %s\n' "$p" "$n" "$(awk -F'\t' -v p="$p" '$1 == p {print $2}' "$TMP/named")"
  done
fi
if [ $status -eq 0 ]; then
  echo "deps.sh --check: OK ($(wc -l <"$TMP/owned") files from $(cut -f2 "$TMP/file-pkg" | sort -u | wc -l) packages, all named by deps.sh${DIRS[*]:+; builds: ${DIRS[*]}}; $(sort -u "$TMP/notes" | wc -l) notes, DEPS_CHECK_VERBOSE=1 shows them)"
fi
exit $status
