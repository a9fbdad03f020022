#!/usr/bin/python3
"""rules_check.py - it_metrics.sh: an alerting rule file is YAML whose expressions name only metrics some scrape exports.

  rules_check.py RULES.yml SCRAPE...   prints the number of rules; exit 1 naming an unknown metric
"""
import re
import sys

import yaml


def main():
    rules = [r for g in yaml.safe_load(open(sys.argv[1]))["groups"] for r in g["rules"]]
    known = set()
    for p in sys.argv[2:]:
        known |= set(re.findall(r"^# TYPE (\S+)", open(p).read(), re.M))
    for r in rules:
        for name in re.findall(r"\b(bqos_[a-z_]+)", r["expr"]):
            if name not in known and re.sub(r"_(bucket|sum|count)$", "", name) not in known:
                print("rule %s: unknown metric %s" % (r["alert"], name))
                return 1
    print(len(rules))
    return 0


if __name__ == "__main__":
    sys.exit(main())
