#!/bin/sh
# manpage.sh - one manual page: its hand-written template with every "@OPTIONS [ARG]...@" line replaced by the program's own option table (PROG [ARG]... --help-man, common/opts.c), and @VERSION@ and @DATE@ filled in.
# Usage: mk/manpage.sh PROG TEMPLATE VERSION > PAGE   (DATE: $SOURCE_DATE_EPOCH, else the template's mtime)
set -eu
prog=$1 in=$2 version=$3
date=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(stat -c %Y "$in")}" +%Y-%m-%d)
awk -v prog="$prog" -v version="$version" -v date="$date" '
/^@OPTIONS.*@$/ {
    fflush()
    if (system(prog substr($0, 9, length($0) - 9) " --help-man") != 0) exit 1
    next
}
{ gsub(/@VERSION@/, version); gsub(/@DATE@/, date); print }' "$in"
