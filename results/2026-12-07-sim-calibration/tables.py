#!/usr/bin/env python3
"""Nest's improvement over Linux per machine, workload and governor, before
(one model) and after (median [low, high] over the assumption ranges), as a
Markdown table, from the CSV files commands.sh wrote."""
import csv
import sys
from collections import defaultdict

MACHINES = ["xeon-gold-5218-2s", "xeon-gold-6130-2s", "xeon-gold-6130-4s", "xeon-e7-8870-v4-4s"]
WORKLOADS = ["configure", "sleepers", "barrier", "hackbench"]
GOVERNORS = ["powersave", "performance", "schedutil"]


def before(machine, workload):
    sums = defaultdict(lambda: [0.0, 0.0, 0])
    with open(f"before-{machine}-{workload}/runs.csv") as f:
        for r in csv.DictReader(f):
            s = sums[r["policy"], r["governor"]]
            s[0] += float(r["completion_ms"])
            s[1] += float(r["energy_j"])
            s[2] += 1
    out = {}
    for g in GOVERNORS:
        lt, le, ln = sums["linux", g]
        nt, ne, nn = sums["nest", g]
        out[g] = ((lt / ln - nt / nn) / (lt / ln), (le / ln - ne / nn) / (le / ln))
    return out


def after(machine, workload):
    out = {}
    with open(f"after-{machine}-{workload}/sensitivity.csv") as f:
        for r in csv.DictReader(f):
            if r["policy"] == "nest" and r["against"] == "linux":
                out[r["governor"], r["metric"]] = r
    return out


def pct(x):
    return f"{100 * float(x):+.1f}%"


def spread(r):
    return f"{pct(r['median'])} [{100 * float(r['low']):+.1f}, {100 * float(r['high']):+.1f}]"


print("| machine | workload | governor | before: time, energy | after: time | after: energy | time moved most by |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for m in MACHINES:
    for w in WORKLOADS:
        b, a = before(m, w), after(m, w)
        for g in GOVERNORS:
            t, e = a[g, "time"], a[g, "energy"]
            moved = f"`{t['moved_most_by']}` ({100 * float(t['moved_by']):+.1f})" if t["moved_most_by"] else "-"
            print(f"| {m} | {w} | {g} | {pct(b[g][0])}, {pct(b[g][1])} | {spread(t)} | {spread(e)} | {moved} |")
