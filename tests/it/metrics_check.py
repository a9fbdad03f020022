#!/usr/bin/python3
"""metrics_check.py - helpers of it_metrics.sh over Prometheus text (parsed with prometheus_client's parser, not regexes).

  metrics_check.py get URL FILE          GET URL into FILE; exit 1 if it does not parse
  metrics_check.py value FILE NAME [L=V...]   print the sample NAME with those labels (or nothing)
  metrics_check.py values FILE           every sample: NAME, TAB, its labels L=V sorted and joined
                                         by \x1f, TAB, what `value` prints for it ("-": nothing);
                                         for it_metrics.sh's val to look up many in one parse
  metrics_check.py grow OLD NEW          every counter sample of OLD is in NEW and not smaller;
                                         prints how many grew
  metrics_check.py mcload PORT N         N sets and gets on a memcached node, keys red:*, blue:*
"""
import socket
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def parse(path):
    with open(path) as f:
        return list(text_string_to_metric_families(f.read()))


def samples(path, types=None):
    out = {}
    for fam in parse(path):
        if types and fam.type not in types:
            continue
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def main():
    cmd = sys.argv[1]
    if cmd == "get":
        body = urllib.request.urlopen(sys.argv[2], timeout=10).read().decode()
        with open(sys.argv[3], "w") as f:
            f.write(body)
        fams = parse(sys.argv[3])
        print(len(fams))
        return 0 if fams else 1
    if cmd == "value":
        want = dict(kv.split("=", 1) for kv in sys.argv[4:])
        for (name, labels), v in samples(sys.argv[2]).items():
            d = dict(labels)
            if name == sys.argv[3] and all(d.get(k) == x for k, x in want.items()):
                print(int(v) if v == int(v) else v)
                return 0
        return 1
    if cmd == "values":
        for (name, labels), v in samples(sys.argv[2]).items():
            try:
                out = str(int(v) if v == int(v) else v)
            except (OverflowError, ValueError):  # inf, nan: `value` prints nothing
                out = "-"
            print("%s\t%s\t%s" % (name, "\x1f".join("%s=%s" % kv for kv in labels), out))
        return 0
    if cmd == "grow":
        old, new = samples(sys.argv[2], ("counter", "histogram")), samples(sys.argv[3], ("counter", "histogram"))
        grew = 0
        for k, v in old.items():
            if k not in new or new[k] < v:
                print("shrank or vanished:", k, v, new.get(k))
                return 1
            grew += new[k] > v
        print(grew)
        return 0
    if cmd == "mcload":
        s = socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=10)
        n = int(sys.argv[3])
        for i in range(n):
            b = "red" if i % 2 else "blue"
            s.sendall(b"set %s:k%d 0 0 2\r\nhi\r\nget %s:k%d\r\n" % (b.encode(), i, b.encode(), i))
        s.sendall(b"quit\r\n")
        got = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
        return 0 if got.count(b"STORED") == n else 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
