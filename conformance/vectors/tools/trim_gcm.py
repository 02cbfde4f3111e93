#!/usr/bin/env python3
"""Trims NIST CAVP GCM response files (gcmEncryptExtIV*.rsp, gcmDecrypt*.rsp) to what
ocf-conformance needs, so the repository stays small (each original is about 3 MB).

Kept, from each file:
  * every case of the sections with a 96-bit IV and a 128-bit tag (the only GCM
    parameters ocf accepts): 25 sections x 15 cases;
  * case 0 of each section that ocf must reject (IV length other than 96 bits, or tag
    length other than 128 bits, but not both), restricted to PTlen and AADlen in {0, 128}:
    the suite asserts these are rejected with BadIvLength / BadTagLength.

Nothing else is changed except line endings (CRLF -> LF) and one added comment line that
says the file was trimmed. Usage:

    trim_gcm.py ORIGINAL.rsp TRIMMED.rsp
"""

import sys

SMALL_LENGTHS = {"0", "128"}


def sections(lines):
    """Yields (header_lines, cases) where a case is a list of lines."""
    header, cases, case = [], [], []
    for line in lines:
        if line.startswith("["):
            if cases or case:
                if case:
                    cases.append(case)
                yield header, cases
                header, cases, case = [], [], []
            header.append(line)
        elif line.strip() == "":
            if case:
                cases.append(case)
                case = []
        else:
            case.append(line)
    if case:
        cases.append(case)
    if header:
        yield header, cases


def params(header):
    out = {}
    for line in header:
        name, _, value = line.strip("[]").partition("=")
        out[name.strip()] = value.strip()
    return out


def main(src, dst):
    with open(src, newline="") as f:
        lines = [line.rstrip("\r\n") for line in f]
    preamble = []
    while lines and not lines[0].startswith("["):
        if lines[0].strip():
            preamble.append(lines[0])
        lines.pop(0)
    out = preamble + [
        "# Trimmed for ocf-conformance by vectors/tools/trim_gcm.py (see vectors/README.md):",
        "# all cases with IVlen = 96 and Taglen = 128, plus Count = 0 of the other IV/tag",
        "# length sections with PTlen and AADlen in {0, 128}.",
        "",
    ]
    for header, cases in sections(lines):
        p = params(header)
        iv96, tag128 = p["IVlen"] == "96", p["Taglen"] == "128"
        if iv96 and tag128:
            keep = cases
        elif (iv96 or tag128) and p["PTlen"] in SMALL_LENGTHS and p["AADlen"] in SMALL_LENGTHS:
            keep = cases[:1]
        else:
            continue
        out += header + [""]
        for case in keep:
            out += case + [""]
    with open(dst, "w", newline="\n") as f:
        f.write("\n".join(out).rstrip("\n") + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
