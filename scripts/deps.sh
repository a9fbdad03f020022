#!/bin/sh
# deps.sh - install the Debian packages bqos needs, only those that are missing.
#
# Each line of the table below is "probe-kind probe package": a probe is a
# pkg-config module (pc), a command on PATH (cmd), a file (file) or a module
# of Debian's python3 (py: /usr/bin/python3 can import it).  A package
# is installed only when its probe fails; nothing is done when all pass.
set -eu

table='
pc   libzmq             libzmq3-dev
pc   jansson            libjansson-dev
pc   libmemcached       libmemcached-dev
pc   libevent_pthreads  libevent-dev
pc   check              check
pc   igraph             libigraph-dev
pc   libcurl            libcurl4-gnutls-dev
file /usr/include/subunit/child.h libsubunit-dev
cmd  pkg-config         pkg-config
cmd  memcached          memcached
cmd  memccapable        libmemcached-tools
cmd  memcaslap          libmemcached-tools
cmd  nutcracker         nutcracker
cmd  gnuplot            gnuplot-nox
cmd  ss                 iproute2
cmd  python3            python3
cmd  fio                fio
cmd  nbdkit             nbdkit
cmd  nbdinfo            libnbd-bin
cmd  etcd               etcd-server
py   zmq                python3-zmq
'

missing=""
echo "$table" | {
  while read -r kind probe pkg; do
    [ -n "${kind:-}" ] || continue
    case "$kind" in
      pc)   command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "$probe" && continue ;;
      cmd)  command -v "$probe" >/dev/null 2>&1 && continue ;;
      file) [ -e "$probe" ] && continue ;;
      py)   /usr/bin/python3 -c "import $probe" 2>/dev/null && continue ;;
    esac
    missing="$missing $pkg"
  done
  [ -z "$missing" ] && exit 0
  echo "deps: installing missing Debian packages:$missing"
  if [ "$(id -u)" != 0 ]; then
    echo "deps: not root; run as root: apt-get install -y$missing" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing
  echo "deps: installed:$missing"
}
