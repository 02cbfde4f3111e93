#!/usr/bin/env python3
"""One end of a TLS connection over Python's ssl module (the system's libssl), for the
provider's TLS tests: which provider does the record encryption is up to OPENSSL_CONF.

Usage: tls_peer.py server --cert C --key K [common options]     prints "PORT n", serves once
       tls_peer.py client --port N [common options]
Common options: --version 1.2|1.3, --cipher OPENSSL-NAME (TLS 1.2 suites; TLS 1.3 suites come
from the configuration's Ciphersuites), --no-etm (no encrypt-then-MAC extension: TLS 1.2 CBC
suites then MAC before encrypting), --bytes N.

The client sends N deterministic bytes in writes of uneven sizes (so records of many lengths
and paddings cross the wire); the server answers with their SHA-256 and the same bytes
reversed, and the client checks both. Each end prints "OK <version> <cipher>" and exits 0,
or prints what went wrong and exits 1.
"""

import argparse
import hashlib
import socket
import ssl
import sys

SSL_OP_NO_ENCRYPT_THEN_MAC = 0x00080000  # OpenSSL's SSL_OP_NO_ENCRYPT_THEN_MAC
WRITES = [1, 100, 1000, 16384, 5, 300, 70000]


def payload(n):
    out, x = bytearray(), 0x9E3779B97F4A7C15
    while len(out) < n:
        x = (x * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
        out += x.to_bytes(8, "little")
    return bytes(out[:n])


def context(a, server):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    v = ssl.TLSVersion.TLSv1_2 if a.version == "1.2" else ssl.TLSVersion.TLSv1_3
    ctx.minimum_version = ctx.maximum_version = v
    if a.cipher:
        ctx.set_ciphers(a.cipher)
    if a.no_etm:
        ctx.options |= SSL_OP_NO_ENCRYPT_THEN_MAC
    if server:
        ctx.load_cert_chain(a.cert, a.key)
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def recv_exactly(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(65536, n - len(buf)))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def send_uneven(s, data):
    at, i = 0, 0
    while at < len(data):
        n = WRITES[i % len(WRITES)]
        s.sendall(data[at : at + n])
        at += n
        i += 1


def server(a):
    ctx = context(a, server=True)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        print(f"PORT {listener.getsockname()[1]}", flush=True)
        listener.settimeout(20)
        conn, _ = listener.accept()
        conn.settimeout(20)
        with ctx.wrap_socket(conn, server_side=True) as s:
            data = recv_exactly(s, a.bytes)
            s.sendall(hashlib.sha256(data).digest())
            send_uneven(s, data[::-1])
            print(f"OK {s.version()} {s.cipher()[0]}", flush=True)


def client(a):
    ctx = context(a, server=False)
    data = payload(a.bytes)
    with socket.create_connection(("127.0.0.1", a.port), timeout=20) as raw:
        with ctx.wrap_socket(raw) as s:
            send_uneven(s, data)
            digest = recv_exactly(s, 32)
            back = recv_exactly(s, a.bytes)
            if digest != hashlib.sha256(data).digest():
                print("FAIL the server's SHA-256 of what was sent differs")
                return 1
            if back != data[::-1]:
                print("FAIL the bytes sent back differ")
                return 1
            print(f"OK {s.version()} {s.cipher()[0]}", flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["server", "client"])
    ap.add_argument("--port", type=int)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--version", choices=["1.2", "1.3"], default="1.3")
    ap.add_argument("--cipher")
    ap.add_argument("--no-etm", action="store_true")
    ap.add_argument("--bytes", type=int, default=100_000)
    a = ap.parse_args()
    try:
        return server(a) or 0 if a.role == "server" else client(a)
    except (OSError, ssl.SSLError, ConnectionError) as e:
        print(f"FAIL {type(e).__name__}: {e}", flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
