#!/usr/bin/env python3
# An independent ESP and AH peer for ipsec-core's interop tests: scapy's SecurityAssociation
# (scapy 2.8.0 with python-cryptography, installed by scripts/setup into target/peers-venv),
# driven over JSON Lines so that one process serves a whole test binary.
#
# Protocol (one JSON object per line; stdout carries nothing else — anything scapy prints
# goes to stderr):
#   on start   -> {"ready": true, "scapy": "2.8.0", "cryptography": "..."}
#   request    {"op": "encrypt"|"decrypt", "sa": SA, "packet": "<hex>", "iv": "<hex>"?}
#   reply      {"ok": true, "packet": "<hex>", ...}  or  {"ok": false, "error": "..."}
#              error is exactly "integrity" when the ICV (HMAC or AEAD tag) does not verify.
#   SA         {"proto": "esp"|"ah" (default esp), "spi": int, "enc": setkey name, "enc_key": hex (AEAD: key || 4-byte salt),
#               "auth": setkey name | null, "auth_key": hex, "mode": "tunnel"|"transport",
#               "tunnel_src": str, "tunnel_dst": str (tunnel mode; IPv4 or IPv6),
#               "esn": bool, "seq": int (64-bit), "natt": null | {"sport": int, "dport": int}}
#   encrypt    packet: the plaintext IP packet. seq: the 64-bit sequence number of this packet.
#              iv (optional): the explicit IV to put in the packet instead of a random one, so
#              that a test can ask for byte-identical output to another implementation's.
#              Reply packet: outer IP header [, UDP], ESP, as on the wire.
#   decrypt    packet: outer IP header [, UDP], ESP. seq (optional, default 0): a 64-bit
#              sequence number near the packet's; with ESN the packet's number is taken as the
#              one whose low 32 bits are in the packet and which lies nearest to seq (a
#              stand-in for RFC 4303 Appendix A's window-based inference, which needs state).
#              Reply: packet (the decapsulated IP packet), and, for checking the sender's
#              framing, which scapy itself never checks: seq (the 64-bit number used), iv, padding
#              (hex), nh (the trailer's next header).
# SecurityAssociation objects are cached by the SA's JSON without seq; seq and the ESN high
# bits are set on the cached object before each call.
#
# scapy's ESP as read from scapy/layers/ipsec.py (2.8.0) and checked here:
# - Names: aes-gcm-16 -> AES-GCM (16-byte ICV), chacha20-poly1305 -> CHACHA20-POLY1305,
#   aes-cbc -> AES-CBC, 3des-cbc -> 3DES, null -> NULL; hmac-sha1 -> HMAC-SHA1-96,
#   hmac-sha2-256 -> SHA2-256-128, hmac-sha2-384 -> SHA2-384-192, hmac-sha2-512 -> SHA2-512-256.
#   scapy never checks key lengths (CryptAlgo.check_key is not called), so this peer does.
# - Padding: the minimum that makes payload || padding || 2-byte trailer a multiple of
#   lcm(block, 4): 4 for AEAD and NULL (block 1), 16 for AES-CBC, 8 for 3DES. Contents
#   1, 2, 3, ... (RFC 4303 §2.4). On decrypt scapy does not check the padding bytes at all
#   (hence "padding" in the reply) and takes pad length and next header as they come.
# - IVs: always os.urandom(iv_size) unless encrypt() is given one: 16 bytes for AES-CBC,
#   8 for 3DES, 8 for AES-GCM and ChaCha20-Poly1305 (random, not the sequence number —
#   both are allowed; RFC 4106 §3.1 only requires uniqueness), 0 for NULL. AEAD nonce is
#   salt (last 4 key bytes) || IV.
# - Sequence numbers: ESP.seq is a 32-bit field; the high 32 bits are the SA's `esn`
#   attribute (esn_en=True turns their use on). We split seq as seq_num = seq & 0xffffffff,
#   esn = seq >> 32. With ESN, HMAC covers ESP header || IV || ciphertext || esn (4 bytes,
#   big-endian, not sent: RFC 4303 §2.2.1); AEAD AAD is SPI || esn || seq_low (RFC 4106 §5,
#   RFC 7634 §2.1) instead of SPI || seq_low. Without ESN the high bits are ignored, so this
#   peer refuses seq >= 2^32 then. scapy's encrypt(seq_num=, esn=) arguments fall back to
#   the SA's values when given 0 (`seq_num or self.seq_num`), which is why the attributes are
#   set instead.
# - Tunnel mode: outer header is a copy of tunnel_header, IP(src, dst) or IPv6(src, dst) with
#   scapy's defaults (IPv4: ttl 64, id 1, tos 0, DF clear; IPv6: hlim 64, tc 0, flow 0) —
#   nothing is copied from the inner header, so compare outer headers by addresses only.
#   Next header is 4 (IPv4) or 41 (IPv6); all four inner/outer family pairs work. Decrypt
#   returns the inner packet's bytes untouched.
# - Transport mode: IPv4 keeps the header (options included), sets protocol 50 (17 with
#   NAT-T), recomputes total length and checksum. IPv6 inserts ESP after Hop-by-Hop, Routing
#   and Destination Options headers, but stops at a Destination Options header that follows
#   a Routing header (that one, and a Fragment header, go inside ESP), like Linux. Decrypt
#   restores protocol/next header, length and (IPv4) checksum.
# - NAT-T (RFC 3948): nat_t_header=UDP(sport, dport) goes between the outer IP header and
#   ESP, UDP checksum 0, length computed, ESP straight after it (the zero non-ESP marker is
#   for IKE). scapy only recognises ESP in UDP when a port is 4500, so on decrypt this peer
#   reparses the UDP payload as ESP. No checksum fix-up of the inner TCP/UDP in transport
#   mode (RFC 3948 §3.1.2 needs one only behind a NAT). IPv6 transport mode with extension
#   headers and NAT-T is broken in scapy (encrypt leaves the last extension header's next
#   header at 50 with UDP after it; decrypt drops the extension headers), so this peer
#   refuses that combination.
# - Decrypt checks the SPI against the SA, then the ICV (IPSecIntegrityError -> "integrity"),
#   and does no anti-replay.
#
# scapy's AH (RFC 4302), SecurityAssociation(AH, ...), as read from the same file:
# - HMAC-SHA1-96 and the SHA2 HMACs as for ESP; enc must be null with no key, no NAT-T.
# - The ICV covers the packet with scapy's own zero_mutable_fields: IPv4 tos, flags (not the
#   fragment offset: zero in unfragmented packets anyway), ttl, checksum, and every option
#   but the immutable ones (option numbers 0, 1, 2, 5, 6, 20, 21) zeroed whole; IPv6 tc,
#   flow label, hop limit, and in the Hop-by-Hop / Destination Options headers before AH the
#   data of options with the change bit (0x20); a sender's Routing header reordered as it
#   will arrive. The ICV field is zeroed, its padding is not (scapy sends zero padding).
#   ESN: the high 32 bits follow the packet in the MAC.
# - Padding: the ICV field padded with zeros to 4 bytes (IPv4) or 8 (IPv6). Tunnel mode:
#   outer header as for ESP, next header 4 or 41. Transport mode: AH where ESP would go.
# - AES-GMAC (RFC 4543 §4) is not in scapy: GmacAh below plugs into scapy's AH as an
#   AuthAlgo. The ICV field is IV (8 bytes: the 64-bit sequence number, big-endian) then
#   the 16-byte tag; the AAD is scapy's zeroed packet with the IV kept and the tag zeroed,
#   then the ESN high bits; the tag is python-cryptography's AESGCM over an empty
#   plaintext with nonce salt || IV (key material: AES key || 4-byte salt).

import json
import os
import sys


def main():
    # The protocol owns the real stdout; scapy and warnings go to stderr.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    sys.stdout = sys.stderr

    import cryptography
    import scapy
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting
    from scapy.layers.ipsec import (
        AH,
        AUTH_ALGOS,
        ESP,
        AuthAlgo,
        IPSecIntegrityError,
        SecurityAssociation,
        zero_mutable_fields,
    )
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    import struct

    class GmacAh(AuthAlgo):
        """AES-GMAC for AH (RFC 4543 §4) through scapy's AH framing: ICV field = IV || tag."""

        IV = 8
        TAG = 16

        def __init__(self):
            super().__init__("AES-GMAC-AH", mac=None, digestmod=None, icv_size=self.IV + self.TAG)
            self.mac = True  # sign and verify are ours; scapy only asks whether there is one

        def _aad(self, pkt, iv, sending, esn_en, esn):
            clone = zero_mutable_fields(pkt.copy(), sending=sending)
            clone[AH].icv = iv + b"\x00" * self.TAG
            aad = bytes(clone)
            if esn_en:
                aad += struct.pack("!L", esn)
            return aad

        def sign(self, pkt, key, esn_en=False, esn=0):
            iv = struct.pack("!LL", esn if esn_en else 0, pkt[AH].seq)
            aad = self._aad(pkt, iv, True, esn_en, esn)
            tag = AESGCM(key[:-4]).encrypt(key[-4:] + iv, b"", aad)
            pkt[AH].icv = iv + tag
            return pkt

        def verify(self, pkt, key, esn_en=False, esn=0):
            if len(pkt[AH].icv) != self.icv_size:
                pkt[AH].padding = pkt[AH].icv[self.icv_size:]
                pkt[AH].icv = pkt[AH].icv[: self.icv_size]
            iv, tag = pkt[AH].icv[: self.IV], pkt[AH].icv[self.IV :]
            aad = self._aad(pkt, iv, False, esn_en, esn)
            try:
                AESGCM(key[:-4]).decrypt(key[-4:] + iv, tag, aad)
            except InvalidTag:
                raise IPSecIntegrityError("AES-GMAC tag")

    AUTH_ALGOS["AES-GMAC-AH"] = GmacAh()

    ENC = {
        # setkey name: (scapy name, key lengths with salt)
        "aes-gcm-16": ("AES-GCM", (20, 28, 36)),
        "chacha20-poly1305": ("CHACHA20-POLY1305", (36,)),
        "aes-cbc": ("AES-CBC", (16, 24, 32)),
        "3des-cbc": ("3DES", (24,)),
        "null": ("NULL", (0,)),
    }
    AEAD = ("aes-gcm-16", "chacha20-poly1305")
    AUTH = {
        "hmac-sha1": ("HMAC-SHA1-96", 20),
        "hmac-sha2-256": ("SHA2-256-128", 32),
        "hmac-sha2-384": ("SHA2-384-192", 48),
        "hmac-sha2-512": ("SHA2-512-256", 64),
    }
    AH_AUTH = dict(AUTH)
    AH_AUTH["aes-gmac"] = ("AES-GMAC-AH", (20, 28, 36))
    # The extension headers scapy's split_for_transport keeps in front of ESP.
    V6_EXT = (IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, IPv6ExtHdrDestOpt)

    class Refused(Exception):
        pass

    def unhex(obj, field):
        try:
            return bytes.fromhex(obj.get(field) or "")
        except ValueError:
            raise Refused(f"{field}: not hex")

    def family(addr):
        return 6 if ":" in addr else 4

    def build(sa):
        spi = sa["spi"]
        if not 0 < spi < 1 << 32:
            # SPI 0 is reserved (RFC 4303 §2.1); scapy would parse it as a non-ESP marker.
            raise Refused(f"spi {spi} out of range")
        if sa.get("proto", "esp") == "ah":
            return build_ah(sa)
        if sa["enc"] not in ENC:
            raise Refused(f"unknown enc {sa['enc']!r}")
        enc_name, key_lens = ENC[sa["enc"]]
        enc_key = unhex(sa, "enc_key")
        if len(enc_key) not in key_lens:
            raise Refused(f"{sa['enc']}: key of {len(enc_key)} bytes (allowed {key_lens})")
        auth = sa.get("auth")
        if (auth is None) != (sa["enc"] in AEAD):
            raise Refused("an AEAD takes no auth, other ciphers need one")
        auth_name, auth_key = None, None
        if auth is not None:
            if auth not in AUTH:
                raise Refused(f"unknown auth {auth!r}")
            auth_name, key_len = AUTH[auth]
            auth_key = unhex(sa, "auth_key")
            if len(auth_key) != key_len:
                raise Refused(f"{auth}: key of {len(auth_key)} bytes (needs {key_len})")
        tunnel = None
        if sa["mode"] == "tunnel":
            src, dst = sa["tunnel_src"], sa["tunnel_dst"]
            if family(src) != family(dst):
                raise Refused("tunnel endpoints of different families")
            tunnel = IP(src=src, dst=dst) if family(src) == 4 else IPv6(src=src, dst=dst)
        elif sa["mode"] != "transport":
            raise Refused(f"unknown mode {sa['mode']!r}")
        natt = sa.get("natt")
        nat_t_header = None if natt is None else UDP(sport=natt["sport"], dport=natt["dport"])
        return SecurityAssociation(
            ESP,
            spi=spi,
            crypt_algo=enc_name,
            # scapy treats an empty key as "no key"; NULL needs none.
            crypt_key=enc_key or None,
            auth_algo=auth_name,
            auth_key=auth_key,
            tunnel_header=tunnel,
            nat_t_header=nat_t_header,
            esn_en=bool(sa.get("esn")),
            esn=0,
        )

    def tunnel_header(sa):
        if sa["mode"] == "tunnel":
            src, dst = sa["tunnel_src"], sa["tunnel_dst"]
            if family(src) != family(dst):
                raise Refused("tunnel endpoints of different families")
            return IP(src=src, dst=dst) if family(src) == 4 else IPv6(src=src, dst=dst)
        if sa["mode"] != "transport":
            raise Refused(f"unknown mode {sa['mode']!r}")
        return None

    def build_ah(sa):
        if sa["enc"] != "null" or unhex(sa, "enc_key") or sa.get("natt"):
            raise Refused("AH takes no encryption and no NAT-T")
        auth = sa.get("auth")
        if auth not in AH_AUTH:
            raise Refused(f"unknown AH auth {auth!r}")
        name, key_lens = AH_AUTH[auth]
        key_lens = key_lens if isinstance(key_lens, tuple) else (key_lens,)
        auth_key = unhex(sa, "auth_key")
        if len(auth_key) not in key_lens:
            raise Refused(f"{auth}: key of {len(auth_key)} bytes (allowed {key_lens})")
        return SecurityAssociation(
            AH,
            spi=sa["spi"],
            auth_algo=name,
            auth_key=auth_key,
            tunnel_header=tunnel_header(sa),
            esn_en=bool(sa.get("esn")),
            esn=0,
        )

    cache = {}

    def lookup(sa):
        key = json.dumps({k: v for k, v in sa.items() if k != "seq"}, sort_keys=True)
        obj = cache.get(key)
        if obj is None:
            if len(cache) >= 4096:
                cache.clear()
            obj = cache[key] = build(sa)
        return obj

    def parse_ip(data):
        if not data:
            raise Refused("empty packet")
        version = data[0] >> 4
        if version == 4:
            return IP(data)
        if version == 6:
            return IPv6(data)
        raise Refused(f"IP version {version}")

    def encrypt(req):
        sa = req["sa"]
        obj = lookup(sa)
        seq = sa["seq"]
        if not 0 <= seq < 1 << 64 or (not sa.get("esn") and seq >= 1 << 32):
            raise Refused(f"seq {seq} out of range")
        pkt = parse_ip(unhex(req, "packet"))
        if sa["mode"] == "transport" and sa.get("natt") and isinstance(pkt, IPv6):
            if isinstance(pkt.payload, V6_EXT):
                raise Refused("scapy mis-encapsulates IPv6 transport NAT-T with extension headers")
        iv = None
        if req.get("iv") is not None:
            iv = unhex(req, "iv")
            if len(iv) != obj.crypt_algo.iv_size:
                raise Refused(f"iv of {len(iv)} bytes (needs {obj.crypt_algo.iv_size})")
        obj.seq_num = seq & 0xFFFFFFFF
        obj.esn = seq >> 32
        return {"packet": bytes(obj.encrypt(pkt, iv=iv)).hex()}

    def decrypt_ah(sa, obj, pkt):
        if AH not in pkt:
            raise Refused("no AH header")
        low = pkt[AH].seq
        seq = low
        if sa.get("esn"):
            near = sa.get("seq", 0)
            candidates = [((near >> 32) + d) << 32 | low for d in (-1, 0, 1)]
            seq = min((c for c in candidates if 0 <= c < 1 << 64), key=lambda c: abs(c - near))
        obj.esn = seq >> 32
        field = bytes(pkt[AH].icv or b"") + bytes(pkt[AH].padding or b"")
        nh = pkt[AH].nh
        plain = obj.decrypt(pkt)
        size = obj.auth_algo.icv_size
        iv = field[: GmacAh.IV] if isinstance(obj.auth_algo, GmacAh) else b""
        return {"packet": bytes(plain).hex(), "seq": seq, "iv": iv.hex(), "padding": field[size:].hex(), "nh": nh}

    def decrypt(req):
        sa = req["sa"]
        obj = lookup(sa)
        pkt = parse_ip(unhex(req, "packet"))
        if sa.get("proto", "esp") == "ah":
            return decrypt_ah(sa, obj, pkt)
        if sa.get("natt"):
            if UDP not in pkt:
                raise Refused("no UDP header for NAT-T")
            if not isinstance(pkt.payload, UDP):
                raise Refused("scapy drops IPv6 extension headers in front of NAT-T's UDP")
            if ESP not in pkt:
                pkt[UDP].decode_payload_as(ESP)
        if ESP not in pkt:
            raise Refused("no ESP header")
        low = pkt[ESP].seq
        seq = low
        if sa.get("esn"):
            near = sa.get("seq", 0)
            candidates = [((near >> 32) + d) << 32 | low for d in (-1, 0, 1)]
            seq = min((c for c in candidates if 0 <= c < 1 << 64), key=lambda c: abs(c - near))
        obj.esn = seq >> 32
        # sa.decrypt consumes the packet; keep the ESP layer to report its framing.
        esp = pkt[ESP].copy()
        plain = obj.decrypt(pkt)
        icv_size = obj.crypt_icv_size or obj.crypt_algo.icv_size or obj.auth_algo.icv_size
        framing = obj.crypt_algo.decrypt(
            obj, esp, obj.crypt_key, icv_size, esn_en=obj.esn_en, esn=obj.esn
        )
        return {
            "packet": bytes(plain).hex(),
            "seq": seq,
            "iv": bytes(framing.iv).hex(),
            "padding": bytes(framing.padding).hex(),
            "nh": framing.nh,
        }

    ops = {"encrypt": encrypt, "decrypt": decrypt}
    out.write(
        json.dumps({"ready": True, "scapy": scapy.VERSION, "cryptography": cryptography.__version__})
        + "\n"
    )
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            op = ops.get(req.get("op"))
            if op is None:
                raise Refused(f"unknown op {req.get('op')!r}")
            reply = {"ok": True}
            reply.update(op(req))
        except IPSecIntegrityError:
            reply = {"ok": False, "error": "integrity"}
        except Refused as e:
            reply = {"ok": False, "error": str(e)}
        except Exception as e:  # the test sees scapy's own complaint
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
