#!/usr/bin/env python3
# shares_nodes_check.py - checks a run of hungry buckets on real nodes (issue 28, fair shares): each bucket's service beyond its reservation is within TOL of the weighted max-min ideal over the bucket-server graph, the ideal computed from what the servers delivered (two /metrics scrapes per node).
#
# usage: shares_nodes_check.py SCENARIO SECS TOL BEFORE1 AFTER1 [BEFORE2 AFTER2 ...]
# SCENARIO is the bqos-load scenario (servers in order, buckets with
# "servers", "weight", "reservation", "limit"; "N%" rates are of its
# "capacity"); each BEFORE/AFTER pair is one server's /metrics at the start
# and the end of the SECS measured.  A reserved bucket must have its limit
# equal to its reservation (all its service is then R): a server's spare is
# what it delivered less what it served of reserved buckets.  The ideal is
# shares_check.py's (progressive filling with a max-flow test), capped by a
# bucket's limit beyond its reservation.  Prints one line per bucket and
# exits 1 if a bucket is off by more than TOL (relative to its ideal, with a
# floor of 1% of the spare), a reservation is missed by more than 5% (not
# judged when the nodes delivered under half the scenario's capacity: a
# starved host) or a limit broken by more than 5% (the window is not
# aligned with the periods).
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shares_check import ideal  # noqa: E402

SERVED = re.compile(r'^bqos_bucket_served_total\{(.*)\} ([0-9.e+]+)$')


def served(path):
    """{bucket: IOs served, every class} from one /metrics text."""
    out = {}
    for line in open(path):
        m = SERVED.match(line.strip())
        if not m:
            continue
        lab = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        b = lab.get("bucket")
        if b is not None:
            out[b] = out.get(b, 0.0) + float(m.group(2))
    return out


def rate(v, cap):
    if v is None:
        return None
    if isinstance(v, str) and v.endswith("%"):
        return float(v[:-1]) / 100 * cap
    return float(v)


def main():
    scen, secs, tol = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    snaps = sys.argv[4:]
    s = json.load(open(scen))
    cap = float(s.get("capacity", 0))
    snames = [v["name"] for v in s["servers"]]
    if len(snaps) != 2 * len(snames):
        sys.exit("need a BEFORE and an AFTER scrape for each of %d servers" % len(snames))
    bk = s["buckets"]
    names = [b["name"] for b in bk]
    servers_of = [[snames.index(n) for n in b.get("servers", [])] for b in bk]
    res = [(rate(b.get("reservation", 0), cap) or 0.0) * secs for b in bk]
    lim = [rate(b.get("limit"), cap) for b in bk]
    lim = [v * secs if v is not None else float("inf") for v in lim]
    w = [float(b.get("weight", 1)) for b in bk]
    for b in range(len(bk)):
        if res[b] > 0 and abs(lim[b] - res[b]) > 1e-6:
            sys.exit("%s: a reserved bucket needs limit = reservation" % names[b])
    # per[s][b]: what server s served of bucket b in the window.
    per = []
    for k in range(len(snames)):
        a, z = served(snaps[2 * k]), served(snaps[2 * k + 1])
        per.append([z.get(n, 0.0) - a.get(n, 0.0) for n in names])
    spare = [sum(per[k][b] for b in range(len(bk)) if res[b] == 0) for k in range(len(snames))]
    got = [sum(per[k][b] for k in range(len(snames))) for b in range(len(bk))]
    caps = [max(0.0, lim[b] - res[b]) for b in range(len(bk))]
    hungry = [servers_of[b] if res[b] == 0 else [] for b in range(len(bk))]
    want = ideal(w, caps, hungry, spare)
    print("servers delivered beyond R (IOs/s): %s" % " ".join(
        "%s %.0f" % (snames[k], spare[k] / secs) for k in range(len(snames))))
    total = sum(spare)
    # A host that starves the nodes (they delivered under half the
    # scenario's capacity: their IO time is slept, so only the host's CPU
    # holds them back) cannot keep a paced reservation's timing: stalls
    # longer than the burst lose R credit whatever the policy.  The
    # reservation is not judged then (said so); the division still is.
    delivered = sum(sum(per[k]) for k in range(len(snames))) / secs / len(snames)
    starved = cap > 0 and delivered < 0.5 * cap
    if starved:
        print("the nodes delivered %.0f IOs/s of their %.0f (host starved): reservations not judged"
              % (delivered, cap))
    ok = True
    for b in range(len(bk)):
        extra = got[b] - res[b]
        if res[b] > 0:
            good = (starved or got[b] >= 0.95 * res[b]) and got[b] <= 1.05 * lim[b] + 1
            print("%s: reserved %.0f/s, served %.0f/s %s" % (
                names[b], res[b] / secs, got[b] / secs, "ok" if good else "OFF"))
        else:
            err = abs(extra - want[b]) / max(want[b], 0.01 * total)
            good = err <= tol and got[b] <= lim[b] * 1.01 + 1
            print("%s: weight %g on %d servers: beyond R %.0f/s, ideal %.0f/s (%+.1f%%) %s" % (
                names[b], w[b], len(servers_of[b]), extra / secs, want[b] / secs,
                100 * (extra - want[b]) / max(want[b], 1), "ok" if good else "OFF"))
        ok &= good
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
