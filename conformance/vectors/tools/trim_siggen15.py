#!/usr/bin/env python3
"""Trims NIST CAVP's SigGen15_186-2.txt (RSA PKCS#1 v1.5 signature generation, as shipped
in cryptography-vectors 50.0.2 at asymmetric/RSA/FIPS_186-2/) to what ocf offers: the
2048-, 3072- and 4096-bit keys (n, e, d) and their SHA-256, SHA-384 and SHA-512 entries.
Line endings become LF and a comment saying so is added at the top.

    python3 trim_siggen15.py ORIGINAL.txt ../nist/rsa/SigGen15_186-2.txt
"""

import sys

KEEP_MODS = {"2048", "3072", "4096"}
KEEP_HASHES = {"SHA256", "SHA384", "SHA512"}


def blocks(lines):
    """Yields runs of non-blank lines."""
    block = []
    for line in lines:
        if line.strip():
            block.append(line)
        elif block:
            yield block
            block = []
    if block:
        yield block


def main(src, dst):
    lines = open(src, newline="").read().replace("\r\n", "\n").split("\n")
    out = [
        "# NIST CAVP SigGen15_186-2.txt (RSA PKCS#1 v1.5 signature generation), trimmed by",
        "# conformance/vectors/tools/trim_siggen15.py to the 2048-, 3072- and 4096-bit keys and",
        "# their SHA-256/384/512 entries; CRLF line endings converted to LF.",
        "",
    ]
    mod = None
    for block in blocks(lines):
        first = block[0]
        if first.startswith("#"):
            out.extend(block + [""])
        elif first.startswith("[mod"):
            mod = first.split("=")[1].strip(" ]")
            if mod in KEEP_MODS:
                out.extend(block + [""])
        elif mod not in KEEP_MODS:
            continue
        elif first.startswith("SHAAlg"):
            if first.split("=")[1].strip() in KEEP_HASHES:
                out.extend(block + [""])
        else:
            out.extend(block + [""])
    open(dst, "w").write("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
