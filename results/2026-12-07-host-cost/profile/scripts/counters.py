import json,re,sys
import os
root=os.environ.get('NEST_REPO', '.')  # the repository, for the counters' names
h=open(f'{root}/policy/nest_policy.h').read()
stats=re.findall(r'\bX\(([A-Z_0-9]+),', h[h.index('#define NEST_STATS'):])
stats=stats[:stats.index('MIGRATED')+1] if 'MIGRATED' in stats else stats
i=open(f'{root}/crates/scx_nest/src/bpf/intf.h').read()
evs=re.findall(r'\bX\(([A-Z_0-9]+),', i[i.index('#define SCX_NEST_EVENTS'):])
names=['stat.'+s for s in stats]+['ev.'+e for e in evs]
def load(f):
    d=json.load(open(f)); tot=[0]*len(names)
    for v in d[0]['values']:
        b=bytes(int(x,16) for x in v['value'])
        for k in range(min(len(names),len(b)//8)):
            tot[k]+=int.from_bytes(b[8*k:8*k+8],'little')
    return tot
d,tag=sys.argv[1],sys.argv[2]
a=load(f'{d}/{tag}-after.counters.json'); b=load(f'{d}/{tag}-before.counters.json')
print(' '.join(f'{n}={x-y}' for n,x,y in zip(names,a,b) if x-y))
