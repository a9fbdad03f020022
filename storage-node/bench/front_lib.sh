# front_lib.sh - what the node's CPU-per-request benches read of a running node (sourced after scripts/lib.sh): its CPU ticks and the requests it served.

# ticks PID: the process's user + system CPU so far, in clock ticks (/proc/PID/stat)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# served PORT: the requests a node on 127.0.0.1:PORT served so far: its
# memcached `stats` get keys + sets + touches + flushes (through mc_ask)
served() {
  mc_ask "$1" 'stats\r\n' 5 | tr '|' '\n' |
    awk '$1 == "STAT" && ($2 == "cmd_get" || $2 == "cmd_set" || $2 == "cmd_touch" || $2 == "cmd_flush") { s += $3 }
         END { print s + 0 }'
}
