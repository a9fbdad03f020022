#!/bin/sh
# it_install.sh - make install DESTDIR=... puts every program, man page, unit, doc and example (the alert rules and the Grafana dashboard too) where it belongs; the man pages lint clean; the units verify (when systemd-analyze exists); the shipped env files pass --check as shipped and in their keyed form (keys from $CREDENTIALS_DIRECTORY); the installed daemons send READY=1 and STOPPING=1 (when built with libsystemd); debian/changelog and NEWS carry the programs' version; make uninstall removes it all.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_install
cd "$(dirname "$0")/../.." || exit 1
O=${O:-build}
D=$T/dest
P=$D/usr/local
# The build's own make, without the jobserver of a make check that runs this.
mk() { env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s -f mk/build.mk O="$O" BIN="$BIN" "$@"; }

mk install DESTDIR="$D" >"$T/install.log" 2>&1; rc=$?
check "make install DESTDIR exits 0 (rc $rc)" '[ $rc -eq 0 ]'
for f in sbin/bqos-controller sbin/bqos-node bin/bqos-ctl bin/bqos-load bin/bqos-mcload \
         bin/bqos-nbd-load bin/bqos-sim bin/bqos-pshift; do
  check "installs $f, executable" '[ -f "$P/$f" ] && [ -x "$P/$f" ]'
done
check "bqos-nbd-node is a symlink to bqos-node" '[ -L "$P/sbin/bqos-nbd-node" ] && [ "$(readlink "$P/sbin/bqos-nbd-node")" = bqos-node ]'
check "the installed bqos-nbd-node is a block node (argv[0])" \
  '"$P/sbin/bqos-nbd-node" --help | grep -q "^    bqos-nbd-node - bucket-QoS block storage node"'
check "no bench or test program is installed" '! ls "$P/bin" "$P/sbin" | grep -q "bench\|prof\|test_"'

MANS="man8/bqos-controller.8 man8/bqos-node.8 man8/bqos-nbd-node.8 man1/bqos-ctl.1 man1/bqos-load.1
      man1/bqos-mcload.1 man1/bqos-nbd-load.1 man1/bqos-sim.1 man1/bqos-pshift.1"
for m in $MANS; do
  f=$P/share/man/$m
  check "installs $m" '[ -f "$f" ]'
  for s in NAME SYNOPSIS OPTIONS SIGNALS FILES "EXIT STATUS" EXAMPLES; do
    grep -q "^\.SH \"*$s\"*\$" "$f" 2>/dev/null || not_ok "$m has no $s section"
  done
  # OPTIONS comes from the program's own table (--help-man), --help included.
  check "$m lists --help from the program's option table" 'grep -qF "\\fB\\-\\-help\\fR" "$f"'
  LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$f" >/dev/null 2>"$T/lint"
  check "$m is lint-clean under man --warnings" '[ ! -s "$T/lint" ] || { cat "$T/lint"; false; }'
done
check "every option of bqos-controller's --help is in its page" \
  'for o in $("$P/sbin/bqos-controller" --help | sed -n "s/^    --\([a-z-]*\).*/\1/p"); do
     grep -q "^\\\\fB\\\\-\\\\-$(echo "$o" | sed "s/-/\\\\\\\\-/g")\\\\fR" "$P/share/man/man8/bqos-controller.8" || { echo "missing --$o"; exit 1; }
   done'

U=$P/lib/systemd/system
for u in bqos-controller.service bqos-node@.service; do
  check "installs unit $u" '[ -f "$U/$u" ] && grep -q "^Type=notify$" "$U/$u"'
done
check "systemctl reload sends SIGHUP to both" \
  'grep -q "^ExecReload=/bin/kill -HUP \$MAINPID$" "$U/bqos-controller.service" &&
   grep -q "^ExecReload=/bin/kill -HUP \$MAINPID$" "$U/bqos-node@.service"'
check "units start the installed daemons" \
  'grep -q "^ExecStart=/usr/local/sbin/bqos-controller " "$U/bqos-controller.service" &&
   grep -q "^ExecStart=/usr/local/sbin/bqos-node --name %i " "$U/bqos-node@.service"'
for e in buckets.json controller.env node-mc1.env node-blk1.env; do
  check "installs example $e" '[ -f "$P/share/doc/bqos/examples/$e" ]'
done
for d in README.md LICENSE operations.md security.md; do
  check "installs doc $d" '[ -f "$P/share/doc/bqos/$d" ]'
done
for e in prometheus/bqos-alerts.yml prometheus/bqos-alerts.test.yml grafana/bqos-dashboard.json; do
  check "installs example $e" '[ -f "$P/share/doc/bqos/examples/$e" ]'
done

# The shipped settings pass --check as the units run them (ExecStart's arguments: the env file's
# variable, a node's --name %i), their paths moved into $T: as shipped (loopback, no keys), and
# in their keyed form (the commented line, uncommented as docs/operations.md's Deployment guide
# does) with the secret keys from $CREDENTIALS_DIRECTORY as under LoadCredential=.
EX=$P/share/doc/bqos/examples
mkdir -p "$T/state" "$T/etc" "$T/cred" "$T/blk1"
cp "$EX/buckets.json" "$T/state/"
"$P/bin/bqos-ctl" keygen "$T/keys/controller" >/dev/null && "$P/bin/bqos-ctl" keygen "$T/keys/mc1" >/dev/null
cp "$T/keys/controller.key" "$T/keys/controller.pub" "$T/keys/mc1.key" "$T/cred/"
echo "node mc1 $(awk '/^public/ {print $2}' "$T/keys/mc1.pub")" >"$T/etc/authorized_keys"
envcheck() { # envcheck FILE VAR KEYED PROG [ARG]...: PROG --check ARG... $VAR from FILE; rc in $rc
  f=$1 var=$2 keyed=$3; shift 3
  sed "s|/var/lib/bqos/|$T/state/|g; s|/var/lib/bqos-node/blk1/|$T/blk1/|g; s|/etc/bqos/|$T/etc/|g" "$f" >"$T/env"
  [ "$keyed" = keyed ] && sed -i "s/^$var=/#&/; s/^#\($var=.*--curve-key\)/\1/" "$T/env"
  # shellcheck disable=SC1090
  args=$(. "$T/env"; eval echo "\"\$$var\"")
  # shellcheck disable=SC2086
  CREDENTIALS_DIRECTORY=$T/cred "$@" --check $args >"$T/envcheck.out" 2>&1; rc=$?
}
envcheck "$EX/controller.env" BQOS_CONTROLLER_ARGS plain "$P/sbin/bqos-controller"
check "the shipped controller.env passes --check (rc $rc)" '[ $rc -eq 0 ] || { cat "$T/envcheck.out"; false; }'
envcheck "$EX/controller.env" BQOS_CONTROLLER_ARGS keyed "$P/sbin/bqos-controller"
check "controller.env's keyed form (0.0.0.0, keys as credentials) passes --check (rc $rc)" \
  '[ $rc -eq 0 ] && grep -q "CURVE keys" "$T/envcheck.out" && grep -q "^BQOS_CONTROLLER_ARGS=.*0.0.0.0" "$T/env" || { cat "$T/envcheck.out"; false; }'
envcheck "$EX/node-mc1.env" BQOS_NODE_ARGS plain "$P/sbin/bqos-node" --name mc1
check "the shipped node-mc1.env passes --check (rc $rc)" '[ $rc -eq 0 ] || { cat "$T/envcheck.out"; false; }'
envcheck "$EX/node-mc1.env" BQOS_NODE_ARGS keyed "$P/sbin/bqos-node" --name mc1
check "node-mc1.env's keyed form passes --check (rc $rc)" \
  '[ $rc -eq 0 ] && grep -q "^BQOS_NODE_ARGS=.*--curve-key mc1.key" "$T/env" || { cat "$T/envcheck.out"; false; }'
envcheck "$EX/node-blk1.env" BQOS_NODE_ARGS plain "$P/sbin/bqos-node" --name blk1
check "the shipped node-blk1.env passes --check (rc $rc)" '[ $rc -eq 0 ] || { cat "$T/envcheck.out"; false; }'
rm -f "$T/cred/mc1.key"
envcheck "$EX/node-mc1.env" BQOS_NODE_ARGS keyed "$P/sbin/bqos-node" --name mc1
check "without its credential the keyed node fails --check, naming the path (rc $rc)" \
  '[ $rc -eq 1 ] && grep -q "$T/cred/mc1.key: cannot open" "$T/envcheck.out"'
check "the man pages have no @WORD@ left outside comments" \
  '! grep -h "@[A-Z]*@" "$P"/share/man/man*/* | grep -v "^\.\\\\\"" | grep .'
check "the units show the LoadCredential= drop-in" \
  'grep -q "^#   LoadCredential=controller.key:/etc/bqos/keys/controller.key$" "$U/bqos-controller.service" &&
   grep -q "^#   LoadCredential=%i.key:/etc/bqos/keys/%i.key$" "$U/bqos-node@.service"'

# systemd-analyze verify wants the programs and pages where the units say:
# verify copies whose paths point into DESTDIR.
if command -v systemd-analyze >/dev/null 2>&1; then
  mkdir -p "$T/units" "$D/etc/bqos"
  cp "$P/share/doc/bqos/examples/"*.env "$D/etc/bqos/"
  for u in "$U"/*; do
    sed "s|/usr/local/|$P/|g; s|/etc/bqos/|$D/etc/bqos/|g" "$u" >"$T/units/$(basename "$u")"
  done
  mv "$T/units/bqos-node@.service" "$T/units/bqos-node@mc1.service"
  # and the keys drop-ins the units' comments show (docs/operations.md, "The same under systemd")
  for u in bqos-controller.service:bqos-controller.service bqos-node@.service:bqos-node@mc1.service; do
    mkdir -p "$T/units/${u%%:*}.d"
    { echo "[Service]"; sed -n "s|^#   \(LoadCredential=.*\)|\1|p" "$T/units/${u#*:}"; } \
      >"$T/units/${u%%:*}.d/keys.conf"
  done
  check "the keys drop-ins have their LoadCredential= lines" \
    '[ "$(grep -c ^LoadCredential= "$T/units/bqos-controller.service.d/keys.conf")" -eq 1 ] &&
     [ "$(grep -c ^LoadCredential= "$T/units/bqos-node@.service.d/keys.conf")" -eq 2 ]'
  MANPATH="$P/share/man:" systemd-analyze verify "$T/units/bqos-controller.service" \
    "$T/units/bqos-node@mc1.service" >"$T/verify" 2>&1; rc=$?
  check "systemd-analyze verify, with the keys drop-ins: clean (rc $rc)" '[ $rc -eq 0 ] && [ ! -s "$T/verify" ] || { cat "$T/verify"; false; }'
else
  echo "ok - # SKIP systemd-analyze verify: systemd-analyze is not installed"
fi

# notified WHAT PORT CMD...: runs CMD, a daemon that listens on PORT, as
# under Type=notify (NOTIFY_SOCKET: a datagram socket whose messages go to
# $T/WHAT.notify); checks READY=1 arrives and it then listens, STOPPING=1
# on SIGTERM, exit 0.
notified() {
  what=$1; port=$2; shift 2
  spawn "$T/$what.notify" python3 -u -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
while True:
    print(s.recv(4096).decode().replace("\n", " "))' "$T/$what.sock"
  wait_for '[ -S "$T/$what.sock" ]' 5
  spawn "$T/$what.log" env NOTIFY_SOCKET="$T/$what.sock" "$@"
  pid=$SPAWNED
  check "$what sends READY=1" 'wait_for "grep -qx READY=1 \"$T/$what.notify\"" 10'
  check "$what listens by then" 'ss -Hltn "sport = :$port" | grep -q .'
  kill -TERM "$pid"
  check "$what sends STOPPING=1 on SIGTERM" 'wait_for "grep -qx STOPPING=1 \"$T/$what.notify\"" 10'
  wait "$pid"; rc=$?
  check "$what exits 0 (rc $rc)" '[ $rc -eq 0 ]'
}

# sd_notify: each installed daemon tells the service manager it is ready and
# stopping (the controller on the example bucket file).
if grep -q HAVE_SYSTEMD "$O/features" 2>/dev/null; then
  next_port; lp=$PORT; next_port; ap=$PORT; next_port; np=$PORT
  notified controller "$lp" "$P/sbin/bqos-controller" --buckets "$P/share/doc/bqos/examples/buckets.json" \
    --listen "tcp://127.0.0.1:$lp" --admin "tcp://127.0.0.1:$ap"
  notified node "$np" "$P/sbin/bqos-node" --name n1 --memcached-listen "127.0.0.1:$np"
else
  echo "ok - # SKIP sd_notify: built without libsystemd"
fi

# One version for a release: the programs', debian/changelog's top entry and NEWS's newest
# (make deb checks the same before it builds; the release tag is v followed by it).
v=$("$P/sbin/bqos-controller" --version | sed -n 's/^bqos-controller //p')
check "debian/changelog's version is the programs' ($v)" \
  '[ "$(sed -n "1s/^bqos (\([^)]*\)).*/\1/p" debian/changelog)" = "$v" ]'
check "NEWS's newest entry is the programs' version ($v)" \
  '[ "$(sed -n "s/^bqos \([0-9][0-9.]*\) .*/\1/p" NEWS | head -n 1)" = "$v" ]'

mk uninstall DESTDIR="$D" >"$T/uninstall.log" 2>&1; rc=$?
check "make uninstall exits 0 (rc $rc)" '[ $rc -eq 0 ]'
rm -rf "$D/etc"
check "make uninstall removes every installed file" '[ -z "$(find "$D" ! -type d)" ] || { find "$D" ! -type d; false; }'
check "make uninstall removes share/doc/bqos" '[ ! -e "$P/share/doc/bqos" ]'

it_end 'cat "$T/install.log" "$T/uninstall.log"; cat "$T"/*.log 2>/dev/null | tail -20'
