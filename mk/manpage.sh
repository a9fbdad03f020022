#!/bin/sh
# manpage.sh - one manual page: its hand-written template with every "@OPTIONS [ARG]...@" line replaced by the program's own option table (PROG [ARG]... --help-man, common/opts.c), and @VERSION@, @DATE@, @SYSCONFDIR@ and @SBINDIR@ filled in.
# Usage: [SYSCONFDIR=/etc] [SBINDIR=/usr/local/sbin] mk/manpage.sh PROG TEMPLATE VERSION > PAGE
#   (DATE: $SOURCE_DATE_EPOCH, else the template's mtime).  A page left with any other @WORD@ outside a comment is an error.
set -eu
prog=$1 in=$2 version=$3
date=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(stat -c %Y "$in")}" +%Y-%m-%d)
awk -v prog="$prog" -v version="$version" -v date="$date" \
    -v sysconfdir="${SYSCONFDIR:-/etc}" -v sbindir="${SBINDIR:-/usr/local/sbin}" '
/^@OPTIONS.*@$/ {
    fflush()
    if (system(prog substr($0, 9, length($0) - 9) " --help-man") != 0) exit 1
    next
}
{
    gsub(/@VERSION@/, version); gsub(/@DATE@/, date)
    gsub(/@SYSCONFDIR@/, sysconfdir); gsub(/@SBINDIR@/, sbindir)
    if ($0 !~ /^\.\\"/ && match($0, /@[A-Z]+@/)) {
        print FILENAME ":" FNR ": " substr($0, RSTART, RLENGTH) " is not substituted" > "/dev/stderr"
        exit 1
    }
    print
}' "$in"
