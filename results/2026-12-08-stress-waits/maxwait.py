import json,sys
waiting={}; waits=[]; names={}; last=0
for i,l in enumerate(open(sys.argv[1])):
    if i==0: continue
    e=json.loads(l); ts=e['ts_ns']; last=ts; k=e['kind']
    if 'Switch' in k:
        s=k['Switch']; p=s['prev']; n=s['next']
        if p and s['prev_state']=='Runnable': waiting.setdefault(p,(ts,e['cpu'],'pre'))
        if n in waiting:
            t0,c,w=waiting.pop(n); waits.append((ts-t0,n,c,w,t0))
    elif 'Wakeup' in k or 'WakeupNew' in k:
        d=k.get('Wakeup') or k.get('WakeupNew'); p=d['pid']
        waiting.setdefault(p,(ts,d.get('cpu',e['cpu']),'wake'))
    elif 'Exit' in k or 'ProcessExit' in k: pass
for p,(t0,c,w) in waiting.items(): waits.append((last-t0,p,c,w+'-open',t0))
waits.sort(reverse=True)
for x in waits[:15]: print(x)
print(len(waits))
