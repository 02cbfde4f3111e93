# Builds an IKE_SA_INIT request and response with scapy's IKEv2 layers
# (scapy.contrib.ikev2, scapy 2.8.0 in target/peers-venv) and prints them, with a chain of
# IKE_AUTH payloads, as three lines "NAME HEX" (request, response, auth) for
# ike/wire/tests/scapy.rs to parse with ike-wire. The values here are the ones that test asserts: keep them in step.
from scapy.contrib.ikev2 import (
    IKEv2, IKEv2_SA, IKEv2_Proposal, IKEv2_Transform, IKEv2_KE, IKEv2_Nonce, IKEv2_Notify,
    IKEv2_VendorID, IKEv2_CERTREQ, IKEv2_TSi, IKEv2_TSr, IKEv2_IDi, IKEv2_AUTH, IKEv2_Delete,
    IPv4TrafficSelector,
)


def proposal(num, last, dh):
    return IKEv2_Proposal(
        next_payload=0 if last else 2, proposal=num, proto=1,
        trans_nb=4,
        trans=IKEv2_Transform(next_payload=3, transform_type=1,
                              transform_id=20, length=12, key_length=256)
        / IKEv2_Transform(next_payload=3, transform_type=2, transform_id=7)
        / IKEv2_Transform(next_payload=3, transform_type=2, transform_id=5)
        / IKEv2_Transform(next_payload=0, transform_type=4, transform_id=dh),
    )


request = (
    IKEv2(init_SPI=bytes.fromhex("0102030405060708"), resp_SPI=b"\0" * 8, exch_type=34,
          flags="Initiator", id=0)
    / IKEv2_SA(prop=proposal(1, False, 31) / proposal(2, True, 19))
    / IKEv2_KE(group=31, ke=bytes(range(32)))
    / IKEv2_Nonce(nonce=b"\x11" * 32)
    / IKEv2_Notify(type=16388, notify=b"\x22" * 20)
    / IKEv2_Notify(type=16389, notify=b"\x33" * 20)
    / IKEv2_Notify(type=16431, notify=bytes.fromhex("0002000300040005"))
    / IKEv2_VendorID(vendorID=b"ocf test")
)

response = (
    IKEv2(init_SPI=bytes.fromhex("0102030405060708"), resp_SPI=bytes.fromhex("a1a2a3a4a5a6a7a8"),
          exch_type=34, flags="Response", id=0)
    / IKEv2_SA(prop=proposal(2, True, 19))
    / IKEv2_KE(group=19, ke=b"\x44" * 64)
    / IKEv2_Nonce(nonce=b"\x55" * 48)
    / IKEv2_CERTREQ(cert_encoding=4, cert_authority=b"\x66" * 20)
    / IKEv2_Notify(type=16430)
)

# Cleartext payloads as they would sit inside an IKE_AUTH's SK payload.
auth = (
    IKEv2_IDi(IDtype=2, ID=b"moon.strongswan.org")
    / IKEv2_AUTH(auth_type=2, load=b"\x77" * 32)
    / IKEv2_Notify(proto=3, SPIsize=4, type=16393, SPI=b"\xc0\xff\xee\x01")
    / IKEv2_TSi(number_of_TSs=1, traffic_selector=[IPv4TrafficSelector(
        IP_protocol_ID=6, start_port=0, end_port=65535,
        starting_address_v4="10.1.0.0", ending_address_v4="10.1.255.255")])
    / IKEv2_TSr(number_of_TSs=1, traffic_selector=[IPv4TrafficSelector(
        IP_protocol_ID=0, start_port=0, end_port=65535,
        starting_address_v4="192.0.2.1", ending_address_v4="192.0.2.1")])
    / IKEv2_Delete(proto=3, SPIsize=4, SPInum=2, SPI=[b"\0\0\0\1", b"\0\0\0\2"])
)

for name, packet in (("request", request), ("response", response), ("auth", auth)):
    print(name, bytes(packet).hex())
