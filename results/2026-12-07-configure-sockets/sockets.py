#!/usr/bin/env python3
"""Which placement step sends a process tree's tasks across sockets.

Reads a nest-trace recording with scx_nest --trace-placements (Placement
events) and prints, per step (`how`), the tree's placements and those
onto a socket other than the task's last CPU's (or, for a new task, its
parent's), and how many of those left the socket while an idle CPU of the
previous socket existed."""
import json, sys, collections

def main(path):
    f = open(path)
    head = json.loads(f.readline())
    sock = {c['cpu']: c['socket'] for c in head['topology']['cpus']}
    root = int(dict(head['meta'])['command_pid'])
    tree = {root}
    last_cpu = {}
    idle = set()
    per = collections.Counter(); cross = collections.Counter(); cross_idle = collections.Counter()
    for line in f:
        e = json.loads(line)
        k = e['kind']; cpu = e['cpu']
        if k == 'IdleEnter':
            idle.add(cpu); continue
        if not isinstance(k, dict):
            continue
        (name, v), = k.items()
        if name == 'NewTask':
            if v['parent'] in tree:
                tree.add(v['child'])
                if v['parent'] in last_cpu:
                    last_cpu.setdefault(v['child'], last_cpu[v['parent']])
        elif name == 'Switch':
            idle.discard(cpu)
            if v['next'] != 0:
                last_cpu[v['next']] = cpu
            else:
                idle.add(cpu)
        elif name == 'Placement':
            pid = v['pid']
            if pid not in tree or pid not in last_cpu:
                continue
            how = v.get('how'); target = v['target_cpu']
            per[how] += 1
            prev = last_cpu[pid]
            if sock[target] != sock[prev]:
                cross[how] += 1
                if any(sock[c] == sock[prev] for c in idle):
                    cross_idle[how] += 1
    print(f"{'step':<16}{'placements':>12}{'other socket':>14}{'  (idle CPU left on its socket)':>32}")
    for how, n in per.most_common():
        print(f"{str(how):<16}{n:>12}{cross[how]:>14}{cross_idle[how]:>32}")

main(sys.argv[1])
