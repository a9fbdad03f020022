#!/bin/sh
# it_nbd_tls.sh - NBD over TLS against libnbd's clients: nbds:// with an X.509 certificate and with a PSK (nbdinfo, nbdcopy round trip, fio's nbd engine with verify), client certificates under --tls-verify require (the CN logged as the identity), --tls require refusing plain clients and --tls allow serving both, STARTTLS edge cases on the wire, and credential files refused at start.
# Needs BIN (default bin); skips (exit 0 with a note) if nbdinfo, nbdcopy, python3, or both certtool and openssl are missing.
. "$(dirname "$0")/../../scripts/lib.sh"
it_begin it_nbd_tls
NODE="$BIN/bqos-nbd-node"
for t in nbdinfo nbdcopy python3; do
  command -v $t >/dev/null 2>&1 || { echo "it_nbd_tls: $t not installed (scripts/deps.sh); skipped"; exit 0; }
done
[ -x "$NODE" ] || { echo "it_nbd_tls: $NODE not built"; exit 1; }
tmp=$T
pki=$tmp/pki

# ---- credentials: a self-signed certificate for 127.0.0.1, a PSK ----------
# (nbdkit's psktool is not packaged everywhere: lib.sh writes its format.)
nbd_tls_pki "$pki" || { echo "it_nbd_tls: neither certtool nor openssl installed; skipped"; exit 0; }

head -c 6000000 /dev/urandom >"$tmp/in.bin"
CERT="tls-certificates=$pki"
PSK="tls-psk-file=$pki/keys.psk"

# ---- 1. --tls require (the default with credentials) -----------------------
start_nbd_node "$tmp/req.log" "$NODE" --backend "file:$tmp/store/" --export-size 64m \
  --tls-cert "$pki/server-cert.pem" --tls-key "$pki/server-key.pem" \
  --tls-psk "$pki/keys.psk"
N1=$PID; P1=$PORT
grep -q 'TLS require' "$tmp/req.log" && ok "credentials given: --tls require by default" ||
  not_ok "default mode: $(cat "$tmp/req.log")"
out=$(nbdinfo "nbds://127.0.0.1:$P1/default?$CERT" 2>&1)
echo "$out" | grep -q 'with TLS' && ok "nbdinfo nbds:// with the X.509 certificate" ||
  not_ok "nbdinfo X.509: $out"
out=$(nbdinfo "nbds://alice@127.0.0.1:$P1/default?$PSK" 2>&1)
echo "$out" | grep -q 'with TLS' && ok "nbdinfo nbds:// with the PSK" || not_ok "nbdinfo PSK: $out"
nbd_roundtrip "nbds://127.0.0.1:$P1/default?$CERT" && ok "nbdcopy in and out over TLS (X.509), same bytes" ||
  not_ok "nbdcopy X.509 round trip"
nbd_roundtrip "nbds://alice@127.0.0.1:$P1/default?$PSK" && ok "nbdcopy in and out over TLS (PSK), same bytes" ||
  not_ok "nbdcopy PSK round trip"
echo "bob:00112233445566778899aabbccddeeff" >"$tmp/wrong.psk"
# fio's nbd engine refuses file names in the URI (libnbd's
# allow_local_file); libnbd then looks for $HOME/.pki/libnbd/ca-cert.pem.
if command -v fio >/dev/null 2>&1; then
  mkdir -p "$tmp/home/.pki/libnbd" && cp "$pki/ca-cert.pem" "$tmp/home/.pki/libnbd/"
  if HOME=$tmp/home fio --name=tls --ioengine=nbd --uri="nbds://127.0.0.1:$P1/default" \
       --rw=randwrite --bs=4k --size=8m --iodepth=8 --verify=crc32c --verify_fatal=1 --verify_state_save=0 \
       >"$tmp/fio.out" 2>&1 && grep -q 'err= 0' "$tmp/fio.out"; then
    ok "fio's nbd engine over nbds:// (X.509): random writes verified"
  else
    not_ok "fio over TLS: $(tail -5 "$tmp/fio.out")"
  fi
fi
if nbdinfo "nbds://bob@127.0.0.1:$P1/default?tls-psk-file=$tmp/wrong.psk" >/dev/null 2>&1; then
  not_ok "an unknown PSK identity was accepted"
else
  ok "an unknown PSK identity is refused"
fi
if out=$(nbdinfo "nbd://127.0.0.1:$P1/default" 2>&1); then
  not_ok "a plain client was served under --tls require: $out"
else
  ok "a plain client is refused under --tls require"
fi

# On the wire: every option before STARTTLS gets NBD_REP_ERR_TLS_REQD,
# EXPORT_NAME closes, bytes behind STARTTLS close, a garbage handshake closes.
if python3 - "$P1" <<'PY'
import socket, struct, sys
port = int(sys.argv[1])
MAGIC = 0x49484156454F5054
def conn():
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    g = b""
    while len(g) < 18:
        g += s.recv(18 - len(g))
    s.sendall(struct.pack(">I", 3))          # FIXED_NEWSTYLE | NO_ZEROES
    return s
def opt(s, o, data=b"", extra=b""):
    s.sendall(struct.pack(">QII", MAGIC, o, len(data)) + data + extra)
def reply(s):
    h = b""
    while len(h) < 20:
        c = s.recv(20 - len(h))
        if not c:
            return None
        h += c
    _, o, t, n = struct.unpack(">QIII", h)
    while n > 0:
        n -= len(s.recv(n))
    return o, t
def closed(s):
    try:
        return s.recv(100) == b""
    except (ConnectionResetError, socket.timeout):
        return True
s = conn()
for o in (3, 8, 7):                          # LIST, STRUCTURED_REPLY, GO
    r = reply(s) if opt(s, o, b"" if o != 7 else struct.pack(">I", 7) + b"default" + b"\0\0") is None else None
    assert r == (o, 0x80000005), ("option %d before TLS" % o, r)
opt(s, 1, b"default")                        # EXPORT_NAME: no error reply exists
assert closed(s), "EXPORT_NAME before TLS did not close"
s = conn()
opt(s, 5, extra=b"\x16\x03\x01")             # STARTTLS with bytes behind it
r = reply(s)                                 # the ACK may go out or not
assert r in (None, (5, 1)), r
assert closed(s), "bytes after STARTTLS did not close"
s = conn()
opt(s, 5)
assert reply(s) == (5, 1)
s.sendall(b"GET / HTTP/1.0\r\n\r\n" * 4)      # not a ClientHello
assert closed(s), "a garbage handshake did not close"
PY
then
  ok "STARTTLS on the wire: TLS_REQD before TLS, EXPORT_NAME, injected bytes and garbage close"
else
  not_ok "STARTTLS on the wire"
fi
kill -0 "$N1" 2>/dev/null && nbdinfo "nbds://127.0.0.1:$P1/default?$CERT" >/dev/null 2>&1 &&
  ok "the node serves TLS clients after the bad ones" || not_ok "node after bad clients"
stop_pid "$N1"

# ---- 2. --tls allow: plain and TLS clients -----------------------------------
start_nbd_node "$tmp/allow.log" "$NODE" --backend "file:$tmp/store/" --export-size 64m \
  --tls allow --tls-psk "$pki/keys.psk"
N2=$PID; P2=$PORT
nbdinfo "nbd://127.0.0.1:$P2/default" 2>&1 | grep -q 'without TLS' &&
  ok "--tls allow: a plain client is served" || not_ok "--tls allow: plain client"
nbd_roundtrip "nbds://alice@127.0.0.1:$P2/default?$PSK" && ok "--tls allow: nbdcopy over TLS" ||
  not_ok "--tls allow: TLS client"

# SIGHUP re-reads the PSK file: a new identity gets in, a copy running
# through the reload finishes on the keys it started with, a broken file
# keeps the keys in force.
echo "bob:$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" >"$tmp/bob.psk"; chmod 600 "$tmp/bob.psk"
BOB="nbds://bob@127.0.0.1:$P2/default?tls-psk-file=$tmp/bob.psk"
nbdinfo "$BOB" >/dev/null 2>&1 && not_ok "bob is served before the reload" || ok "bob is refused before the reload"
nbd_roundtrip "nbds://alice@127.0.0.1:$P2/default?$PSK" & RT=$!
cat "$tmp/bob.psk" >>"$pki/keys.psk"
kill -HUP "$N2"
wait_for 'grep -q "TLS files re-read" "$tmp/allow.log"' 5
nbdinfo "$BOB" 2>&1 | grep -q 'with TLS' && ok "SIGHUP: bob, added to the PSK file, is served" ||
  not_ok "SIGHUP: bob after the reload: $(tail -3 "$tmp/allow.log")"
wait $RT && ok "SIGHUP: a copy running through the reload finishes, same bytes" ||
  not_ok "SIGHUP: the copy through the reload"
cp "$pki/keys.psk" "$tmp/keys.good"
echo "garbage" >>"$pki/keys.psk"
kill -HUP "$N2"
wait_for 'grep -q "TLS files not reloaded" "$tmp/allow.log"' 5
check "SIGHUP: a broken PSK file is logged with its line" 'grep -q "TLS files not reloaded.*keys.psk:[0-9]" "$tmp/allow.log"'
nbdinfo "$BOB" 2>&1 | grep -q 'with TLS' && ok "SIGHUP: and the keys in force stay" || not_ok "keys after a bad reload"
cp "$tmp/keys.good" "$pki/keys.psk"
stop_pid "$N2"

# ---- 2b. client certificates (--tls-ca, --tls-verify require): the name ------
# A client CA and a certificate it signs; libnbd reads client-cert.pem and
# client-key.pem from its tls-certificates directory.
cdir=$tmp/client; mkdir -p "$cdir"; cp "$pki/ca-cert.pem" "$cdir/"
if command -v certtool >/dev/null 2>&1; then
  certtool -p --key-type ecdsa --outfile "$tmp/clientca.key" 2>/dev/null
  printf 'cn = client CA\nca\ncert_signing_key\nexpiration_days = 2\n' >"$tmp/clientca.tmpl"
  certtool -s --load-privkey "$tmp/clientca.key" --template "$tmp/clientca.tmpl" \
    --outfile "$tmp/clientca.pem" 2>/dev/null
  certtool -p --key-type ecdsa --outfile "$cdir/client-key.pem" 2>/dev/null
  printf 'cn = carol\ntls_www_client\nexpiration_days = 2\n' >"$cdir/client.tmpl"
  certtool -c --load-privkey "$cdir/client-key.pem" --load-ca-certificate "$tmp/clientca.pem" \
    --load-ca-privkey "$tmp/clientca.key" --template "$cdir/client.tmpl" \
    --outfile "$cdir/client-cert.pem" 2>/dev/null
  chmod 600 "$cdir/client-key.pem"
  start_nbd_node "$tmp/verify.log" "$NODE" --backend "file:$tmp/store/" --export-size 64m \
    --tls-cert "$pki/server-cert.pem" --tls-key "$pki/server-key.pem" \
    --tls-ca "$tmp/clientca.pem" --tls-verify require --log-level debug
  N3=$PID; P3=$PORT
  nbdinfo "nbds://127.0.0.1:$P3/default?tls-certificates=$cdir" 2>&1 | grep -q 'with TLS' &&
    ok "--tls-verify require: a client with a certificate from the CA is served" ||
    not_ok "client certificate: $(tail -3 "$tmp/verify.log")"
  wait_for 'grep -q "TLS up: .*certificate carol" "$tmp/verify.log"' 3 &&
    ok "... its CN is the connection's identity (logged)" || not_ok "no 'certificate carol' logged"
  if nbdinfo "nbds://127.0.0.1:$P3/default?$CERT" >/dev/null 2>&1; then
    not_ok "--tls-verify require: a client without a certificate was served"
  else
    ok "--tls-verify require: a client without a certificate is refused"
  fi
  stop_pid "$N3"
fi

# ---- 3. credentials refused at start, the file named --------------------------
# refused LOG ARGS...: the node must exit non-zero.
refused() {
  log=$1; shift
  timeout 10 "$NODE" --nbd-listen 127.0.0.1:0 --backend "file:$tmp/store/" "$@" >"$log" 2>&1 && return 1
  return 0
}
chmod 644 "$pki/server-key.pem"
refused "$tmp/r1.log" --tls-cert "$pki/server-cert.pem" --tls-key "$pki/server-key.pem" &&
  grep -q "server-key.pem.*mode 0644" "$tmp/r1.log" && ok "a key readable by others is refused, file named" ||
  not_ok "key mode: $(cat "$tmp/r1.log")"
chmod 600 "$pki/server-key.pem"
echo "alice:xyz1" >"$tmp/bad.psk"; chmod 600 "$tmp/bad.psk"
refused "$tmp/r2.log" --tls-psk "$tmp/bad.psk" && grep -q "bad.psk" "$tmp/r2.log" &&
  ok "a malformed PSK file is refused, file named" || not_ok "bad PSK: $(cat "$tmp/r2.log")"
refused "$tmp/r3.log" --tls-cert "$pki/ca-cert.pem" --tls-key "$pki/keys.psk" &&
  grep -q "ca-cert.pem" "$tmp/r3.log" && ok "a key file that is no key is refused, file named" ||
  not_ok "bad key: $(cat "$tmp/r3.log")"
refused "$tmp/r4.log" --tls require && grep -q "needs --tls-cert" "$tmp/r4.log" &&
  ok "--tls require without credentials is refused" || not_ok "require alone: $(cat "$tmp/r4.log")"

it_end 'for f in "$tmp"/*.log; do echo "== $f"; tail -15 "$f"; done'
