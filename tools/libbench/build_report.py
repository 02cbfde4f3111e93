#!/usr/bin/env python3
"""Assemble REPORT.md = hand-written summary + tables from REPORT.auto.md / SWEEP.auto.md."""
import re, collections

auto = open("REPORT.auto.md").read()
sweep = open("SWEEP.auto.md").read()

# split REPORT.auto.md into sections keyed by their ### title
secs = collections.OrderedDict()
cur = None
for line in auto.splitlines():
    if line.startswith("### "):
        cur = line[4:].strip(); secs[cur] = []
    elif line.startswith("Run metadata"):
        secs["__meta__"] = [line]; cur = None
    elif cur:
        secs[cur].append(line)
def sec(title, heading=None):
    body = "\n".join(secs[title]).strip()
    return f"#### {heading or title}\n\n{body}\n"

ssecs = collections.OrderedDict()
cur = None
for line in sweep.splitlines():
    if line.startswith("#### "):
        cur = line[5:].strip(); ssecs[cur] = []
    elif cur:
        ssecs[cur].append(line)
def ssec(prefix):
    for k, v in ssecs.items():
        if k.startswith(prefix):
            body = "\n".join(v).strip()
            body = re.sub(r"\n\nWinner by size:.*", "", body, flags=re.S)
            return f"Size sweep ({k.split(' — ')[0]}, MB/s, bold = fastest; 2 extra processes, 15 rounds each):\n\n{body}\n"
    return ""

OUT = []
def w(s=""):
    OUT.append(s)

w(open("report_header.md").read().rstrip() + "\n")

REC = collections.OrderedDict([
 ("AES-128-GCM", (["AES-128-GCM encrypt", "AES-128-GCM decrypt"], [],
  "**Recommendation — AES-128-GCM: aws-lc-rs `LessSafeKey` at every size** (1.86–2.5x the next library at 16 B / 1 KiB / 8 KiB, encrypt and decrypt). No size threshold. OpenSSL is only competitive with a reused `CipherCtx`; a fresh context per message costs ~+480 ns at 16 B and ~+620 ns at 1–8 KiB, of which ~250–400 ns is the implicit `EVP_CIPHER` fetch done when a legacy `Cipher::aes_128_gcm()` is passed (a `Cipher::fetch`ed cipher held across messages avoids it). RustCrypto `aes-gcm` is 2.2 GB/s at 8 KiB in the default build (3.2 GB/s with target-cpu=native), far from aws-lc-rs's ~10 GB/s.")),
 ("ChaCha20-Poly1305", (["CHACHA20-POLY1305 encrypt", "CHACHA20-POLY1305 decrypt"], ["chacha20-poly1305 enc", "chacha20-poly1305 dec"],
  "**Recommendation — ChaCha20-Poly1305: aws-lc-rs `LessSafeKey` up to 1 KiB, OpenSSL (reused `CipherCtx`, re-init with IV only) from 2 KiB.** The winner changes with size: aws-lc-rs is 2.5x faster at 16 B and still ahead at 512 B (1.6x) and 1 KiB (1.04–1.12x, i.e. close to noise); at 2 KiB the two are close (OpenSSL +3% encrypt, +7% decrypt), at 4 KiB OpenSSL leads by ~1.2x and at 8 KiB by ~1.3x (aws-lc-rs flattens at ~2.3 GB/s, OpenSSL reaches ~3.1 GB/s). A threshold of **≥ 2048 B → OpenSSL** fits the sweep; if you'd rather not carry OpenSSL for this, aws-lc-rs alone loses at most ~26% (8 KiB). RustCrypto `chacha20poly1305` is last at every size (its fixed cost is ~1.2 µs/message in the default build; not investigated further).")),
 ("AES-128-CBC", (["AES-128-CBC encrypt", "AES-128-CBC decrypt"], [],
  "**Recommendation — AES-128-CBC (no padding): aws-lc-rs `EncryptingKey::cbc` / `DecryptingKey::cbc` (unpadded; `less_safe_encrypt` with an explicit `EncryptionContext::Iv128`) at every size.** Encrypt: 1.5x the next at 16 B, 1.18x at 1 KiB, only 1.03x over OpenSSL at 8 KiB (CBC encryption is serial, everyone is bound by AES-round latency: 1.1–1.4 GB/s). Decrypt: 2.4x / 2.0x / 1.17x. No threshold. RustCrypto: cloning `Aes128Enc`/`Aes128Dec`, cloning a combined `Aes128`, or borrowing `&Aes128` (cipher 0.5 implements the block-cipher traits for `&T`, so `cbc::Encryptor::<&Aes128>::inner_iv_init(&key, iv)` needs no clone) are all within noise of each other. With target-cpu=native RustCrypto would win at 16 B (14 ns vs 36 ns), i.e. the default build pays ~40 ns/message for the runtime-dispatched AES path.")),
 ("AES-128-CTR", (["AES-128-CTR (encrypt = decrypt)"], [],
  "**Recommendation — AES-128-CTR: aws-lc-rs `EncryptingKey::ctr` at every size** (1.7x the next at 16 B, 1.4x at 1 KiB, 1.08x over OpenSSL at 8 KiB). No threshold. (aws-lc-rs uses `AES_ctr128_encrypt`, a full 128-bit big-endian counter — same as `ctr::Ctr128BE` and OpenSSL's `aes-128-ctr`; outputs were cross-checked equal.)")),
 ("3DES-CBC", (["DES-EDE3-CBC encrypt", "DES-EDE3-CBC decrypt"], [],
  "**Recommendation — 3DES-CBC: aws-lc-rs (feature `legacy-des`, `DES_EDE3_FOR_LEGACY_USE_ONLY`, `EncryptingKey::cbc`) at every size** (1.33–1.35x OpenSSL at 16 B, 1.05–1.10x at ≥ 1 KiB, ~2.7x RustCrypto `des`). Note aws-lc-rs rejects weak/semi-weak and non-distinct 3DES subkeys at key construction. RustCrypto `des` gets *slower* with target-cpu=native (12 → 8 MB/s).")),
 ("SHA-1", (["SHA1"], [],
  "**Recommendation — SHA-1: RustCrypto `sha1` (ties aws-lc-rs).** RustCrypto uses SHA-NI (runtime-detected) and aws-lc-rs reaches the same speed; RustCrypto is 2–3% ahead at 16 B / 1 KiB and equal at 8 KiB — a tie within noise, so pick on other grounds (RustCrypto = pure Rust, no FFI). OpenSSL via the `openssl` crate pays ~170–200 ns/message extra in `hash()`/`Hasher` (implicit `EVP_MD` fetch in `EVP_DigestInit_ex` with a legacy `MessageDigest`); with `MdCtx` + `Md::fetch` it is 118 ns at 16 B, still 2x RustCrypto's 58 ns.")),
 ("SHA-256", (["SHA256"], [],
  "**Recommendation — SHA-256: RustCrypto `sha2`** (12% ahead of aws-lc-rs at 16 B; tie at 1 KiB and 8 KiB). No threshold that matters.")),
 ("SHA-384", (["SHA384"], ["sha384"],
  "**Recommendation — SHA-384: OpenSSL (`MdCtx` reused + `Md::fetch(\"SHA384\")`) from 128 B; ≤ 64 B it is a tie** (aws-lc-rs, OpenSSL-MdCtx and RustCrypto within ~15% of each other at 16–64 B, order not stable between runs). At 1 KiB / 8 KiB OpenSSL is 1.4x RustCrypto and aws-lc-rs (which are equal to each other, ~500–560 MB/s). If OpenSSL is not wanted: aws-lc-rs or RustCrypto, losing ~30% at ≥ 1 KiB.")),
 ("SHA-512", (["SHA512"], ["sha512"],
  "**Recommendation — SHA-512: same as SHA-384 — tie ≤ 64 B, OpenSSL (`MdCtx` + `Md::fetch`) from 128 B** (1.38x at 1 KiB, 1.43x at 8 KiB over RustCrypto; aws-lc-rs ≈ RustCrypto).")),
 ("MD5", (["MD5"], ["md5"],
  "**Recommendation — MD5: RustCrypto `md-5` up to 128 B, OpenSSL (`MdCtx` + `Md::fetch(\"MD5\")`) from 256 B.** RustCrypto is 1.26x faster at 16 B; the two are within noise at 128–256 B; OpenSSL leads by 1.07x at 512 B, 1.14x at 1 KiB, 1.18x at 8 KiB. aws-lc-rs has no MD5 (its `digest` module only offers SHA-1/SHA-2/SHA-3).")),
 ("HMAC-SHA1", (["HMAC-SHA1"], [],
  "**Recommendation — HMAC-SHA1: RustCrypto `hmac` (keyed `Hmac<Sha1>` built once, cloned per message) at every size** — 1.5x the next (OpenSSL `HMAC_CTX` via openssl-sys) at 16 B, 1.09x at 1 KiB, tie (1.01x) at 8 KiB. aws-lc-rs `hmac::sign` with a prebuilt `Key` costs ~225 ns at 16 B (vs 110 ns). OpenSSL's safe API (`Signer::new` per message with a `PKey` built once) costs ~3.7 µs/message: unusable for small messages.")),
 ("HMAC-SHA256", (["HMAC-SHA256"], [],
  "**Recommendation — HMAC-SHA256: RustCrypto `hmac` (clone the keyed state) at every size** — 1.43x at 16 B, 1.11x at 1 KiB, tie (1.02x) at 8 KiB over the best OpenSSL path; aws-lc-rs is never ahead.")),
 ("HMAC-SHA512", (["HMAC-SHA512"], ["hmac-sha512"],
  "**Recommendation — HMAC-SHA512: OpenSSL through `openssl-sys` (either `HMAC_CTX` reused with `HMAC_Init_ex(ctx, NULL, 0, NULL, NULL)`, or an `EVP_MAC` ctx re-inited with `EVP_MAC_init(ctx, NULL, 0, NULL)`; the two are within noise) from 256 B; ≤ 128 B it is a tie with RustCrypto (within ~10%).** 1.25x RustCrypto at 256 B, 1.35x at 1 KiB, 1.46x at 8 KiB (the SHA-512 compression function is simply faster in OpenSSL 3.0 here). This needs unsafe FFI: the `openssl` crate has no reusable HMAC (its `Signer` costs ~4.4 µs/message). `HMAC_CTX` is deprecated in OpenSSL 3; prefer `EVP_MAC`. If no FFI is wanted: RustCrypto (aws-lc-rs is slower still).")),
 ("HMAC-MD5", (["HMAC-MD5"], ["hmac-md5"],
  "**Recommendation — HMAC-MD5: tie up to ~128 B (RustCrypto `Hmac<Md5>` vs openssl-sys `HMAC_CTX`, within ~7%, and the order flips between runs), OpenSSL via openssl-sys from 256 B** (1.06x at 256 B, 1.10x at 512 B, 1.13x at 1 KiB, 1.19x at 8 KiB). Keeping RustCrypto for all sizes costs ≤ 16%. aws-lc-rs has no HMAC-MD5.")),
])

w("## Per-algorithm results\n")
w("Cells: median MB/s (bold = fastest default-build entry), then median ns per message, then ±x% = half the range of the three per-process medians (run-to-run noise). `[target-cpu=native]` rows are the extra RustCrypto-only build; they are not considered for the bold winner. The auto-generated \"Fastest\" line compares the best entry with the best entry *from a different library*.\n")
for name, (titles, sweeps, rec) in REC.items():
    w(f"### {name}\n")
    for t in titles:
        w(sec(t))
    for s_ in sweeps:
        w(ssec(s_))
    w(rec + "\n")

w("### Harness baselines\n")
w("These are the costs the harness adds to *every* library equally: the per-call overhead of the timing loop (dynamic closure call), and the `memcpy` of the ciphertext into the work buffer that every AEAD *decrypt* case does before decrypting in place (in-place decryption destroys its input; the restore is included in the AEAD decrypt ns/op of all libraries). Not subtracted from any number.\n")
w(sec("BASELINE baseline", "Baselines"))

w(open("report_speed.md").read().rstrip() + "\n")
w(sec("`openssl speed` reference (OpenSSL 3.0.19 CLI, same machine, `-elapsed -seconds 1 -bytes N`, median of 3)", "openssl speed results"))
w(open("report_asym.md").read().rstrip() + "\n")
w(open("report_tail.md").read().rstrip() + "\n")
w("Run metadata (per result file): " + secs["__meta__"][0].split(":", 1)[1].strip().replace("\t", " ") + "\n")
open("REPORT.md", "w").write("\n".join(OUT))
print("wrote REPORT.md")
