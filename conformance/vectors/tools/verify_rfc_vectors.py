#!/usr/bin/env python3
"""Checks every vector in conformance/vectors/rfc/ against implementations independent of
ocf: Python's hashlib and hmac, the pyca `cryptography` package (also for X25519 and
Ed25519), and the openssl CLI.

The RFC vectors were typed by hand; this is how they were checked before being kept.
It is not part of `cargo test` (it needs Python packages the build does not); run it after
editing a file in vectors/rfc/:

    python3 conformance/vectors/tools/verify_rfc_vectors.py

Exit status 0 and one "ok" line per file when every vector agrees.
"""

import hashlib
import hmac
import pathlib
import shutil
import subprocess
import sys

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, x25519
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

RFC_DIR = pathlib.Path(__file__).resolve().parent.parent / "rfc"


def entries(path):
    """Minimal .rsp reader: yields (section words, {field: value}) per entry."""
    section, fields = [], {}
    run_of_headers = False
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line.startswith("#"):
            continue
        if not line:
            if fields:
                yield list(section), fields
                fields = {}
            continue
        if line.startswith("["):
            if fields:
                yield list(section), fields
                fields = {}
            if not run_of_headers:
                section = []
            run_of_headers = True
            section.append(line.strip("[]"))
            continue
        run_of_headers = False
        name, _, value = line.partition("=")
        fields[name.strip().upper()] = value.strip()
    if fields:
        yield list(section), fields


def b(fields, name):
    return bytes.fromhex(fields.get(name, ""))


def openssl_enc(cipher, key, iv, data):
    out = subprocess.run(
        ["openssl", "enc", "-e", "-" + cipher, "-K", key.hex(), "-iv", iv.hex(), "-nopad"],
        input=data, capture_output=True, check=True)
    return out.stdout


def check_cbc(path):
    for _, f in entries(path):
        key, iv, pt, ct = b(f, "KEY"), b(f, "IV"), b(f, "PLAINTEXT"), b(f, "CIPHERTEXT")
        enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
        assert enc.update(pt) + enc.finalize() == ct, (path.name, f["COUNT"], "cryptography")
        assert openssl_enc(f"aes-{len(key) * 8}-cbc", key, iv, pt) == ct, (path.name, f["COUNT"], "openssl")


def check_ctr(path):
    for _, f in entries(path):
        key, pt, ct = b(f, "KEY"), b(f, "PLAINTEXT"), b(f, "CIPHERTEXT")
        counter = b(f, "NONCE") + b(f, "IV") + bytes.fromhex("00000001") if "NONCE" in f else b(f, "IV")
        enc = Cipher(algorithms.AES(key), modes.CTR(counter)).encryptor()
        assert enc.update(pt) + enc.finalize() == ct, (path.name, f["COUNT"], "cryptography")
        assert openssl_enc(f"aes-{len(key) * 8}-ctr", key, counter, pt) == ct, (path.name, f["COUNT"], "openssl")


def check_chacha(path):
    for _, f in entries(path):
        sealed = ChaCha20Poly1305(b(f, "KEY")).encrypt(b(f, "NONCE"), b(f, "PLAINTEXT"), b(f, "AAD"))
        assert sealed == b(f, "CIPHERTEXT") + b(f, "TAG"), (path.name, f["COUNT"])


def check_md5(path):
    for _, f in entries(path):
        msg = b(f, "MSG")[: int(f["LEN"]) // 8]
        assert hashlib.md5(msg).hexdigest() == f["MD"], (path.name, f["COUNT"])


def check_hmac(path):
    digests = {"HMAC-MD5": "md5", "HMAC-SHA1": "sha1", "HMAC-SHA256": "sha256",
               "HMAC-SHA384": "sha384", "HMAC-SHA512": "sha512"}
    for section, f in entries(path):
        mac = b(f, "MAC")
        full = hmac.new(b(f, "KEY"), b(f, "DATA"), digests[section[0]]).digest()
        assert full[: len(mac)] == mac, (path.name, section, f["COUNT"])


def check_null(path):
    for _, f in entries(path):
        assert b(f, "PLAINTEXT") == b(f, "CIPHERTEXT"), (path.name, f["COUNT"])


def raw_public(key):
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def check_x25519(path):
    for _, f in entries(path):
        private = x25519.X25519PrivateKey.from_private_bytes(b(f, "PRIVATE"))
        peer = x25519.X25519PublicKey.from_public_bytes(b(f, "PEER"))
        assert private.exchange(peer) == b(f, "SHARED"), (path.name, f["COUNT"])
        if "PUBLIC" in f:
            assert raw_public(private.public_key()) == b(f, "PUBLIC"), (path.name, f["COUNT"])


def check_ed25519(path):
    for _, f in entries(path):
        private = ed25519.Ed25519PrivateKey.from_private_bytes(b(f, "SECRET"))
        assert raw_public(private.public_key()) == b(f, "PUBLIC"), (path.name, f["COUNT"])
        assert private.sign(b(f, "MESSAGE")) == b(f, "SIGNATURE"), (path.name, f["COUNT"])
        # Raises InvalidSignature if it does not verify.
        ed25519.Ed25519PublicKey.from_public_bytes(b(f, "PUBLIC")).verify(b(f, "SIGNATURE"), b(f, "MESSAGE"))


CHECKS = {
    "rfc3602-aes-cbc.txt": check_cbc,
    "sp800-38a-aes-ctr.txt": check_ctr,
    "rfc3686-aes-ctr.txt": check_ctr,
    "rfc8439-chacha20-poly1305.txt": check_chacha,
    "rfc1321-md5.txt": check_md5,
    "rfc2202-hmac.txt": check_hmac,
    "rfc4231-hmac-sha2.txt": check_hmac,
    "rfc2410-null.txt": check_null,
    "rfc7748-x25519.txt": check_x25519,
    "rfc8032-ed25519.txt": check_ed25519,
}


def main():
    if shutil.which("openssl") is None:
        sys.exit("openssl is not on PATH")
    files = sorted(p.name for p in RFC_DIR.glob("*.txt"))
    unchecked = set(files) - set(CHECKS)
    if unchecked:
        sys.exit(f"no check for {sorted(unchecked)}")
    for name in files:
        n = sum(1 for _ in entries(RFC_DIR / name))
        CHECKS[name](RFC_DIR / name)
        print(f"ok {n:3} vectors  {name}")


if __name__ == "__main__":
    main()
