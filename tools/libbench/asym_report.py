#!/usr/bin/env python3
"""Table of the public-key cases (`libbench --asym`): median op/s per library, the range over
the clean rounds, and aws-lc-rs / libcrypto. Usage: python3 asym_report.py results/asym.1.tsv"""
import statistics, sys

rows = {}
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if line.startswith("#") or f[1] != "asym":
        continue
    xs = [float(x) for x in f[4].split(",") if x]
    rows.setdefault(f[0], {})[f[2].split(" ")[0]] = (1e9 / statistics.median(xs), 1e9 / max(xs), 1e9 / min(xs))

def cell(v):
    return f"{v[0]:,.0f} ({v[1]:,.0f}–{v[2]:,.0f})" if v else "—"

print("| operation | aws-lc-rs op/s | libcrypto 3.0 op/s | aws-lc-rs / libcrypto |")
print("|---|---:|---:|---:|")
for op, libs in rows.items():
    a, o = libs.get("aws-lc-rs"), libs.get("openssl")
    ratio = f"{a[0] / o[0]:.2f}x" if a and o else "one library"
    print(f"| {op} | {cell(a)} | {cell(o)} | {ratio} |")
