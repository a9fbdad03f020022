#!/usr/bin/env python3
"""filed_table.py - prints the bucket table a bucket file holds with its journal (FILE.journal) applied, as the file's JSON ({"buckets": [...]}): what bucketfile_load() reads, for tests that look at a controller's file after changes made in place (a journal line each, docs/decisions.md "A change at a million buckets").

Usage: filed_table.py FILE [NAME KEY]   with NAME and KEY: bucket NAME's member KEY only
("none" if the table has no NAME, "null" if the bucket has no KEY).  Markers
("base", "compacted") are skipped: the tests that use this never compact.
"""
import json
import os
import sys


def table(path):
    t = {}
    for b in json.load(open(path))["buckets"]:
        t[b["name"]] = b
    jp = path + ".journal"
    if os.path.exists(jp):
        for line in open(jp):
            if not line.endswith("\n"):
                break  # a torn last line: never acknowledged
            j = json.loads(line)
            if "set" in j:
                t.pop(j["set"]["name"], None)
                t[j["set"]["name"]] = j["set"]
            elif "remove" in j:
                t.pop(j["remove"], None)
    return list(t.values())


def main():
    rows = table(sys.argv[1])
    if len(sys.argv) == 4:
        b = [r for r in rows if r["name"] == sys.argv[2]]
        print("none" if not b else json.dumps(b[0].get(sys.argv[3])))
    else:
        print(json.dumps({"buckets": rows}))


if __name__ == "__main__":
    main()
