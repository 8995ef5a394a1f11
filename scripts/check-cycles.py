#!/usr/bin/env python3
"""Finds import cycles between the modules of each crate.

A module depends on another when it names it in a `use` (or a path) starting at
`crate::`, `super::` or `self::`; a cycle is a set of modules that reach each other that
way. The house rule (docs/ARCHITECTURE.md): modules form a tree of dependencies, as
crates do, so a module split into files keeps its shared types in one place the others
depend on (cm::core, tina::core::lnc) and none depends back. Comments and `mod tests`
blocks are not read. Exits 1 and names the modules of each cycle.
"""
import re
import sys
from pathlib import Path

root=Path(__file__).resolve().parent.parent/'crates'
def modpath(src, f):
    rel=f.relative_to(src); parts=list(rel.parts)
    if parts[-1] in ('lib.rs','main.rs') and len(parts)==1: return ()
    if parts[-1]=='mod.rs': parts=parts[:-1]
    else: parts[-1]=parts[-1][:-3]
    return tuple(parts)
found = []
for crate in sorted(root.iterdir()):
    src=crate/'src'
    if not src.exists(): continue
    files={modpath(src,f):f for f in src.rglob('*.rs')}
    mods=set(files)
    def resolve(cur, path):
        segs=path.split('::')
        if segs[0]=='crate': base=(); segs=segs[1:]
        elif segs[0]=='super':
            base=cur
            while segs and segs[0]=='super': base=base[:-1]; segs=segs[1:]
        elif segs[0]=='self': base=cur; segs=segs[1:]
        else: return None
        m=base
        for s in segs:
            s=s.strip('{} ')
            if m+(s,) in mods: m=m+(s,)
            else: break
        return m
    edges={m:set() for m in mods}
    for m,f in files.items():
        text=f.read_text()
        text='\n'.join(l for l in text.split('\n') if not l.lstrip().startswith('//'))
        # strip test modules crudely
        text=re.split(r'#\[cfg\(test\)\]\s*mod tests\s*\{',text)[0]
        for u in re.findall(r'\buse\s+((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)*(?:::\{[^;]*\})?)\s*;', text):
            if '{' in u:
                pre,inner=u.split('::{',1)
                items=[x.strip() for x in inner.rstrip('}').split(',')]
                targets=[resolve(m,pre+'::'+i.split('::')[0]) for i in items if i]
            else: targets=[resolve(m,u)]
            for t in targets:
                if t is not None and t!=m and t in mods and m not in (t,):
                    # ignore child->ancestor edges? keep all
                    edges[m].add(t)
        for u in re.findall(r'(?:crate|super)(?:::super)*::[a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*::[A-Za-z_]', text):
            t=resolve(m,u.rsplit('::',1)[0])
            if t is not None and t!=m: edges[m].add(t)
    # find 2-cycles and SCCs
    index={}; low={}; st=[]; on=set(); sccs=[]; c=[0]
    sys.setrecursionlimit(10000)
    def sc(v):
        index[v]=low[v]=c[0]; c[0]+=1; st.append(v); on.add(v)
        for w in edges[v]:
            if w not in index: sc(w); low[v]=min(low[v],low[w])
            elif w in on: low[v]=min(low[v],index[w])
        if low[v]==index[v]:
            comp=[]
            while True:
                w=st.pop(); on.discard(w); comp.append(w)
                if w==v: break
            if len(comp)>1: sccs.append(comp)
    for v in mods:
        if v not in index: sc(v)
    for comp in sccs:
        found.append((crate.name, sorted('::'.join(x) or '<root>' for x in comp)))

for name, comp in found:
    print(f"crates/{name}: an import cycle between " + ", ".join(f"`{m}`" for m in comp))
if found:
    sys.exit(1)
print("no import cycle between the modules of any crate")
