#!/usr/bin/env python3
"""prop_real.py - a bqos-sim-prop scenario scaled to the real nodes of this host, and its runtime sets.

  prop_real.py scale SIM.json CAPACITY RTT0_MS DURATION KMAX > REAL.json
      Servers s0..sN-1 become s1..sN (scripts/lib.sh's names); rates,
      limits and sets scale by CAPACITY / the scenario's capacity; requests
      in flight per bucket and server keep what they allow over R at the
      unloaded round trip (K x f x RTT0 / the simulator's rtt + parallel /
      C, rounded up, 1..KMAX); "capacity" and workload "rtt_ms" become the
      real servers' (the checker's concurrency test uses them); the
      simulator-only "backend" and "speed" go (no server is slowed down);
      duration DURATION (sets and moves after it dropped).
  prop_real.py scale SIM.json 10000 0 DURATION KMAX --as-drawn > DRAWN.json
      The seed as drawn (rates and requests in flight unchanged, at most
      KMAX), servers renamed: the profile runs it.
  prop_real.py sets REAL.json
      One line per runtime set: PERIOD BUCKET RESERVATION LIMIT ("-": none).
"""
import json
import math
import sys


def rename(name):
    return "s%d" % (int(name[1:]) + 1)


def scale(path, cap, rtt0_ms, duration, kmax, drawn):
    d = json.load(open(path))
    f = cap / d["capacity"]
    be = d.get("backend", {})
    rtt_sim = d["workload"]["rtt_ms"] / 1000 + be.get("parallel", 1) / d["capacity"]
    kf = 1 if drawn else f * (rtt0_ms / 1000) / rtt_sim
    for s in d["servers"]:
        s["name"] = rename(s["name"])
        s.pop("speed", None)
    for b in d["buckets"]:
        b["reservation"] = max(1.0, math.floor(b["reservation"] * f))
        if "limit" in b:
            b["limit"] = max(b["reservation"], math.ceil(b["limit"] * f))
        b["servers"] = [rename(s) for s in b["servers"]]
        b["outstanding"] = max(1, min(kmax, math.ceil(b["outstanding"] * kf - 1e-9)))
        sets = [s for s in b.get("set", []) if s["period"] < duration]
        for s in sets:
            s["reservation"] = max(1.0, math.floor(s["reservation"] * f))
            if "limit" in s:
                s["limit"] = max(s["reservation"], math.ceil(s["limit"] * f))
        if sets:
            b["set"] = sets
        else:
            b.pop("set", None)
        ch = [c for c in b.get("changes", []) if c["at"] < duration]
        for c in ch:
            c["servers"] = [rename(s) for s in c["servers"]]
        if ch:
            b["changes"] = ch
        else:
            b.pop("changes", None)
    d.pop("backend", None)
    d["description"] += " on real nodes: capacity %.0f, RTT0 %.3f ms" % (cap, rtt0_ms)
    d["capacity"] = cap
    d["workload"] = {"rtt_ms": rtt0_ms, "preload": 0}
    d["duration"] = duration
    json.dump(d, sys.stdout, indent=1)
    print()


def sets(path):
    d = json.load(open(path))
    for b in d["buckets"]:
        for s in b.get("set", []):
            print(s["period"], b["name"], "%.0f" % s["reservation"],
                  "%.0f" % s["limit"] if "limit" in s else "-")


if __name__ == "__main__":
    if len(sys.argv) in (7, 8) and sys.argv[1] == "scale":
        scale(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]),
              sys.argv[7:] == ["--as-drawn"])
    elif len(sys.argv) == 3 and sys.argv[1] == "sets":
        sets(sys.argv[2])
    else:
        sys.exit(__doc__)
