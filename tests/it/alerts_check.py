#!/usr/bin/python3
"""alerts_check.py - helpers of it_alerts.sh over the example alert rules and Grafana dashboard.

  alerts_check.py runbooks RULES DOC        every rule has a severity and a runbook_url DOC#ANCHOR
                                            naming a heading of DOC; prints the number of rules
  alerts_check.py cover RULES TESTS         every alert of RULES is expected to fire somewhere in
                                            TESTS and expected silent somewhere (exp_alerts: [])
  alerts_check.py dashboard JSON OUT        the dashboard's shape (schemaVersion, ${DS_PROMETHEUS}
                                            input and datasources, panel ids, gridPos); writes its
                                            expressions as recording rules to OUT (Grafana's
                                            variables replaced) for promtool check rules;
                                            prints the number of expressions
  alerts_check.py names SCRAPES -- FILE...  every metric the rule or dashboard FILEs name is in
                                            one of the SCRAPES (Prometheus text); prints them
  alerts_check.py query URL JSON TITLE...    runs the dashboard's queries against the Prometheus at
                                            URL (short windows); exit 1 if one fails or a panel
                                            named TITLE has no data; prints the empty ones
  alerts_check.py alerts URL                prints the alerts at URL: NAME:STATE, one a line
  alerts_check.py break RULES OUT           RULES with BqosNoLeader and BqosRejectedMessages put
                                            back as they were before issue 29, to OUT
"""
import json
import re
import sys

import yaml

# Names PromQL uses that are not metrics; `up` is Prometheus' own.
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
    "offset", "sum", "min", "max", "avg", "count", "group", "stddev", "stdvar", "topk", "bottomk",
    "quantile", "count_values", "rate", "irate", "increase", "delta", "idelta", "deriv",
    "histogram_quantile", "absent", "absent_over_time", "max_over_time", "min_over_time",
    "avg_over_time", "sum_over_time", "count_over_time", "last_over_time", "changes", "resets",
    "time", "scalar", "vector", "label_replace", "label_values", "le", "inf", "nan",
}
SYNTHETIC = {"up"}


def rules_of(path):
    return [r for g in yaml.safe_load(open(path))["groups"] for r in g["rules"]]


def slugs(doc):
    """GitHub's heading anchors: lower case, punctuation other than - and _ dropped, spaces -."""
    out = set()
    for line in open(doc):
        m = re.match(r"^#{1,6}\s+(.*?)\s*$", line)
        if m:
            s = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower())
            out.add(s.replace(" ", "-"))
    return out


def runbooks(rules, doc):
    anchors, bad = slugs(doc), []
    names = [r.get("alert") for r in rules_of(rules)]
    for r in rules_of(rules):
        a = r.get("alert", r.get("record"))
        url = r.get("annotations", {}).get("runbook_url", "")
        m = re.match(r"^docs/operations\.md#(.+)$", url)
        if not m:
            bad.append("%s: runbook_url %r is not docs/operations.md#ANCHOR" % (a, url))
        elif m.group(1) not in anchors:
            bad.append("%s: no heading of %s has the anchor #%s" % (a, doc, m.group(1)))
        if r.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
            bad.append("%s: no severity label" % a)
    if len(set(names)) != len(names):
        bad.append("alert names repeat")
    for b in bad:
        print(b)
    if not bad:
        print(len(names))
    return 1 if bad else 0


def cover(rules, tests):
    fires, silent = set(), set()
    for t in yaml.safe_load(open(tests))["tests"]:
        for e in t.get("alert_rule_test", []):
            (fires if e.get("exp_alerts") else silent).add(e["alertname"])
    bad = []
    for r in rules_of(rules):
        a = r["alert"]
        if a not in fires:
            bad.append("%s: no test expects it to fire" % a)
        if a not in silent:
            bad.append("%s: no test expects it silent" % a)
    for b in bad:
        print(b)
    return 1 if bad else 0


def exprs_of_dashboard(d):
    out = []
    def panels(ps):
        for p in ps:
            yield p
            yield from panels(p.get("panels", []))
    for p in panels(d.get("panels", [])):
        for t in p.get("targets", []):
            out.append(("panel %s %r" % (p.get("id"), p.get("title")), t["expr"]))
    for a in d.get("annotations", {}).get("list", []):
        if "expr" in a:
            out.append(("annotation %r" % a["name"], a["expr"]))
    for v in d.get("templating", {}).get("list", []):
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.match(r"^label_values\((.*),\s*\w+\)$", q or "")
        out.append(("variable %s" % v["name"], m.group(1) if m else q))
    return out


def grafana_vars(expr, short=False):
    win = (("$__rate_interval", "5s"), ("$__interval", "5s"), ("$__range", "1m")) if short else \
          (("$__rate_interval", "1m"), ("$__interval", "1m"), ("$__range", "1h"))
    for k, v in win:
        expr = expr.replace(k, v)
    return re.sub(r"\$\{?\w+\}?", ".*", expr)


def dashboard(path, out):
    d = json.load(open(path))
    bad = []
    if not isinstance(d.get("schemaVersion"), int) or d["schemaVersion"] < 36:
        bad.append("schemaVersion %r (want 36 or later: Grafana 9+)" % d.get("schemaVersion"))
    ins = [i for i in d.get("__inputs", []) if i.get("name") == "DS_PROMETHEUS"]
    if not ins or ins[0].get("pluginId") != "prometheus":
        bad.append("no __inputs DS_PROMETHEUS of plugin prometheus")
    ids = []
    for p in d.get("panels", []):
        ids.append(p.get("id"))
        g = p.get("gridPos", {})
        if not all(isinstance(g.get(k), int) for k in "hwxy") or g["x"] + g["w"] > 24:
            bad.append("panel %r: gridPos %r" % (p.get("title"), g))
        if p.get("type") != "row":
            if p.get("datasource", {}).get("uid") != "${DS_PROMETHEUS}":
                bad.append("panel %r: datasource is not ${DS_PROMETHEUS}" % p.get("title"))
            if not p.get("targets"):
                bad.append("panel %r: no query" % p.get("title"))
    if len(set(ids)) != len(ids):
        bad.append("panel ids repeat")
    ex = exprs_of_dashboard(d)
    rules = [{"record": "dashboard:expr:%d" % i, "expr": grafana_vars(e)} for i, (_, e) in enumerate(ex)]
    with open(out, "w") as f:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
    for b in bad:
        print(b)
    if not bad:
        print(len(ex))
    return 1 if bad else 0


def metric_names(expr):
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)            # label values
    expr = re.sub(r"\{[^}]*\}", "", expr)                       # matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)                      # ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set(re.findall(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", expr))
    return {n for n in names if n.lower() not in KEYWORDS}


def names(argv):
    i = argv.index("--")
    known = set()
    for p in argv[:i]:
        for line in open(p):
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[ {]", line)
            if m:
                known.add(m.group(1))
    used = {}
    for f in argv[i + 1:]:
        if f.endswith(".json"):
            ex = exprs_of_dashboard(json.load(open(f)))
        else:
            ex = [(r.get("alert", r.get("record")), r["expr"]) for r in rules_of(f)]
        for where, e in ex:
            for n in metric_names(e):
                used.setdefault(n, "%s: %s" % (f.split("/")[-1], where))
    bad = sorted(n for n in used if n not in known and n not in SYNTHETIC)
    for n in bad:
        print("%s (%s) is in no scrape" % (n, used[n]))
    if not bad:
        print(" ".join(sorted(used)))
    return 1 if bad else 0


def api(url, path, **q):
    import urllib.parse
    import urllib.request
    u = url.rstrip("/") + path + ("?" + urllib.parse.urlencode(q) if q else "")
    return json.load(urllib.request.urlopen(u, timeout=10))


def query(url, path, titles):
    d = json.load(open(path))
    bad, empty, data, n = [], [], set(), 0
    for where, e in exprs_of_dashboard(d):
        try:
            r = api(url, "/api/v1/query", query=grafana_vars(e, short=True))
        except Exception as x:  # a 400 carries the parse error
            bad.append("%s: %s: %s" % (where, e, getattr(x, "read", lambda: str(x).encode())().decode()[:200]))
            continue
        n += 1
        if r["data"]["result"]:
            data.add(where)
        else:
            empty.append("%s: %s" % (where, e[:60]))
    for t in titles:
        if not any(w.endswith(" %r" % t) for w in data):
            bad.append("panel %r: no data" % t)
    for b in bad:
        print(b)
    print("%d queries ran, %d without data here: %s" % (n, len(empty), "; ".join(empty)))
    return 1 if bad else 0


def alerts(url):
    for a in api(url, "/api/v1/alerts")["data"]["alerts"]:
        print("%s:%s" % (a["labels"]["alertname"], a["state"]))
    return 0


def break_rules(rules, out):
    d = yaml.safe_load(open(rules))
    for r in d["groups"][0]["rules"]:
        if r["alert"] == "BqosNoLeader":
            r["expr"] = "max(bqos_controller_leader) < 1"
        if r["alert"] == "BqosRejectedMessages":
            r["expr"] = "sum by (job, instance, reason) (increase(bqos_controller_messages_rejected_total[5m])) > 0"
            r.pop("for", None)
    with open(out, "w") as f:
        yaml.safe_dump(d, f, sort_keys=False)
    return 0


def main():
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "runbooks":
        return runbooks(a[0], a[1])
    if cmd == "cover":
        return cover(a[0], a[1])
    if cmd == "dashboard":
        return dashboard(a[0], a[1])
    if cmd == "names":
        return names(a)
    if cmd == "query":
        return query(a[0], a[1], a[2:])
    if cmd == "alerts":
        return alerts(a[0])
    if cmd == "break":
        return break_rules(a[0], a[1])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
