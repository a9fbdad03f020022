#!/bin/sh
# it_node_tls.sh - the memcached front on a TLS port (--tls-cert/--tls-key, memcached's -Z) in front of a real memcached: python3 ssl and openssl s_client doing set/get through the node (the values land in the real memcached); client certificates under --tls-verify request and require (a client without one, or with one the CA did not sign, refused under require; the certificate's CN logged as the connection's identity); a plaintext client on the TLS port closed unanswered; --auth-file logins over TLS; a handshake trickled byte by byte closed by --idle-timeout; a PSK client (openssl s_client -psk) and its identity; bad TLS option sets refused at start and by --check.
# Certificates are made here with certtool (gnutls-bin); skipped (exit 0 with a note) without certtool or python3.
set -u
NAME=it_node_tls
. "$(dirname "$0")/node_lib.sh"
for t in certtool python3; do
  command -v $t >/dev/null 2>&1 || { echo "$NAME: $t not installed (scripts/deps.sh); skipped"; exit 0; }
done
pki=$tmp/pki
mkdir -p "$pki"
(
  cd "$pki" && umask 077
  printf 'cn = it CA\nca\ncert_signing_key\nexpiration_days = 2\n' >ca.tmpl
  printf 'cn = localhost\nip_address = 127.0.0.1\ndns_name = localhost\ntls_www_server\nexpiration_days = 2\n' >server.tmpl
  printf 'cn = alice\ntls_www_client\nexpiration_days = 2\n' >alice.tmpl
  printf 'cn = mallory\ntls_www_client\nexpiration_days = 2\n' >mallory.tmpl
  for n in ca server alice mallory; do certtool -p --key-type ecdsa --outfile $n.key 2>/dev/null; done
  certtool -s --load-privkey ca.key --template ca.tmpl --outfile ca.pem 2>/dev/null
  for n in server alice; do
    certtool -c --load-privkey $n.key --load-ca-certificate ca.pem --load-ca-privkey ca.key \
      --template $n.tmpl --outfile $n.pem 2>/dev/null
  done
  certtool -s --load-privkey mallory.key --template mallory.tmpl --outfile mallory.pem 2>/dev/null
)
[ -s "$pki/alice.pem" ] || { echo "$NAME: certtool made no certificates"; exit 1; }
SRV="--tls-cert $pki/server.pem --tls-key $pki/server.key"

# tls_client PORT CERT REQUEST: one TLS connection (CERT "-": none; the
# server checked against the CA), REQUEST (\r \n escapes) and then
# "version" sent, the replies before VERSION printed as a bytes literal
# (with "<EOF>" if the node closed first, "<RESET>" on a TLS error or reset,
# after 2 s of silence as they are); "<HANDSHAKE FAILED...>" if it did.
tls_client() {
  python3 - "$pki" "$@" <<'PY'
import socket, ssl, sys
pki, port, cert, req = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
ctx = ssl.create_default_context(cafile=pki + "/ca.pem")
if cert != "-":
    ctx.load_cert_chain(pki + "/" + cert + ".pem", pki + "/" + cert + ".key")
raw = socket.create_connection(("127.0.0.1", port), 5)
out = b""
try:
    s = ctx.wrap_socket(raw, server_hostname="localhost")
except (ssl.SSLError, OSError) as e:
    print(repr(b"<HANDSHAKE FAILED>"))
    sys.exit(0)
try:
    s.sendall(req.encode().decode("unicode_escape").encode("latin1") + b"version\r\n")
    s.settimeout(2)
    while b"VERSION " not in out:
        b = s.recv(65536)
        if not b:
            out += b"<EOF>"
            break
        out += b
except socket.timeout:
    pass
except (ssl.SSLError, OSError):
    out += b"<RESET>"
i = out.find(b"VERSION ")
print(repr(out[:i] if i >= 0 else out))
PY
}

start_mc

# ---- 1. a TLS port, client certificates requested ---------------------------
start_node "$tmp/req.log" --policy rr $SRV --tls-ca "$pki/ca.pem" --tls-verify request --log-level debug
grep -q 'TLS port (client certificates requested)' "$tmp/req.log" && ok "the start-up line names the TLS port" ||
  bad "start-up line: $(grep 'memcached clients' "$tmp/req.log")"
got=$(tls_client "$NODE_PORT" - 'set t:1 0 0 5\r\nhello\r\nget t:1\r\n')
[ "$got" = "b'STORED\\r\\nVALUE t:1 0 5\\r\\nhello\\r\\nEND\\r\\n'" ] &&
  ok "python ssl without a certificate: set and get through the node" || bad "python ssl: got $got"
# what memcached itself holds for t:1 (plaintext, direct)
[ "$(mc_ask "$MC_PORT" 'get t:1\r\n')" = "VALUE t:1 0 5|hello|END|" ] &&
  ok "... the value is in the real memcached" || bad "memcached holds: $(mc_ask "$MC_PORT" 'get t:1\r\n')"
got=$(tls_client "$NODE_PORT" alice 'set t:2 0 0 3\r\nabc\r\nget t:2\r\n')
[ "$got" = "b'STORED\\r\\nVALUE t:2 0 3\\r\\nabc\\r\\nEND\\r\\n'" ] &&
  ok "python ssl with alice's certificate: set and get" || bad "with a certificate: got $got"
wait_for 'grep -q "TLS .*certificate alice" "$tmp/req.log"' 3 &&
  ok "the certificate's CN is the connection's identity (logged)" || bad "no 'certificate alice' in the log"
# A big value (several TLS records each way) and a pipelined burst, on one connection.
req=$(python3 -c 'print("set t:big 0 0 100000\\r\\n" + "x" * 100000 + "\\r\\nget t:big\\r\\n" + "".join("set p:%d 0 0 1\\r\\n%d\\r\\n" % (i, i % 10) for i in range(500)) + "get p:499\\r\\n", end="")')
tls_client "$NODE_PORT" - "$req" >"$tmp/burst.out"
[ "$(grep -o 'STORED' "$tmp/burst.out" | wc -l)" -eq 501 ] && grep -q 'VALUE p:499 0 1' "$tmp/burst.out" &&
  [ "$(grep -o x "$tmp/burst.out" | wc -l)" -ge 100000 ] &&
  ok "a 100000-byte value in and out, then 500 pipelined sets, over one TLS connection" ||
  bad "burst: $(head -c 200 "$tmp/burst.out")"
if command -v openssl >/dev/null 2>&1; then
  got=$(printf 'set o:1 0 0 2\r\nhi\r\nget o:1\r\nquit\r\n' |
    timeout 10 openssl s_client -connect "127.0.0.1:$NODE_PORT" -CAfile "$pki/ca.pem" -quiet -verify_return_error 2>/dev/null | tr -d '\r')
  [ "$got" = "$(printf 'STORED\nVALUE o:1 0 2\nhi\nEND')" ] && ok "openssl s_client: set and get" ||
    bad "openssl s_client: got $got"
fi
# A plaintext client on the TLS port: closed without a memcached reply.
got=$(exchange "$NODE_PORT" 'get t:1\r\n' 2>&1)
case $got in *VALUE*|*END*|*VERSION*) bad "a plaintext client was answered: $got" ;;
  *) ok "a plaintext client on the TLS port is closed unanswered" ;; esac
wait_for 'grep -q "TLS handshake failed" "$tmp/req.log"' 3 && ok "... logged as a failed handshake" ||
  bad "no failed handshake logged"
got=$(tls_client "$NODE_PORT" - 'stats\r\n')
case $got in *"STAT ssl_handshake_errors 1\\r\\n"*) ok "... counted in stats (ssl_handshake_errors, memcached's name)" ;;
  *) bad "stats: no ssl_handshake_errors 1: $(echo "$got" | grep -o 'ssl_handshake_errors [0-9]*')" ;; esac
stop_node

# ---- 2. client certificates required, logins, a trickled handshake ----------
printf 'alice:secret\n' >"$tmp/auth"
chmod 600 "$tmp/auth"
next_port; MPORT=$PORT
start_node "$tmp/reqd.log" --policy rr $SRV --tls-ca "$pki/ca.pem" --tls-verify require \
  --auth-file "$tmp/auth" --idle-timeout 1 --log-level debug --metrics-listen "127.0.0.1:$MPORT"
got=$(tls_client "$NODE_PORT" alice 'set x 0 0 12\r\nalice secret\r\nset t:3 0 0 2\r\nok\r\nget t:3\r\n')
[ "$got" = "b'STORED\\r\\nSTORED\\r\\nVALUE t:3 0 2\\r\\nok\\r\\nEND\\r\\n'" ] &&
  ok "require: alice's certificate, then a memcached login over TLS" || bad "require + login: got $got"
wait_for 'grep -q "logged in as .alice." "$tmp/reqd.log"' 3 && ok "... the login's user is the identity (logged)" ||
  bad "no login logged"
got=$(tls_client "$NODE_PORT" alice 'get t:3\r\n')
case $got in "b'CLIENT_ERROR unauthenticated\\r\\n"*) ok "a certificate does not replace the login" ;;
  *) bad "certificate without login: got $got" ;; esac
got=$(tls_client "$NODE_PORT" - 'set x 0 0 12\r\nalice secret\r\nget t:3\r\n')
case $got in *STORED*|*VALUE*) bad "require: a client without a certificate was served: $got" ;;
  *) ok "require: a client without a certificate is refused ($got)" ;; esac
got=$(tls_client "$NODE_PORT" mallory 'set x 0 0 12\r\nalice secret\r\nget t:3\r\n')
case $got in *STORED*|*VALUE*) bad "require: a certificate the CA did not sign was served: $got" ;;
  *) ok "require: a certificate the CA did not sign is refused" ;; esac
if command -v curl >/dev/null 2>&1; then
  curl -s "http://127.0.0.1:$MPORT/metrics" | grep -q '^bqos_node_tls_handshake_failures_total{node="it"} 2$' &&
    ok "/metrics: the two refused handshakes counted" ||
    bad "/metrics: $(curl -s "http://127.0.0.1:$MPORT/metrics" | grep tls_handshake)"
fi
# A client that trickles its handshake one byte every 0.3 s: the idle timeout
# (1 s) counts from the accept, not from its last byte.
t0=$(date +%s)
python3 - "$NODE_PORT" <<'PY' >"$tmp/trickle.out"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
hello = bytes.fromhex("16030100c8010000c40303") + bytes(200)
start = time.time()
for b in hello:
    try:
        s.send(bytes([b]))
    except OSError:
        break
    s.settimeout(0.3)
    try:
        if s.recv(100) == b"":
            break
    except socket.timeout:
        pass
    except OSError:
        break
    if time.time() - start > 8:
        break
print("%.1f" % (time.time() - start))
PY
took=$(cat "$tmp/trickle.out")
awk -v t="$took" 'BEGIN { exit !(t < 6) }' && ok "a trickled handshake is closed by --idle-timeout 1 (after ${took}s)" ||
  bad "a trickled handshake lasted ${took}s"
stop_node

# ---- 3. a PSK (psktool's file) on the memcached port: its identity -----------
if command -v openssl >/dev/null 2>&1; then
  KEY=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff
  echo "tenant-a:$KEY" >"$tmp/keys.psk"; chmod 600 "$tmp/keys.psk"
  start_node "$tmp/psk.log" --policy rr --tls-psk "$tmp/keys.psk" --log-level debug
  psk() { # IDENTITY KEY: a set and a get through openssl s_client with that PSK
    printf 'set k:p 0 0 2\r\nhi\r\nget k:p\r\nquit\r\n' |
      timeout 10 openssl s_client -connect "127.0.0.1:$NODE_PORT" -psk "$2" -psk_identity "$1" \
        -quiet 2>/dev/null | tr -d '\r'
  }
  [ "$(psk tenant-a "$KEY")" = "$(printf 'STORED\nVALUE k:p 0 2\nhi\nEND')" ] &&
    ok "openssl s_client with a PSK: set and get" || bad "PSK client: $(psk tenant-a "$KEY")"
  wait_for 'grep -q "PSK identity tenant-a" "$tmp/psk.log"' 3 &&
    ok "... the PSK identity is the connection's identity (logged)" || bad "no 'PSK identity tenant-a' logged"
  [ -z "$(psk tenant-a "ff${KEY#ff}" | grep -v '^$' | grep STORED)" ] && [ -z "$(psk mallory "$KEY" | grep STORED)" ] &&
    ok "a wrong key or an unknown identity is refused" || bad "a wrong PSK was served"
  stop_node
fi

# ---- 4. bad option sets -----------------------------------------------------
for args in "$SRV --tls-verify require" "$SRV --tls allow" "--tls-ca $pki/ca.pem --tls-verify request" \
  "$SRV --tls-ca $pki/server.key --tls-verify require"; do
  if "$NODE" --backend "memcached://127.0.0.1:$MC_PORT" --check $args >"$tmp/check.out" 2>&1; then
    bad "--check accepted: $args"
  else
    ok "--check refuses: ${args#"$SRV "} ($(head -1 "$tmp/check.out" | cut -c1-100))"
  fi
done
"$NODE" --backend "memcached://127.0.0.1:$MC_PORT" --check $SRV --tls-ca "$pki/ca.pem" --tls-verify request \
  >"$tmp/check.out" 2>&1 && ok "--check accepts a good TLS set" || bad "--check: $(cat "$tmp/check.out")"
finish
