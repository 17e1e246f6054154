#!/bin/sh
# check_help.sh TOOLS_DIR TMP README RELAXC...: for every command that `relaxc --help` lists,
# - `relaxc CMD --help` and `relaxc help CMD` exit 0 and print the same text, starting with the
#   command's usage line;
# - the options its --help lists are exactly the options its source handles (the strings that
#   tools/cmd_CMD.c compares an option with: strcmp(f, "--target")), so neither can drift;
# - the parser accepts each of them (no "unknown option");
# - README's "Command line" section has a row for the command and names each of its options.
# Prints each difference; exit status 1 if any.
set -u
# RELAXC is the rest of the arguments: in a sanitized build it is an `env ... relaxc` prefix
tools=$1 tmp=$2 readme=$3
shift 3
status=0
sed -n '/^## Command line/,/^## [^C]/p' "$readme" > "$tmp.readme"
cmds=$("$@" --help | sed -n 's/^  relaxc \([a-z]*\).*/\1/p')
if [ -z "$cmds" ]; then echo "relaxc --help lists no commands"; exit 1; fi
for c in $cmds; do
  "$@" "$c" --help > "$tmp.a" || { echo "relaxc $c --help: exit status $?"; status=1; }
  "$@" help "$c" > "$tmp.b" || { echo "relaxc help $c: exit status $?"; status=1; }
  cmp -s "$tmp.a" "$tmp.b" || { echo "$c: 'relaxc $c --help' and 'relaxc help $c' differ"; status=1; }
  head -1 "$tmp.a" | grep -q "^usage: relaxc $c" || { echo "$c: --help has no usage line"; status=1; }
  src=$tools/cmd_$c.c
  [ -f "$src" ] || src=/dev/null # check, print, ops and help (tools/relaxc.c) take no options
  code=$(grep -o 'strcmp([a-z.]*, "--*[a-z][-a-z]*")' "$src" | sed 's/.*"\(-[-a-z]*\)")/\1/' | sort -u | tr '\n' ' ')
  helped=$(sed -n 's/^  \(-[a-z], \)\{0,1\}\(--*[a-z][-a-z]*\).*/\2/p' "$tmp.a" |
           grep -v -x -e --help -e --version | sort -u | tr '\n' ' ')
  if [ "$code" != "$helped" ]; then
    echo "$c: options handled in $src: [$code]; listed by --help: [$helped]"
    status=1
  fi
  grep -q "^| \`relaxc $c" "$tmp.readme" || { echo "$c: no row in README's Command line table"; status=1; }
  for f in $helped; do
    grep -q -e "\`$f[ \`=]" -e "\[$f[] ]" -e "|$f " "$tmp.readme" ||
      { echo "$c: README's Command line section does not name $f"; status=1; }
    if "$@" "$c" "$f" 2>&1 | grep -q "unknown option"; then
      echo "$c: --help lists $f, which the parser does not accept"
      status=1
    fi
  done
  echo "$c: [$helped]"
done
exit $status
