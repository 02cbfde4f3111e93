#!/usr/bin/env bash
# Rerun everything (~6-7 min on the quiet 2-core Zen 5 VM; longer if the machine is busy, because
# busy rounds are discarded and repeated):
#  * builds the default and the target-cpu=native variant,
#  * runs the Rust benchmark 3x (default build, all libraries) interleaved with 3x the
#    native build (RustCrypto rows only), pinned to CPU 1; rounds during which the other CPU
#    was >10% busy are discarded and repeated (see src/main.rs),
#  * runs `openssl speed` references (3x each, median), waiting for a quiet machine first,
#  * runs a finer size sweep for the algorithms whose winner changes with size,
#  * regenerates REPORT.auto.md and SWEEP.auto.md (tables only).
set -euo pipefail
cd "$(dirname "$0")"
ROUNDS=${ROUNDS:-15}
TARGET_MS=${TARGET_MS:-10}
CPU=${CPU:-1}
PIN="taskset -c $CPU"
cargo build --release -q
RUSTFLAGS="-C target-cpu=native" CARGO_TARGET_DIR=target-native cargo build --release -q
rm -rf results && mkdir -p results
{ date -u; uname -a; grep -m1 'model name' /proc/cpuinfo; nproc; rustc --version; openssl version;
  uptime; } > results/env.txt
for i in 1 2 3; do
  echo "== default build, run $i" >&2
  $PIN ./target/release/libbench --rounds "$ROUNDS" --target-ms "$TARGET_MS" > "results/default.$i.tsv"
  echo "== native build (RustCrypto only), run $i" >&2
  $PIN ./target-native/release/libbench --rounds "$ROUNDS" --target-ms "$TARGET_MS" --only rustcrypto > "results/native.$i.tsv"
  uptime >> results/env.txt
done
echo "== size sweep (crossover search) for the algorithms whose winner changes with size" >&2
$PIN ./target/release/libbench --rounds "$ROUNDS" --target-ms "$TARGET_MS" \
    --filter chacha20-poly1305,sha384,sha512,md5,hmac-md5,hmac-sha512 \
    --sizes 16,64,128,256,512,1024,2048,4096,8192 > results/sweep.1.tsv
echo "== openssl speed" >&2
SP=results/openssl_speed.txt; : > "$SP"
for rep in 1 2 3; do
  for sz in 16 1024 8192; do
    q=$(python3 quiet.py "$CPU" 20)   # wait (<=20 s) for the other CPU to be idle
    for spec in "-evp aes-128-gcm" "-evp chacha20-poly1305" \
                "-evp aes-128-cbc" "-decrypt -evp aes-128-cbc" "-evp aes-128-ctr" "-evp des-ede3-cbc" \
                "-evp sha1" "-evp sha256" "-evp sha512" "-evp md5" \
                "-hmac sha1" "-hmac sha256" "-hmac sha512" "-hmac md5"; do
      r=$($PIN openssl speed -elapsed -seconds 1 -bytes "$sz" -mr $spec 2>/dev/null | grep '^+F:' | tail -1)
      printf '%s\t%s\t%s\t%s\n' "$spec" "$sz" "$r" "$q" >> "$SP"
    done
  done
done
uptime >> results/env.txt
python3 report.py > REPORT.auto.md
python3 sweep_report.py > SWEEP.auto.md
echo "wrote REPORT.auto.md and SWEEP.auto.md (REPORT.md is the hand-written summary of the 2026-11-22 run)" >&2
