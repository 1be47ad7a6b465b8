import json,sys,re
def load(f):
    try: d=json.load(open(f))
    except Exception: return {}
    return {(p.get('name'),p['id']):p for p in d}
def irq(f):
    r={}
    for line in open(f):
        parts=line.split()
        if not parts or not parts[0].endswith(':'): continue
        name=parts[0][:-1]
        nums=[int(x) for x in parts[1:] if x.isdigit()]
        r[name]=sum(nums)
    return r
def stat(f):
    r={}
    for line in open(f):
        p=line.split()
        if p[0] in('ctxt','processes'): r[p[0]]=int(p[1])
        if p[0]=='cpu': r['busy']=sum(int(x) for x in p[1:4])+sum(int(x) for x in p[6:8]); r['idle']=int(p[4])
    return r
d=sys.argv[1]; tag=sys.argv[2]
b=load(f'{d}/{tag}-before.prog.json'); a=load(f'{d}/{tag}-after.prog.json')
tot=0; rows=[]
for k,p in a.items():
    q=b.get(k,{})
    if p.get('type')!='struct_ops': continue
    dn=p.get('run_cnt',0)-q.get('run_cnt',0); dt=p.get('run_time_ns',0)-q.get('run_time_ns',0)
    if dn: rows.append((dt,dn,k[0])); tot+=dt
rows.sort(reverse=True)
for dt,dn,n in rows: print(f'{n:28s} calls {dn:10d}  total {dt/1e9:8.2f} s  per call {dt/dn:8.0f} ns')
print(f'{"all":28s} total {tot/1e9:.2f} s')
ib=irq(f'{d}/{tag}-before.irq'); ia=irq(f'{d}/{tag}-after.irq')
print(' '.join(f'{k}={ia[k]-ib.get(k,0)}' for k in ia if ia[k]-ib.get(k,0)>1000))
sb=stat(f'{d}/{tag}-before.stat'); sa=stat(f'{d}/{tag}-after.stat')
print({k:sa[k]-sb[k] for k in sa})
