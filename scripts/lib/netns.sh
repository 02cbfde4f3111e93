# Shell shared by the gateway's end-to-end tests (scripts/e2e, on this host) and the kernel
# machine's Linux interop suite (tests/kernel/xfrm, inside user-mode-linux): two network
# namespaces joined by veth, each with a host network behind it, setkey files and keys for
# ipsecd, starting and asking ipsecd, a TCP transfer checked by SHA-256, and stopping a
# dumpcap capture once it has written all it saw.
#
#        ns $A                                                   ns $B
#   10.98.1.1 (lo) ── (gateway a) ── va 10.99.0.1  ══  vb 10.99.0.2 ── (gateway b) ── 10.98.2.1 (lo)
#   fd00:98:1::1                        fd00:99::1      fd00:99::2                     fd00:98:2::1
#
# Sourced, not run. The caller sets: A and B (namespace names), work (a scratch directory),
# PY (python3), IPSECD and IPSECCTL (the binaries), and pids=() (the daemons started, for
# cleanup and stop_all); optionally R (a third namespace the caller adds, removed by
# cleanup too), sa_ext (extensions added to every SA of `config`, such
# as "-f esn -r 64"), TEST_NAME (the prefix of `fail`'s message, default e2e) and on_fail
# (a command that `fail` runs first, to show more of the state).

cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    ip netns del $A 2>/dev/null || true
    ip netns del $B 2>/dev/null || true
    # A router between them, where a caller made one (scripts/e2e's path MTU check).
    [ -z "${R:-}" ] || ip netns del "$R" 2>/dev/null || true
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
    local here there hnet tnet rule_out rule_in rp=${proto%-udp}
    if [ "$side" = a ]; then
        here=$o1 there=$o2 hnet=$n1 tnet=$n2
    else
        here=$o2 there=$o1 hnet=$n2 tnet=$n1
    fi
    if [ "$mode" = transport ]; then
        rule_out=$rp/transport//require rule_in=$rp/transport//require
    else
        rule_out=$rp/tunnel/$here-$there/require rule_in=$rp/tunnel/$there-$here/require
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
# direction's SA; -C for IPComp's deflate, which has no keys), and for tshark the algorithm
# names (t_enc, t_auth; empty when tshark 4.0 cannot decrypt it) and each direction's keys
# (ek_ab, ak_ab, ek_ba, ak_ba).
keys() {
    local e a elen alen
    case $1 in
    aes-gcm) e=aes-gcm-16 elen=20 a= alen=0 t_enc="AES-GCM with 16 octet ICV [RFC4106]" t_auth=NULL ;;
    chacha20-poly1305) e=chacha20-poly1305 elen=36 a= alen=0 t_enc= t_auth= ;;
    aes256-gcm) e=aes-gcm-16 elen=36 a= alen=0 t_enc="AES-GCM with 16 octet ICV [RFC4106]" t_auth=NULL ;;
    aes-cbc-sha256) e=aes-cbc elen=16 a=hmac-sha2-256 alen=32 t_enc="AES-CBC [RFC3602]" t_auth="HMAC-SHA-256-128 [RFC4868]" ;;
    aes256-cbc-sha512) e=aes-cbc elen=32 a=hmac-sha2-512 alen=64 t_enc="AES-CBC [RFC3602]" t_auth="HMAC-SHA-512-256 [RFC4868]" ;;
    3des-sha1) e=3des-cbc elen=24 a=hmac-sha1 alen=20 t_enc="TripleDES-CBC [RFC2451]" t_auth="HMAC-SHA-1-96 [RFC2404]" ;;
    # AH (proto ah): no encryption. AES-GMAC's key ends with its 4-byte salt (RFC 4543).
    ah-sha1) e= elen=0 a=hmac-sha1 alen=20 t_enc= t_auth= ;;
    ah-sha256) e= elen=0 a=hmac-sha2-256 alen=32 t_enc= t_auth= ;;
    ah-sha512) e= elen=0 a=hmac-sha2-512 alen=64 t_enc= t_auth= ;;
    ah-gmac) e= elen=0 a=aes-gmac alen=20 t_enc= t_auth= ;;
    # IPComp (proto ipcomp): a compression algorithm, no keys.
    deflate) e= elen=0 a= alen=0 t_enc= t_auth= ;;
    *) fail "unknown algorithm $1" ;;
    esac
    ek_ab= ek_ba= alg_ab= alg_ba= ak_ab= ak_ba=
    if [ -n "$e" ]; then
        ek_ab=$(hex $elen) ek_ba=$(hex $elen)
        alg_ab="-E $e $ek_ab" alg_ba="-E $e $ek_ba"
    fi
    if [ -n "$a" ]; then
        ak_ab=$(hex $alen) ak_ba=$(hex $alen)
        alg_ab="${alg_ab:+$alg_ab }-A $a $ak_ab" alg_ba="${alg_ba:+$alg_ba }-A $a $ak_ba"
    fi
    if [ "$1" = deflate ]; then alg_ab="-C deflate" alg_ba="-C deflate"; fi
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
    # soon as the socket appeared could find no route into the TUN yet). Up to 30 s: with
    # --driver afalg, the first probe of a kernel machine loads and instantiates some forty
    # crypto templates, a modprobe process each (about 9 s under user-mode-linux).
    for _ in $(seq 300); do
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

# tcp_transfer BYTES [FROM_NS FROM_HOST TO_NS TO_HOST]: BYTES of random data (with
# tcp_data=FILE set: the first BYTES of FILE) over TCP from FROM_HOST in FROM_NS to TO_HOST
# in TO_NS (default: h1 in A to h2 in B); the SHA-256 of what was sent and what was
# received must be equal. The sender retries its connection
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
    ip netns exec "$from_ns" $PY - "$bytes" "$work/sent.sha" "$from" "$to" "${tcp_data:-}" <<'EOF' || fail "TCP sender failed"
import hashlib, os, socket, sys, time
n = int(sys.argv[1]); data = open(sys.argv[5], "rb").read(n) if sys.argv[5] else os.urandom(n)
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

# inject NS IFACE SRC: while NS (A or B) pings the other side's host, captures one ESP or AH
# packet that NS sends from SRC (ESP raw or in UDP, IPv4 or IPv6; AH) as it leaves IFACE, and
# sends it again twice through IFACE: as it was (a replay), then with its sequence number
# 1000 ahead (so that the window lets it through to the ICV check) and the packet's last
# byte flipped (a forgery: ESP's ICV, or under AH the payload that AH's ICV covers). The
# receiver must drop both and count one replay and one authentication failure. For AH,
# $work/inject.out says the captured header's length ("ah_len N"). The pings start once the
# capturing socket is bound ($work/inject.ready): python3's start can outlast the pings'
# second under a loaded user-mode-linux, and then it saw none of them.
inject() {
    local ns=$1 ifc=$2 src=$3 dst pinger capturer
    if [ "$ns" = $A ]; then dst=$h2; else dst=$h1; fi
    rm -f "$work/inject.ready"
    ip netns exec "$ns" $PY - "$ifc" "$src" "$work/inject.ready" <<'EOF' >"$work/inject.out" 2>"$work/inject.err" &
import socket, struct, sys
ifc, src = sys.argv[1], sys.argv[2]
v6 = ":" in src
srcb = socket.inet_pton(socket.AF_INET6 if v6 else socket.AF_INET, src)

def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF

def seq_offset(f):
    """(offset of the sequence number, offset of the UDP header or None, AH's length or
    None) in Ethernet frame f, a whole ESP or AH packet (no fragment) sent from src; None if
    it is no such packet."""
    if v6:
        if f[12:14] != b"\x86\xdd" or f[22:38] != srcb or len(f) != 54 + struct.unpack("!H", f[18:20])[0]:
            return None
        nh, hl = f[20], 40
    else:
        if f[12:14] != b"\x08\x00" or f[26:30] != srcb or len(f) < 14 + struct.unpack("!H", f[16:18])[0]:
            return None
        if struct.unpack("!H", f[20:22])[0] & 0x3FFF:
            return None
        nh, hl = f[23], (f[14] & 15) * 4
    if nh == 50:
        return 14 + hl + 4, None, None
    if nh == 51:
        return 14 + hl + 8, None, (f[14 + hl + 1] + 2) * 4
    # ESP in UDP: port 4500, not a keepalive (one byte) or IKE (non-ESP marker, 4 zero bytes).
    u = 14 + hl
    if nh == 17 and struct.unpack("!H", f[u + 2:u + 4])[0] == 4500:
        if len(f) - u > 16 and f[u + 8:u + 12] != bytes(4):
            return u + 12, u, None
    return None

def fix_udp(f, u):
    """A valid UDP checksum again (the capture may hold a partial one from the offload)."""
    if u is None:
        return f
    f[u + 6:u + 8] = b"\0\0"
    n = struct.unpack("!H", f[u + 4:u + 6])[0]
    if v6:
        pseudo = f[22:54] + struct.pack("!IxxxB", n, 17)
    else:
        pseudo = f[26:34] + struct.pack("!xBH", 17, n)
    c = csum(bytes(pseudo) + bytes(f[u:u + n])) or 0xFFFF
    f[u + 6:u + 8] = struct.pack("!H", c)
    return f

# ETH_P_ALL on the interface: outgoing frames too.
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
s.bind((ifc, 0))
s.settimeout(5)
open(sys.argv[3], "w").close()
while True:
    f, addr = s.recvfrom(65535)
    if addr[2] == socket.PACKET_OUTGOING and (at := seq_offset(f)) is not None:
        break
(sq, udp, ah_len), f = at, bytearray(f)
if ah_len is not None:
    print("ah_len", ah_len)
s.send(bytes(fix_udp(f, udp)))
seq = struct.unpack("!I", f[sq:sq + 4])[0]
f[sq:sq + 4] = struct.pack("!I", (seq + 1000) & 0xFFFFFFFF)
f[-1] ^= 1
s.send(bytes(fix_udp(f, udp)))
EOF
    capturer=$!
    for _ in $(seq 200); do [ -e "$work/inject.ready" ] && break; sleep 0.05; done
    ip netns exec "$ns" ping -q -c 20 -i 0.05 -W 2 -I "$([ "$ns" = $A ] && echo "$h1" || echo "$h2")" "$dst" >/dev/null &
    pinger=$!
    wait $capturer || fail "capturing and injecting ESP or AH from $ns: $(cat "$work/inject.err")"
    wait $pinger || fail "ping from $ns during the injection"
    sleep 0.2
}

# counter SIDE NAME: a total of `ipsecctl stats` (a drop reason, or keepalives).
counter() { ctl "$1" stats | awk -v n="$2" '$1 == n || $1 == n ":" { print $2; exit }'; }

# capture_stop PID FILE: stops dumpcap PID (writing FILE) once it has written everything it
# saw: when FILE has not grown for half a second (at most 10 s). libpcap hands dumpcap the
# kernel's ring a block at a time, when the block is full or 250 ms after its first packet
# (dumpcap's timeout), so a SIGINT sooner than that after the last packet, or while dumpcap
# waits for a CPU, loses the packets of the last block.
capture_stop() {
    local size=-1 now same=0
    for _ in $(seq 100); do
        now=$(stat -c %s "$2" 2>/dev/null || echo 0)
        if [ "$now" = "$size" ]; then same=$((same + 1)); else same=0 size=$now; fi
        [ $same -ge 5 ] && break
        sleep 0.1
    done
    kill -INT "$1"
    wait "$1" || true
}
