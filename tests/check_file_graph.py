#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""
check_file_graph.py [--outside FILE.c]... SRCDIR ARCHIVE... - fail if the
files of one module depend on each other in a cycle.

Two graphs, both must be acyclic:
  - includes: every #include "..." between the .c and .h files of SRCDIR
    (paths relative to the top of the tree, as the code writes them);
  - calls: object A -> object B when A uses a symbol that B defines, from
    `nm` on the static libraries built from SRCDIR (ARCHIVE...).  A file
    and its own header are one node here, so a cycle is always between two
    .c files that call each other, directly or through others.

Every .c file of SRCDIR must be an object of one of the ARCHIVEs, so that
a file added to the module but to none of the libraries given here fails
the check instead of escaping the call graph.  --outside names a file built
into a program instead (a main(): nothing can call it, so it cannot close a
cycle of calls; its includes are still checked).

Prints every cycle found (one per strongly connected component) and exits
1, or prints a one-line summary and exits 0.
"""
import os
import re
import subprocess
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sccs(graph):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in graph[v]:
                    out.append(sorted(comp))
    return out


def include_graph(srcdir, top):
    graph = {}
    for name in sorted(os.listdir(srcdir)):
        if not name.endswith(('.c', '.h')):
            continue
        rel = os.path.relpath(os.path.join(srcdir, name), top)
        with open(os.path.join(srcdir, name), encoding='utf-8') as f:
            text = f.read()
        graph[rel] = {inc for inc in INCLUDE_RE.findall(text) if inc != rel}
    return graph


def call_graph(archives):
    defined, undefined = {}, {}
    for a in archives:
        out = subprocess.run(['nm', '-A', '--defined-only', a], check=True,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            path, _, rest = line.rpartition(':')
            parts = rest.split()
            if len(parts) == 3 and parts[1] in 'TDBRVWtdbr' and parts[1].isupper():
                obj = os.path.basename(path.rsplit(':', 1)[-1])
                defined[parts[2]] = obj
        out = subprocess.run(['nm', '-A', '--undefined-only', a], check=True,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            path, _, rest = line.rpartition(':')
            parts = rest.split()
            if len(parts) == 2:
                obj = os.path.basename(path.rsplit(':', 1)[-1])
                undefined.setdefault(obj, set()).add(parts[1])
    objs = set(defined.values()) | set(undefined)
    graph = {o: set() for o in objs}
    for obj, syms in undefined.items():
        for s in syms:
            d = defined.get(s)
            if d and d != obj:
                graph[obj].add(d)
    return graph


def archive_members(archives):
    members = set()
    for a in archives:
        out = subprocess.run(['ar', 't', a], check=True, capture_output=True,
                             text=True).stdout
        members.update(os.path.basename(m) for m in out.split())
    return members


def uncovered(srcdir, archives, outside):
    """.c files of srcdir that no archive holds.  meson names the object of
    sub/dir/x.c "sub_dir_x.c.o", so a member matches by its tail."""
    members = archive_members(archives)
    missing = []
    for name in sorted(os.listdir(srcdir)):
        if not name.endswith('.c') or name in outside:
            continue
        if not any(m == name + '.o' or m.endswith('_' + name + '.o') for m in members):
            missing.append(name)
    return missing


def main(argv):
    args, outside = argv[1:], set()
    while len(args) >= 2 and args[0] == '--outside':
        outside.add(args[1])
        args = args[2:]
    if len(args) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    srcdir, archives = args[0], args[1:]
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    failed = False
    for name in uncovered(os.path.abspath(srcdir), archives, outside):
        print(f'{srcdir}/{name}: in no library given, its calls are not checked')
        failed = True
    inc = include_graph(os.path.abspath(srcdir), top)
    for comp in sccs(inc):
        print('include cycle: ' + ' <-> '.join(comp))
        failed = True
    calls = call_graph(archives)
    for comp in sccs(calls):
        print('call cycle: ' + ' <-> '.join(comp))
        failed = True
    if failed:
        return 1
    edges = sum(len(v) for v in calls.values())
    print(f'{srcdir}: {len(inc)} files, {len(calls)} objects, {edges} call edges, no cycle')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
