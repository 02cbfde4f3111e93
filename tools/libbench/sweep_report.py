#!/usr/bin/env python3
"""Size sweep (results/sweep.tsv) -> markdown: MB/s per library per size, winner per size."""
import statistics as st, collections, sys
import glob
files = sys.argv[1:] or sorted(glob.glob("results/sweep.*.tsv"))
raw = collections.OrderedDict()
sizes = set()
for f in files:
    for l in open(f):
        if l.startswith("#"): continue
        a, dr, lib, s, x = l.rstrip("\n").split("\t")
        if a == "baseline": continue
        s = int(s); sizes.add(s)
        raw.setdefault((a, dr), collections.OrderedDict()).setdefault(lib, {}).setdefault(s, []).extend(map(float, x.split(",")))
d = collections.OrderedDict((k, collections.OrderedDict((l, {s: st.median(v) for s, v in m.items()}) for l, m in libs.items())) for k, libs in raw.items())
sizes = sorted(sizes)
for (a, dr), libs in d.items():
    print(f"#### {a} {dr} — MB/s (median of all clean-round samples from the sweep runs)\n")
    print("| library / API | " + " | ".join(f"{s} B" for s in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    best = {s: min((v[s], l) for l, v in libs.items() if s in v) for s in sizes}
    for l, v in libs.items():
        cells = []
        for s in sizes:
            t = f"{s*1000/v[s]:,.0f}"
            cells.append(f"**{t}**" if best[s][1] == l else t)
        print(f"| {l} | " + " | ".join(cells) + " |")
    print("\nWinner by size: " + ", ".join(f"{s}: {best[s][1]}" for s in sizes) + "\n")
