import json,sys,collections
f=sys.argv[1]
meta=None; ev=[]
for i,l in enumerate(open(f)):
    o=json.loads(l)
    if i==0: meta=dict(o['meta']); continue
    ev.append(o)
root=int(meta['command_pid'])
tree={root}
for e in ev:
    k=e['kind']
    if 'NewTask' in k and k['NewTask']['parent'] in tree: tree.add(k['NewTask']['child'])
sock=lambda c: c//8
last_cpu={}
by=collections.Counter(); cross=collections.Counter(); tgt=collections.Counter()
for e in ev:
    k=e['kind']
    if 'Switch' in k:
        s=k['Switch']
        if s['next'] in tree: last_cpu[s['next']]=e['cpu']
    if 'NewTask' in k and k['NewTask']['parent'] in tree:
        last_cpu.setdefault(k['NewTask']['child'], last_cpu.get(k['NewTask']['parent']))
    if 'Placement' in k:
        p=k['Placement']
        if p['pid'] not in tree: continue
        by[p['how']]+=1; tgt[(p['how'],sock(p['target_cpu']))]+=1
        prev=last_cpu.get(p['pid'])
        if prev is not None and sock(prev)!=sock(p['target_cpu']): cross[(p['how'], f"{sock(prev)}->{sock(p['target_cpu'])}")]+=1
print('tree tasks',len(tree),'placements',sum(by.values()))
print(by.most_common())
print('by target socket',sorted(tgt.items()))
print('cross-socket',cross.most_common())
# time on sockets
run=collections.Counter()
cur={}
for e in ev:
    k=e['kind']
    if 'Switch' in k:
        s=k['Switch']; c=e['cpu']
        if c in cur and cur[c][0] in tree: run[sock(c)]+=e['ts_ns']-cur[c][1]
        cur[c]=(s['next'],e['ts_ns'])
print('run ms per socket',{k:v//1000000 for k,v in run.items()})
