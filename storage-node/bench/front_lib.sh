# front_lib.sh - what the node's CPU-per-request benches read of a running node (sourced after scripts/lib.sh): its CPU ticks and the requests it served.

# ticks PID: the process's user + system CPU so far, in clock ticks (/proc/PID/stat)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# served PORT: the requests a node on 127.0.0.1:PORT served so far: its
# memcached `stats` get keys + sets + touches + flushes
served() {
  python3 - "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
s.sendall(b"stats\r\n")
buf = b""
while not buf.endswith(b"END\r\n"):
    b = s.recv(65536)
    if not b:
        break
    buf += b
st = dict(l.split(" ")[1:3] for l in buf.decode().split("\r\n") if l.startswith("STAT "))
print(sum(int(st.get(k, 0)) for k in ("cmd_get", "cmd_set", "cmd_touch", "cmd_flush")))
PY
}
