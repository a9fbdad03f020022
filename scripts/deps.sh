#!/bin/sh
# deps.sh - install the Debian packages bqos needs, only those that are missing.
#
# Usage: scripts/deps.sh [GROUP]...   GROUP: build (default), test, bench, demo, sanitize, deb.
#   build  what the programs need to compile and link (make, make install)
#   test   make check: the Check suites and what the integration tests run
#   bench  make bench and the paper's experiments (examples/exp*.sh)
#   demo   make demo and make demo-ha
#   deb    make deb: dpkg-buildpackage, debhelper, lintian, hardening-check (with build)
#
# The table below lists each group's packages under a "[group]" line; each
# package line is "probe-kind probe package": a probe is a pkg-config module
# (pc), a command on PATH (cmd), a file (file) or a module of Debian's
# python3 (py: /usr/bin/python3 can import it).  A package is installed only
# when its probe fails; nothing is done when all pass.  A package several
# groups need is listed in each.
set -eu

table='
[build]
cmd  cc                 gcc
file /usr/include/stdio.h libc6-dev
cmd  pkg-config         pkg-config
pc   libzmq             libzmq3-dev
pc   jansson            libjansson-dev
pc   libmemcached       libmemcached-dev
pc   libevent_pthreads  libevent-dev
pc   libcurl            libcurl4-gnutls-dev
pc   gnutls             libgnutls28-dev
pc   libsystemd         libsystemd-dev
pc   liburing           liburing-dev
[test]
pc   check              check
pc   igraph             libigraph-dev
file /usr/include/subunit/child.h libsubunit-dev
cmd  memcached          memcached
cmd  memccapable        libmemcached-tools
cmd  ss                 iproute2
cmd  python3            python3
cmd  fio                fio
cmd  nbdinfo            libnbd-bin
cmd  certtool           gnutls-bin
cmd  etcd               etcd-server
cmd  man                man-db
py   zmq                python3-zmq
py   prometheus_client  python3-prometheus-client
py   yaml               python3-yaml
py   pymemcache         python3-pymemcache
cmd  promtool           prometheus
[bench]
pc   igraph             libigraph-dev
cmd  memcached          memcached
cmd  memcaslap          libmemcached-tools
cmd  nutcracker         nutcracker
cmd  gnuplot            gnuplot-nox
cmd  ss                 iproute2
cmd  python3            python3
cmd  fio                fio
cmd  nbdkit             nbdkit
cmd  nbdinfo            libnbd-bin
cmd  certtool           gnutls-bin
cmd  etcd               etcd-server
[sanitize]
cmd  clang              clang
file /usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a libclang-rt-14-dev
file /usr/lib/llvm-14/lib/libarcher.so libomp-14-dev
[deb]
file /usr/share/build-essential/list build-essential
cmd  dpkg-buildpackage  dpkg-dev
cmd  dh                 debhelper
cmd  fakeroot           fakeroot
cmd  lintian            lintian
cmd  hardening-check    devscripts
[demo]
cmd  memcached          memcached
cmd  ss                 iproute2
cmd  python3            python3
cmd  etcd               etcd-server
'

groups="${*:-build}"
for g in $groups; do
  case "$g" in
    build|test|bench|demo|sanitize|deb) ;;
    *) echo "deps: unknown group '$g' (build, test, bench, demo, sanitize or deb)" >&2; exit 2 ;;
  esac
done

missing=""
echo "$table" | {
  group=""
  while read -r kind probe pkg; do
    case "${kind:-}" in
      "") continue ;;
      \[*\]) group=${kind#[}; group=${group%]}; continue ;;
    esac
    case " $groups " in *" $group "*) ;; *) continue ;; esac
    case " $missing " in *" $pkg "*) continue ;; esac
    case "$kind" in
      pc)   command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "$probe" && continue ;;
      cmd)  command -v "$probe" >/dev/null 2>&1 && continue ;;
      file) [ -e "$probe" ] && continue ;;
      py)   /usr/bin/python3 -c "import $probe" 2>/dev/null && continue ;;
    esac
    missing="$missing $pkg"
  done
  [ -z "$missing" ] && exit 0
  echo "deps: installing missing Debian packages ($groups):$missing"
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
