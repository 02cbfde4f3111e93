# Shell shared by the gateway's end-to-end tests (scripts/e2e, on this host) and the kernel
# machine's Linux interop suite (tests/kernel/xfrm, inside user-mode-linux): two network
# namespaces joined by veth, each with a host network behind it, setkey files and keys for
# ipsecd, starting and asking ipsecd, and a TCP transfer checked by SHA-256.
#
#        ns $A                                                   ns $B
#   10.98.1.1 (lo) ── (gateway a) ── va 10.99.0.1  ══  vb 10.99.0.2 ── (gateway b) ── 10.98.2.1 (lo)
#   fd00:98:1::1                        fd00:99::1      fd00:99::2                     fd00:98:2::1
#
# Sourced, not run. The caller sets: A and B (namespace names), work (a scratch directory),
# PY (python3), IPSECD and IPSECCTL (the binaries), and pids=() (the daemons started, for
# cleanup and stop_all); optionally sa_ext (extensions added to every SA of `config`, such
# as "-f esn -r 64"), TEST_NAME (the prefix of `fail`'s message, default e2e) and on_fail
# (a command that `fail` runs first, to show more of the state).

cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    ip netns del $A 2>/dev/null || true
    ip netns del $B 2>/dev/null || true
}
trap 'cleanup; rm -rf "$work"' EXIT

fail() {
    echo "${TEST_NAME:-e2e}: FAIL: $*" >&2
    [ -z "${on_fail:-}" ] || $on_fail >&2 || true
    for f in "$work"/*.log; do
        [ -f "$f" ] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }
    done
    exit 1
}

topology() {
    cleanup
    ip netns add $A
    ip netns add $B
    # Made inside the namespaces, so the names never meet another run's in the root one.
    ip link add va netns $A type veth peer name vb netns $B
    ip -n $A addr add 10.99.0.1/24 dev va
    ip -n $B addr add 10.99.0.2/24 dev vb
    ip -n $A addr add fd00:99::1/64 dev va nodad
    ip -n $B addr add fd00:99::2/64 dev vb nodad
    for ns in $A $B; do
        ip -n $ns link set lo up
    done
    ip -n $A link set va up
    ip -n $B link set vb up
    ip -n $A addr add 10.98.1.1/32 dev lo
    ip -n $B addr add 10.98.2.1/32 dev lo
    ip -n $A addr add fd00:98:1::1/128 dev lo nodad
    ip -n $B addr add fd00:98:2::1/128 dev lo nodad
}

# hex N: N random bytes as 0x and hex digits.
hex() { printf '0x%s\n' "$(od -An -vtx1 -N"$1" /dev/urandom | tr -d ' \n')"; }

# addresses OUTER INNER MODE (4 or 6 each; tunnel or transport): sets the tunnel endpoints
# o1/o2, the protected networks n1/n2 and the hosts h1/h2 on them. In transport mode the
# gateways protect their own traffic: the hosts are the endpoints.
addresses() {
    mode=$3
    if [ "$1" = 4 ]; then o1=10.99.0.1 o2=10.99.0.2; else o1=fd00:99::1 o2=fd00:99::2; fi
    if [ "$mode" = transport ]; then
        h1=$o1 h2=$o2 n1=$o1 n2=$o2
    elif [ "$2" = 4 ]; then
        n1=10.98.1.0/24 n2=10.98.2.0/24 h1=10.98.1.1 h2=10.98.2.1
    else
        n1=fd00:98:1::/64 n2=fd00:98:2::/64 h1=fd00:98:1::1 h2=fd00:98:2::1
    fi
}

# config SIDE PROTO: a setkey file for one side, with the keys `keys` chose and the mode
# `addresses` set.
config() {
    local side=$1 proto=$2
    local here there hnet tnet rule_out rule_in
    if [ "$side" = a ]; then
        here=$o1 there=$o2 hnet=$n1 tnet=$n2
    else
        here=$o2 there=$o1 hnet=$n2 tnet=$n1
    fi
    if [ "$mode" = transport ]; then
        rule_out=esp/transport//require rule_in=esp/transport//require
    else
        rule_out=esp/tunnel/$here-$there/require rule_in=esp/tunnel/$there-$here/require
    fi
    # ESP in UDP on another port than 4500 (`udp_port`): the SAs name it.
    local p=
    if [ "$proto" = esp-udp ] && [ -n "${udp_port:-}" ]; then p="[$udp_port]"; fi
    cat <<EOF
# ipsecd end-to-end test, side $side
flush;
spdflush;
add $o1$p $o2$p $proto 0x1001 -m $mode ${sa_ext:+$sa_ext }$alg_ab;
add $o2$p $o1$p $proto 0x1002 -m $mode ${sa_ext:+$sa_ext }$alg_ba;
spdadd $hnet $tnet any -P out ipsec $rule_out;
spdadd $tnet $hnet any -P in ipsec $rule_in;
EOF
}

# keys ALG: fresh keys for both directions. Sets alg_ab and alg_ba (the -E/-A part of each
# direction's SA), and for tshark the algorithm names (t_enc, t_auth; empty when tshark 4.0
# cannot decrypt it) and each direction's keys (ek_ab, ak_ab, ek_ba, ak_ba).
keys() {
    local e a elen alen
    case $1 in
    aes-gcm) e=aes-gcm-16 elen=20 a= alen=0 t_enc="AES-GCM with 16 octet ICV [RFC4106]" t_auth=NULL ;;
    chacha20-poly1305) e=chacha20-poly1305 elen=36 a= alen=0 t_enc= t_auth= ;;
    aes-cbc-sha256) e=aes-cbc elen=16 a=hmac-sha2-256 alen=32 t_enc="AES-CBC [RFC3602]" t_auth="HMAC-SHA-256-128 [RFC4868]" ;;
    3des-sha1) e=3des-cbc elen=24 a=hmac-sha1 alen=20 t_enc="TripleDES-CBC [RFC2451]" t_auth="HMAC-SHA-1-96 [RFC2404]" ;;
    *) fail "unknown algorithm $1" ;;
    esac
    ek_ab=$(hex $elen) ek_ba=$(hex $elen)
    alg_ab="-E $e $ek_ab" alg_ba="-E $e $ek_ba" ak_ab= ak_ba=
    if [ -n "$a" ]; then
        ak_ab=$(hex $alen) ak_ba=$(hex $alen)
        alg_ab="$alg_ab -A $a $ak_ab" alg_ba="$alg_ba -A $a $ak_ba"
    fi
}

# tshark_check LABEL: decrypts the capture of A's veth with both SAs' keys (tshark is an

start() {
    local side=$1 ns
    shift
    ns=$([ "$side" = a ] && echo $A || echo $B)
    ip netns exec "$ns" "$IPSECD" -f "$work/$side.conf" -s "$work/$side.sock" "$@" >"$work/$side.log" 2>&1 &
    pids+=($!)
    eval "pid_$side=$!"
    # The control socket is bound before the TUN, the routes and the packet loops are set
    # up, and served once they are: the first answer means ipsecd is ready (a ping sent as
    # soon as the socket appeared could find no route into the TUN yet).
    for _ in $(seq 50); do
        [ -S "$work/$side.sock" ] && ctl "$side" stats >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    fail "ipsecd $side did not start"
}

ctl() { local side=$1; shift; "$IPSECCTL" -s "$work/$side.sock" "$@"; }

# The SA line of `ipsecctl stats` for SPI $2 on side $1, as "out_packets in_packets last_seq".
sa_counts() {
    ctl "$1" stats | awk -v spi="spi 0x$2:" '
        index($0, spi) { print $7, $12, $NF }'
}

# tcp_transfer BYTES [FROM_NS FROM_HOST TO_NS TO_HOST]: BYTES of random data over TCP from
# FROM_HOST in FROM_NS to TO_HOST in TO_NS (default: h1 in A to h2 in B); the SHA-256 of
# what was sent and what was received must be equal. The sender retries its connection
# until the receiver listens (no fixed sleep).
tcp_transfer() {
    local bytes=$1 from_ns=${2:-$A} from=${3:-$h1} to_ns=${4:-$B} to=${5:-$h2}
    rm -f "$work/sent.sha" "$work/recv.sha"
    ip netns exec "$to_ns" $PY - "$work/recv.sha" "$to" <<'EOF' &
import hashlib, socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[2] else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[2], 5001)); s.listen(1); s.settimeout(30)
c, _ = s.accept(); c.settimeout(30); h = hashlib.sha256(); n = 0
while True:
    d = c.recv(65536)
    if not d: break
    h.update(d); n += 1
open(sys.argv[1], "w").write(h.hexdigest())
EOF
    local server=$!
    ip netns exec "$from_ns" $PY - "$bytes" "$work/sent.sha" "$from" "$to" <<'EOF' || fail "TCP sender failed"
import hashlib, os, socket, sys, time
n = int(sys.argv[1]); data = os.urandom(n)
deadline = time.time() + 10
while True:
    try:
        s = socket.create_connection((sys.argv[4], 5001), timeout=30, source_address=(sys.argv[3], 0))
        break
    except ConnectionRefusedError:
        if time.time() > deadline:
            raise
        time.sleep(0.05)
s.sendall(data); s.close()
open(sys.argv[2], "w").write(hashlib.sha256(data).hexdigest())
EOF
    wait $server || fail "TCP receiver failed"
    cmp -s "$work/sent.sha" "$work/recv.sha" || fail "TCP transfer: SHA-256 differs"
}

drops() { ctl "$1" stats | awk '/^drops:/ { print $2 }'; }

stop_all() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    pids=()
}

# counter SIDE NAME: a total of `ipsecctl stats` (a drop reason, or keepalives).
counter() { ctl "$1" stats | awk -v n="$2" '$1 == n || $1 == n ":" { print $2; exit }'; }
