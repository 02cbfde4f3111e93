#!/usr/bin/env python3
"""AEAD ciphers of the `ocf` provider through libcrypto's EVP API, against the default provider.

Usage: evp_aead.py PROVIDER_DIR        ocf.so is loaded from PROVIDER_DIR
       evp_aead.py --self-test-default the default provider stands in for ocf (checks this script)
       evp_aead.py --panic PROVIDER_DIR  with OCF_PROVIDER_PANIC=cipher_update set (a test
                                         build of ocf.so panics in its first update): see below

The `openssl enc` command refuses AEAD ciphers, so this drives EVP directly (Python 3 stdlib
only: ctypes against libcrypto.so.3; no C compiler needed). Each provider gets its own
OSSL_LIB_CTX holding only that provider, so nothing can quietly fall back to the other.

Block and stream ciphers (AES-128-CBC, AES-256-CTR, DES-EDE3-CBC) are also fed in uneven
pieces with each update in place (input and output the same bytes), which the provider's
buffering of partial blocks must survive; the output must equal the default provider's,
and decrypting the default provider's ciphertext in place must give the plaintext back.
(OpenSSL promises in-place updates only while no partial block is buffered, and its default
provider garbles CBC otherwise; ocf gives the right bytes for any pieces.)

For AES-128-GCM, AES-256-GCM and ChaCha20-Poly1305, and each pair of payload length
(0, 1, 16, 17, 1000) and AAD length (0, 13, 40): encrypt with the AAD fed in two updates and
the payload in two uneven pieces; the ciphertext and tag must equal the default provider's.
Decrypting with the right tag must succeed and give the plaintext back; with one bit of the
tag flipped, EVP_DecryptFinal_ex must fail. One known answer: test case 4 of McGrew & Viega,
"The Galois/Counter Mode of Operation (GCM)", through the provider under test.

With --panic (the provider's boundary, provider/src/boundary.rs): the first update through
ocf panics inside the provider; EVP_EncryptUpdate must return 0 with the panic on OpenSSL's
error queue (not abort this process), the next call on that context must fail saying it
failed earlier, and a new context must seal as the default provider does.

Prints "OK <n> cases" and exits 0, or prints each difference and exits 1.
"""

import ctypes
import ctypes.util
import random
import sys

EVP_CTRL_AEAD_GET_TAG = 0x10
EVP_CTRL_AEAD_SET_TAG = 0x11
TAG_LEN = 16
IV_LEN = 12

CIPHERS = [("AES-128-GCM", 16), ("AES-256-GCM", 32), ("ChaCha20-Poly1305", 32)]
PAYLOAD_LENS = [0, 1, 16, 17, 1000]
AAD_LENS = [0, 13, 40]

# Block and stream ciphers updated in place, in uneven pieces: (name, key, IV, block).
STREAM_CIPHERS = [("AES-128-CBC", 16, 16, 16), ("AES-256-CTR", 32, 16, 1), ("DES-EDE3-CBC", 24, 8, 8)]
STREAM_LENS = [0, 1, 15, 16, 17, 33, 100, 1000]


def uneven_pieces(n):
    """Piece lengths that cross block edges: 1, 15, 17, 3, 32, 7, ... up to n."""
    pattern, out, i = [1, 15, 17, 3, 32, 7], [], 0
    while n > 0:
        p = min(pattern[i % len(pattern)], n)
        out.append(p)
        n -= p
        i += 1
    return out or [0]


# McGrew & Viega, "The Galois/Counter Mode of Operation (GCM)", Appendix B, test case 4.
TC4 = {
    "key": "feffe9928665731c6d6a8f9467308308",
    "iv": "cafebabefacedbaddecaf888",
    "pt": "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
    "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
    "aad": "feedfacedeadbeeffeedfacedeadbeefabaddad2",
    "ct": "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e"
    "21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091",
    "tag": "5bc94fbc3221a5db94fae95ae7121a47",
}


def load_libcrypto():
    name = ctypes.util.find_library("crypto") or "libcrypto.so.3"
    lib = ctypes.CDLL(name)
    vp, ip, cp, i = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_int
    # (name, restype, argtypes): pointer results must be c_void_p or ctypes truncates them.
    for fname, res, args in [
        ("OpenSSL_version", cp, [i]),
        ("OSSL_LIB_CTX_new", vp, []),
        ("OSSL_LIB_CTX_free", None, [vp]),
        ("OSSL_PROVIDER_set_default_search_path", i, [vp, cp]),
        ("OSSL_PROVIDER_load", vp, [vp, cp]),
        ("OSSL_PROVIDER_unload", i, [vp]),
        ("EVP_CIPHER_fetch", vp, [vp, cp, cp]),
        ("EVP_CIPHER_free", None, [vp]),
        ("EVP_CIPHER_CTX_new", vp, []),
        ("EVP_CIPHER_CTX_free", None, [vp]),
        ("EVP_CIPHER_CTX_ctrl", i, [vp, i, i, vp]),
        ("EVP_EncryptInit_ex2", i, [vp, vp, cp, cp, vp]),
        ("EVP_EncryptUpdate", i, [vp, vp, ip, cp, i]),
        ("EVP_EncryptFinal_ex", i, [vp, vp, ip]),
        ("EVP_DecryptInit_ex2", i, [vp, vp, cp, cp, vp]),
        ("EVP_DecryptUpdate", i, [vp, vp, ip, cp, i]),
        ("EVP_DecryptFinal_ex", i, [vp, vp, ip]),
        ("ERR_get_error_all", ctypes.c_ulong, [vp, vp, vp, ctypes.POINTER(cp), ip]),
        ("ERR_error_string_n", None, [ctypes.c_ulong, cp, ctypes.c_size_t]),
        ("ERR_clear_error", None, []),
    ]:
        f = getattr(lib, fname)
        f.restype = res
        f.argtypes = args
    return lib


L = load_libcrypto()


def errors():
    """OpenSSL's error queue as text, each error's data (a provider's message) included (and
    emptied)."""
    out = []
    while True:
        data, flags = ctypes.c_char_p(), ctypes.c_int(0)
        e = L.ERR_get_error_all(None, None, None, ctypes.byref(data), ctypes.byref(flags))
        if not e:
            return "; ".join(out) or "(no error queued)"
        buf = ctypes.create_string_buffer(256)
        L.ERR_error_string_n(e, buf, len(buf))
        text = buf.value.decode(errors="replace")
        if data.value:
            text += ": " + data.value.decode(errors="replace")
        out.append(text)


class Failure(Exception):
    pass


def split(data, at):
    """Two pieces, the first `at` bytes long; empty pieces are left out."""
    return [p for p in (data[:at], data[at:]) if p]


class Provider:
    """One provider alone in its own library context."""

    def __init__(self, name, path=None):
        self.libctx = L.OSSL_LIB_CTX_new()
        if not self.libctx:
            raise Failure("OSSL_LIB_CTX_new: " + errors())
        if path is not None and L.OSSL_PROVIDER_set_default_search_path(self.libctx, path.encode()) != 1:
            raise Failure(f"OSSL_PROVIDER_set_default_search_path({path}): " + errors())
        self.prov = L.OSSL_PROVIDER_load(self.libctx, name.encode())
        if not self.prov:
            raise Failure(f"OSSL_PROVIDER_load({name}): " + errors())
        self.name = name
        self.ciphers = {}
        self.last_error = ""  # OpenSSL's errors from the last final that failed

    def cipher(self, name):
        if name not in self.ciphers:
            c = L.EVP_CIPHER_fetch(self.libctx, name.encode(), None)
            if not c:
                raise Failure(f"{self.name}: EVP_CIPHER_fetch({name}): " + errors())
            self.ciphers[name] = c
        return self.ciphers[name]

    def close(self):
        for c in self.ciphers.values():
            L.EVP_CIPHER_free(c)
        self.ciphers = {}
        if self.prov:
            L.OSSL_PROVIDER_unload(self.prov)
            self.prov = None
        if self.libctx:
            L.OSSL_LIB_CTX_free(self.libctx)
            self.libctx = None

    def _run(self, alg, key, iv, aad, data, decrypt, tag=None):
        """One message; returns (output, tag or None, final's return value)."""
        init, update, final = (
            (L.EVP_DecryptInit_ex2, L.EVP_DecryptUpdate, L.EVP_DecryptFinal_ex)
            if decrypt
            else (L.EVP_EncryptInit_ex2, L.EVP_EncryptUpdate, L.EVP_EncryptFinal_ex)
        )
        what = f"{self.name} {alg} {'decrypt' if decrypt else 'encrypt'} ({len(data)}, aad {len(aad)})"
        ctx = L.EVP_CIPHER_CTX_new()
        if not ctx:
            raise Failure("EVP_CIPHER_CTX_new: " + errors())
        try:
            if init(ctx, self.cipher(alg), key, iv, None) != 1:
                raise Failure(f"{what}: init: " + errors())
            outl = ctypes.c_int(0)
            # The AAD in two updates (out = NULL): providers must accumulate it.
            for piece in split(aad, len(aad) // 3):
                if update(ctx, None, ctypes.byref(outl), piece, len(piece)) != 1:
                    raise Failure(f"{what}: AAD update: " + errors())
            # The payload in two uneven pieces; the output buffer has room for a block more.
            out = b""
            for piece in split(data, len(data) // 3 + 1):
                buf = ctypes.create_string_buffer(len(piece) + 32)
                if update(ctx, buf, ctypes.byref(outl), piece, len(piece)) != 1:
                    raise Failure(f"{what}: update: " + errors())
                out += buf.raw[: outl.value]
            if tag is not None:
                tbuf = ctypes.create_string_buffer(tag, len(tag))
                if L.EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, len(tag), tbuf) != 1:
                    raise Failure(f"{what}: set tag: " + errors())
            buf = ctypes.create_string_buffer(32)
            ok = final(ctx, buf, ctypes.byref(outl))
            if ok == 1:
                out += buf.raw[: outl.value]
            self.last_error = "" if ok == 1 else errors()
            got_tag = None
            if not decrypt:
                if ok != 1:
                    raise Failure(f"{what}: final: {self.last_error}")
                tbuf = ctypes.create_string_buffer(TAG_LEN)
                if L.EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, TAG_LEN, tbuf) != 1:
                    raise Failure(f"{what}: get tag: " + errors())
                got_tag = tbuf.raw
            L.ERR_clear_error()
            return out, got_tag, ok
        finally:
            L.EVP_CIPHER_CTX_free(ctx)

    def stream_in_place(self, alg, key, iv, data, pieces, decrypt):
        """A block or stream cipher fed `pieces` (lengths) of `data`, each update in place:
        the input and output of EVP_CipherUpdate are the same bytes (as `openssl speed` and
        many applications call it). Returns the output, or None if the final call failed."""
        ctx = L.EVP_CIPHER_CTX_new()
        try:
            init = L.EVP_DecryptInit_ex2 if decrypt else L.EVP_EncryptInit_ex2
            update = L.EVP_DecryptUpdate if decrypt else L.EVP_EncryptUpdate
            final = L.EVP_DecryptFinal_ex if decrypt else L.EVP_EncryptFinal_ex
            if init(ctx, self.cipher(alg), key, iv, None) != 1:
                raise Failure(f"{self.name} {alg}: init: " + errors())
            out, at, outl = b"", 0, ctypes.c_int(0)
            for n in pieces:
                # Room for a block more than the piece, as EVP asks of callers.
                buf = ctypes.create_string_buffer(data[at : at + n], n + 32)
                if update(ctx, buf, ctypes.byref(outl), buf, n) != 1:
                    raise Failure(f"{self.name} {alg}: update in place: " + errors())
                out += buf.raw[: outl.value]
                at += n
            buf = ctypes.create_string_buffer(32)
            if final(ctx, buf, ctypes.byref(outl)) != 1:
                L.ERR_clear_error()
                return None
            return out + buf.raw[: outl.value]
        finally:
            L.EVP_CIPHER_CTX_free(ctx)

    def seal(self, alg, key, iv, aad, pt):
        out, tag, _ = self._run(alg, key, iv, aad, pt, decrypt=False)
        return out, tag

    def open(self, alg, key, iv, aad, ct, tag):
        """(plaintext, final's return value)."""
        out, _, ok = self._run(alg, key, iv, aad, ct, decrypt=True, tag=tag)
        return out, ok


def panic_check(path):
    """The --panic run (see the module documentation). Returns the failures."""
    ocf, reference = Provider("ocf", path), Provider("default")
    failures = []
    try:
        rng = random.Random("panic")
        key, iv, aad, pt = rng.randbytes(16), rng.randbytes(IV_LEN), rng.randbytes(13), rng.randbytes(100)
        ctx = L.EVP_CIPHER_CTX_new()
        try:
            if L.EVP_EncryptInit_ex2(ctx, ocf.cipher("AES-128-GCM"), key, iv, None) != 1:
                raise Failure("init: " + errors())
            outl, buf = ctypes.c_int(0), ctypes.create_string_buffer(len(pt) + 32)
            ok = L.EVP_EncryptUpdate(ctx, buf, ctypes.byref(outl), pt, len(pt))
            queued = errors()
            if ok != 0 or "internal error (a panic) in cipher_update" not in queued:
                failures.append(f"the update that panicked returned {ok}, queued: {queued}")
            ok = L.EVP_EncryptFinal_ex(ctx, buf, ctypes.byref(outl))
            queued = errors()
            if ok != 0 or "this context failed earlier" not in queued:
                failures.append(f"the next call on that context returned {ok}, queued: {queued}")
        finally:
            L.EVP_CIPHER_CTX_free(ctx)
        ct, tag = ocf.seal("AES-128-GCM", key, iv, aad, pt)
        if (ct, tag) != reference.seal("AES-128-GCM", key, iv, aad, pt):
            failures.append("a new context after the panic: not the default provider's ciphertext")
    except Failure as e:
        failures.append(str(e))
    finally:
        ocf.close()
        reference.close()
    return failures


def main(argv):
    if len(argv) == 3 and argv[1] == "--panic":
        failures = panic_check(argv[2])
        for f in failures:
            print("FAIL", f)
        print("OK 3 cases" if not failures else f"{len(failures)} failures")
        return 1 if failures else 0
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    print(L.OpenSSL_version(0).decode())
    self_test = argv[1] == "--self-test-default"
    try:
        under_test = Provider("default") if self_test else Provider("ocf", argv[1])
        reference = Provider("default")
    except Failure as e:
        print("FAIL", e)
        return 1
    failures, cases = [], 0

    def check(cond, msg):
        if not cond:
            failures.append(msg)

    try:
        for alg, key_len in CIPHERS:
            for n in PAYLOAD_LENS:
                for a in AAD_LENS:
                    cases += 1
                    # Deterministic per case, so a failure can be reproduced.
                    rng = random.Random(f"{alg}/{n}/{a}")
                    key, iv = rng.randbytes(key_len), rng.randbytes(IV_LEN)
                    aad, pt = rng.randbytes(a), rng.randbytes(n)
                    label = f"{alg} payload {n} aad {a}"
                    ct, tag = under_test.seal(alg, key, iv, aad, pt)
                    ref_ct, ref_tag = reference.seal(alg, key, iv, aad, pt)
                    check(ct == ref_ct, f"{label}: ciphertext {ct.hex()} != default's {ref_ct.hex()}")
                    check(tag == ref_tag, f"{label}: tag {tag.hex()} != default's {ref_tag.hex()}")
                    got, ok = under_test.open(alg, key, iv, aad, ref_ct, ref_tag)
                    check(
                        ok == 1,
                        f"{label}: decrypt with the right tag: final returned {ok}: {under_test.last_error}",
                    )
                    check(got == pt, f"{label}: decrypted {got.hex()} != plaintext {pt.hex()}")
                    bad_tag = bytes([ref_tag[0] ^ 0x01]) + ref_tag[1:]
                    _, ok = under_test.open(alg, key, iv, aad, ref_ct, bad_tag)
                    check(ok <= 0, f"{label}: decrypt with a flipped tag bit: final returned {ok}")
                    # The reference agrees that the tag is wrong (a check on this script).
                    _, ok = reference.open(alg, key, iv, aad, ref_ct, bad_tag)
                    check(ok <= 0, f"{label}: default accepted a flipped tag bit")

        for alg, key_len, iv_len, block in STREAM_CIPHERS:
            for n in STREAM_LENS:
                cases += 1
                rng = random.Random(f"{alg}/{n}/in-place")
                key, iv, pt = rng.randbytes(key_len), rng.randbytes(iv_len), rng.randbytes(n)
                # EVP promises in-place updates only when no partial block is buffered
                # (EVP_EncryptInit(3)), and the default provider garbles the rest; ocf
                # handles any pieces, so only ocf gets the uneven ones.
                uneven = uneven_pieces if not self_test else (lambda m: [m])
                pieces = uneven(n)
                label = f"{alg} {n} bytes in place as {pieces}"
                ct = under_test.stream_in_place(alg, key, iv, pt, pieces, decrypt=False)
                ref = reference.stream_in_place(alg, key, iv, pt, [n], decrypt=False)
                check(ct == ref, f"{label}: ciphertext differs from the default provider's")
                if ref is None:
                    continue
                back = under_test.stream_in_place(alg, key, iv, ref, uneven(len(ref)), decrypt=True)
                check(back == pt, f"{label}: decrypting the default provider's ciphertext in place")

        cases += 1
        t = {k: bytes.fromhex(v) for k, v in TC4.items()}
        ct, tag = under_test.seal("AES-128-GCM", t["key"], t["iv"], t["aad"], t["pt"])
        check(ct == t["ct"], f"GCM test case 4: ciphertext {ct.hex()} != {TC4['ct']}")
        check(tag == t["tag"], f"GCM test case 4: tag {tag.hex()} != {TC4['tag']}")
        got, ok = under_test.open("AES-128-GCM", t["key"], t["iv"], t["aad"], t["ct"], t["tag"])
        check(ok == 1 and got == t["pt"], f"GCM test case 4: decrypt: final {ok}, {got.hex()}")
    except Failure as e:
        failures.append(str(e))
    finally:
        under_test.close()
        reference.close()

    for f in failures:
        print("FAIL", f)
    if failures:
        print(f"{len(failures)} failures in {cases} cases")
        return 1
    print(f"OK {cases} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
