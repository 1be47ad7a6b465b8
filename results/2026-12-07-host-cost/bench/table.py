import csv, statistics, collections, sys
rows = list(csv.DictReader(open(sys.argv[1])))
vals = collections.defaultdict(list)
order_w, order_s = [], []
for r in rows:
    if r['status'] != 'OK': print('NOT OK', r); continue
    vals[(r['workload'], r['scheduler'])].append(float(r['metric']))
    if r['workload'] not in order_w: order_w.append(r['workload'])
    if r['scheduler'] not in order_s: order_s.append(r['scheduler'])
print('| workload, s: median [runs] (vs default) | ' + ' | '.join(order_s) + ' | scx_nest vs best peer |')
print('| --- ' * (len(order_s) + 2) + '|')
for w in order_w:
    med = {s: statistics.median(vals[(w, s)]) for s in order_s}
    cells = []
    for s in order_s:
        runs = ', '.join(f'{v:g}' for v in vals[(w, s)])
        cells.append(f"{med[s]:.3f} [{runs}] ({med[s]/med['default']:.2f})")
    peers = [s for s in order_s if s not in ('default', 'scx_nest')]
    best = min(peers, key=lambda s: med[s])
    print(f'| {w} | ' + ' | '.join(cells) + f" | {med['scx_nest']/med[best]:.2f} ({best}) |")
