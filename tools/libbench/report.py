#!/usr/bin/env python3
"""Aggregate results/*.tsv + results/openssl_speed.txt into markdown tables (stdout)."""
import glob, statistics as st, collections, os

META = []
SIZES = [16, 1024, 8192]
SZN = {16: "16 B", 1024: "1 KiB", 8192: "8 KiB"}

def load(pattern, tag):
    runs = collections.defaultdict(list)  # key -> list of per-run sample lists
    for f in sorted(glob.glob(pattern)):
        for line in open(f):
            if line.startswith("#"):
                META.append((os.path.basename(f), line.strip()))
                continue
            alg, d, lib, size, samples = line.rstrip("\n").split("\t")
            if tag and d != "base":
                lib = lib + " " + tag
            runs[(alg, d, lib, int(size))].append([float(x) for x in samples.split(",")])
    return runs

data = load("results/default.*.tsv", "")
native = load("results/native.*.tsv", "[target-cpu=native]")
for k, v in native.items():
    if k[1] == "base":
        continue
    data[k] = v

def stats(runs):
    allv = [x for r in runs for x in r]
    med = st.median(allv)
    rmeds = [st.median(r) for r in runs]
    spread = (max(rmeds) - min(rmeds)) / med * 100 if len(rmeds) > 1 else float("nan")
    return med, spread, len(allv)

S = {k: stats(v) for k, v in data.items()}

def mbps(size, ns):
    return size * 1000.0 / ns

groups = collections.OrderedDict()
for (alg, d, lib, size) in data:
    groups.setdefault((alg, d), [])
    if lib not in groups[(alg, d)]:
        groups[(alg, d)].append(lib)

TITLE = {"enc": "encrypt", "dec": "decrypt", "base": "baseline"}
out = []
def p(s=""):
    out.append(s)

winners = {}
for (alg, d), libs in groups.items():
    if alg.startswith("hmac") or alg in ("sha1", "sha256", "sha384", "sha512", "md5"):
        title = alg.upper().replace("HMAC-", "HMAC-")
    elif alg == "aes-128-ctr":
        title = "AES-128-CTR (encrypt = decrypt)"
    else:
        title = f"{alg.upper()} {TITLE[d]}"
    p(f"### {title}")
    p()
    p("| library / API | " + " | ".join(SZN[s] for s in SIZES) + " |")
    p("|---|" + "---:|" * len(SIZES))
    best = {}
    bestnat = {}
    for s in SIZES:
        cand = [(S[(alg, d, l, s)][0], l) for l in libs if (alg, d, l, s) in S and "native" not in l]
        cand.sort()
        best[s] = cand
        nat = [(S[(alg, d, l, s)][0], l) for l in libs if (alg, d, l, s) in S and "native" in l]
        nat.sort()
        bestnat[s] = nat[0] if nat else None
    for l in libs:
        cells = []
        for s in SIZES:
            k = (alg, d, l, s)
            if k not in S:
                cells.append("–"); continue
            med, spr, n = S[k]
            v = f"{mbps(s, med):,.0f} MB/s<br>{med:,.1f} ns, ±{spr/2:.0f}%"
            if d != "base" and best[s] and best[s][0][1] == l:
                v = f"**{mbps(s, med):,.0f} MB/s**<br>{med:,.1f} ns, ±{spr/2:.0f}%"
            cells.append(v)
        p(f"| {l} | " + " | ".join(cells) + " |")
    p()
    if d != "base":
        w = []
        for s in SIZES:
            c = best[s]
            if not c:
                continue
            fam = lambda l: l.split(" ")[0].replace("openssl-sys", "openssl")
            first = c[0]
            others = [x for x in c[1:] if fam(x[1]) != fam(first[1])]
            second = others[0] if others else None
            if second:
                ratio = second[0] / first[0]
                t = f"{SZN[s]}: **{first[1]}** (best other library: {second[1]}, {ratio:.2f}x slower)"
            else:
                t = f"{SZN[s]}: **{first[1]}**"
            if bestnat[s] and bestnat[s][0] < first[0]:
                t += f" [native-built RustCrypto would be {first[0]/bestnat[s][0]:.2f}x faster than that]"
            w.append(t)
        winners[(alg, d)] = best
        p("Fastest (default build) — " + "; ".join(w))
        p()

# openssl speed
sp = "results/openssl_speed.txt"
if os.path.exists(sp):
    p("### `openssl speed` reference (OpenSSL 3.0.19 CLI, same machine, `-elapsed -seconds 1 -bytes N`, median of 3)")
    p()
    p("| openssl speed args | " + " | ".join(SZN[s] for s in SIZES) + " |")
    p("|---|" + "---:|" * len(SIZES))
    rows = collections.OrderedDict()
    for line in open(sp):
        spec, size, rest, busy = line.rstrip("\n").split("\t")
        val = float(rest.split(":")[-1]) if rest else float("nan")
        rows.setdefault(spec, {}).setdefault(int(size), []).append(val)
    for spec, v in rows.items():
        cells = []
        for s in SIZES:
            vals = [x for x in v.get(s, []) if x == x]
            bps = st.median(vals) if vals else float("nan")
            cells.append(f"{bps/1e6:,.0f} MB/s<br>{s/bps*1e9:,.1f} ns" if bps == bps and bps > 0 else "–")
        p(f"| `{spec}` | " + " | ".join(cells) + " |")
    p()

p("Run metadata: " + "; ".join(f"{f}: {m}" for f, m in META))
print("\n".join(out))
