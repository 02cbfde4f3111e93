# A real NAT between two gateways: a third namespace that routes between them and
# masquerades (nftables) what leaves towards the responder, for the IKE interop tests'
# NAT case (NAT detection, the move to UDP 4500, ESP in UDP through a translated port).
#
#      ns $A (initiator)               ns $R (NAT)                      ns $B (responder)
#   10.98.1.1 (lo)                                                            10.98.2.1 (lo)
#   va 192.168.77.2/24 ══ ra 192.168.77.1/24 │ rb 10.99.0.1/24 ══ vb 10.99.0.2/24
#   default via .77.1                        masquerade out of rb      (no route to .77.0/24)
#
# B has no route back to 192.168.77.0/24, so an exchange only completes if R translated it:
# B sees every packet of A's from 10.99.0.1 (nat_public), on the port R chose.
#
# Sourced after scripts/lib/netns.sh (its cleanup removes $R with $A and $B). The caller
# sets R (the NAT namespace's name) besides A and B. nftables is installed when missing.

nat_inside=192.168.77.2
nat_public=10.99.0.1
nat_peer=10.99.0.2

# nat_topology [random]: the three namespaces and the NAT. With "random", R maps source
# ports at random (nftables' `masquerade random`), so that A's IKE and ESP in UDP reach B
# from ports other than 500 and 4500, as behind most home routers.
nat_topology() {
    local flags=
    [ "${1:-}" = random ] && flags=" random"
    command -v nft >/dev/null ||
        DEBIAN_FRONTEND=noninteractive flock /tmp/ocf-apt.lock apt-get install -y -q nftables >/dev/null
    cleanup
    ip netns add "$A"
    ip netns add "$R"
    ip netns add "$B"
    ip link add va netns "$A" type veth peer name ra netns "$R"
    ip link add rb netns "$R" type veth peer name vb netns "$B"
    ip -n "$A" addr add $nat_inside/24 dev va
    ip -n "$R" addr add 192.168.77.1/24 dev ra
    ip -n "$R" addr add $nat_public/24 dev rb
    ip -n "$B" addr add $nat_peer/24 dev vb
    for ns in "$A" "$R" "$B"; do ip -n "$ns" link set lo up; done
    ip -n "$A" link set va up
    ip -n "$R" link set ra up
    ip -n "$R" link set rb up
    ip -n "$B" link set vb up
    ip -n "$A" route add default via 192.168.77.1
    ip -n "$A" addr add 10.98.1.1/32 dev lo
    ip -n "$B" addr add 10.98.2.1/32 dev lo
    ip netns exec "$R" sysctl -qw net.ipv4.ip_forward=1
    ip netns exec "$R" nft -f - <<EOF
table ip ocf_nat {
    chain postrouting {
        type nat hook postrouting priority srcnat; policy accept;
        oifname "rb" masquerade$flags
    }
}
EOF
}
