# strongSwan's charon as an IKEv2 peer in a network namespace, for the IKE interop tests
# (scripts/ike-interop) and the set-up measurement (bench/ike-setup): the Debian packages,
# one charon per side with its own strongswan.conf, vici socket, log and /run, swanctl
# against it, the SAs it lists, and certificates made with strongSwan's `pki`.
#
#   swan_start a NS ──> ip netns exec NS: mount a tmpfs on /run (charon's pid file and
#                       default sockets stay private), exec charon with STRONGSWAN_CONF
#                       = $SWAN_DIR/a/strongswan.conf
#   swan a ARGS     ──> swanctl ARGS --uri unix://$SWAN_DIR/a/vici
#   swan_load a F   ──> swanctl --load-all --file F   (connections, secrets, certificates
#                                                      named by absolute paths)
#   swan_sas a      ──> swanctl --list-sas --raw  ──> swan_ike / swan_child pull fields
#
# SWAN_KERNEL picks charon's kernel interface for the SAs:
# - libipsec (the default): kernel-libipsec (charon's user-space ESP over a TUN device,
#   ipsec0) is loaded before kernel-netlink, so that charon needs no ESP in the host
#   kernel: it then forces ESP in UDP (its NAT-D payloads fake the source, so that the peer
#   floats to 4500) and refuses AH, ESN, IPComp and transport mode. It routes a CHILD_SA's
#   remote traffic selector into ipsec0 only when the namespace has an address inside the
#   local one (table 220).
# - netlink: kernel-netlink alone, Linux's XFRM and the kernel's ESP (raw ESP, transport
#   mode, ESN), where the kernel has them: the kernel test machine (tests/kernel/ike; this
#   host's kernel has no ESP). Routes as above, through the veth instead of ipsec0.
#
# Sourced, not run. The caller sets `work` (a scratch directory; the library keeps its
# files in $work/swan) and `pids=()` (charon's pid is added, so that the caller's cleanup
# ends it; swan_stop_all ends them here). Each function that fails calls the caller's
# `fail` when it has one, else prints and returns 1.
#
# Log: $SWAN_DIR/SIDE/charon.log, with milliseconds; the level per subsystem from
# SWAN_LOG (default "default=1", e.g. SWAN_LOG="default=1 ike=4" logs the IKE SA's keys:
# "Sk_ei secret", ...; cfg=2 shows how a connection was chosen). Each line is flushed as
# it is written (a test reads the log while charon runs) unless SWAN_LOG_FLUSH=no.

SWAN_DIR=${SWAN_DIR:-}
SWAN_LOG=${SWAN_LOG:-default=1}
SWAN_LOG_FLUSH=${SWAN_LOG_FLUSH:-yes}
SWAN_KERNEL=${SWAN_KERNEL:-libipsec}
SWAN_CHARON=/usr/lib/ipsec/charon

_swan_fail() {
    if declare -F fail >/dev/null; then fail "swan: $*"; fi
    echo "swan: $*" >&2
    return 1
}

_swan_dir() {
    if [ -z "$SWAN_DIR" ]; then
        [ -n "${work:-}" ] || { _swan_fail "set work (a scratch directory) before using swan.sh"; return 1; }
        SWAN_DIR=$work/swan
    fi
    mkdir -p "$SWAN_DIR"
}

# swan_install: installs the Debian packages charon needs here when one is missing
# (apt-get under /tmp/ocf-apt.lock, the lock scripts/e2e and scripts/kernel-vm take), and
# checks that charon, swanctl, pki and the kernel-libipsec plugin are there.
swan_install() {
    local p need=()
    for p in strongswan-charon strongswan-swanctl libcharon-extra-plugins \
        libstrongswan-standard-plugins libstrongswan-extra-plugins strongswan-pki; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
    done
    if [ ${#need[@]} -gt 0 ]; then
        echo "swan: installing ${need[*]}" >&2
        if ! DEBIAN_FRONTEND=noninteractive flock /tmp/ocf-apt.lock \
            apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1; then
            flock /tmp/ocf-apt.lock apt-get update -q >/dev/null 2>&1 || true
            DEBIAN_FRONTEND=noninteractive flock /tmp/ocf-apt.lock \
                apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null ||
                { _swan_fail "apt-get install ${need[*]}"; return 1; }
        fi
    fi
    [ -x "$SWAN_CHARON" ] && command -v swanctl >/dev/null && command -v pki >/dev/null &&
        [ -e /usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so ] ||
        { _swan_fail "charon, swanctl, pki or kernel-libipsec missing after the install"; return 1; }
}

# swan_version: "strongSwan 5.9.8 (Debian 5.9.8-5+deb12u6)".
swan_version() {
    echo "$(swanctl --help 2>/dev/null | awk 'NR == 1 { print $1, $2 }') (Debian $(dpkg-query -W -f='${Version}' strongswan-charon))"
}

# swan_start SIDE NS [CHARON_SETTINGS]: writes SIDE's strongswan.conf and starts charon in
# namespace NS, then waits (up to SWAN_START_S, default 10 s) for it to answer on its vici
# socket. CHARON_SETTINGS: more lines for the `charon { }` section (e.g. "threads = 32").
# The kernel interface is SWAN_KERNEL's (see the top).
swan_start() {
    local side=$1 ns=$2 extra=${3:-} d level sub lvl pid kernel plugins
    _swan_dir || return 1
    case $SWAN_KERNEL in
    libipsec)
        # Before kernel-netlink (priority 10 against its 1): the IPsec part of the kernel
        # interface is then libipsec's, in user space; kernel-netlink keeps addresses and
        # routes.
        kernel="        kernel-libipsec {
            load = 10
        }"
        plugins='^loaded plugins: .* kernel-libipsec .* kernel-netlink '
        ;;
    netlink)
        # Debian's kernel-libipsec.conf says `load = no`; said again here, so that the
        # whole kernel interface is kernel-netlink's whatever the host's configuration.
        kernel="        kernel-libipsec {
            load = no
        }"
        plugins='^loaded plugins: .* kernel-netlink '
        ;;
    *) _swan_fail "SWAN_KERNEL must be libipsec or netlink, not '$SWAN_KERNEL'"; return 1 ;;
    esac
    d=$SWAN_DIR/$side
    mkdir -p "$d"
    rm -f "$d/vici" "$d/charon.log"
    level=
    for lvl in $SWAN_LOG; do
        sub=${lvl%%=*}
        level+="            $sub = ${lvl#*=}
"
    done
    cat >"$d/strongswan.conf" <<EOF
# charon of side $side (scripts/lib/swan.sh)
charon {
    load_modular = yes
    install_virtual_ip = no
$extra
    plugins {
        include /etc/strongswan.d/charon/*.conf
$kernel
        vici {
            socket = unix://$d/vici
        }
    }
    filelog {
        swan {
            path = $d/charon.log
            time_format = %T
            time_add_ms = yes
            flush_line = $SWAN_LOG_FLUSH
            ike_name = yes
$level        }
    }
    syslog {
        daemon {
            default = -1
        }
    }
}
EOF
    # `ip netns exec` gives the command its own mount namespace: the tmpfs on /run is
    # charon's alone (its pid file, /run/charon.*), and the caller's fd 9 (a lock) stays
    # behind.
    ip netns exec "$ns" sh -c 'mount -t tmpfs none /run && STRONGSWAN_CONF="$1" exec "$2"' \
        charon "$d/strongswan.conf" "$SWAN_CHARON" >"$d/charon.out" 2>&1 9>&- &
    pid=$!
    eval "swan_pid_$side=$pid"
    echo "$ns" >"$d/ns"
    pids+=("$pid")
    for _ in $(seq $((${SWAN_START_S:-10} * 10))); do
        if swan "$side" --stats >"$d/stats" 2>&1; then
            # Its plugins in load order: with libipsec, kernel-libipsec before kernel-netlink;
            # with netlink, kernel-netlink and no kernel-libipsec.
            grep -Eq "$plugins" "$d/stats" && { [ "$SWAN_KERNEL" = libipsec ] || ! grep -Eq ' kernel-libipsec( |$)' "$d/stats"; } ||
                { _swan_fail "charon $side: not the plugins of SWAN_KERNEL=$SWAN_KERNEL: $(grep plugins "$d/stats")"; return 1; }
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    _swan_fail "charon $side did not start in $ns: $(tail -n 5 "$d/charon.out" "$d/charon.log" 2>/dev/null)"
}

# swan SIDE ARGS...: swanctl ARGS against SIDE's charon (errors to $SWAN_DIR/swanctl.log).
swan() {
    local side=$1
    shift
    swanctl "$@" --uri "unix://$SWAN_DIR/$side/vici" 2>>"$SWAN_DIR/swanctl.log"
}

# swan_load SIDE FILE: loads FILE (a swanctl.conf: connections, secrets, authorities) into
# SIDE's charon, replacing what it held, with the private keys in the folder private/
# beside FILE (swan_pki_give puts them there for $SWAN_DIR/SIDE/FILE). Certificates may
# be named by absolute paths.
swan_load() {
    swan "$1" --load-all --noprompt --file "$2" >>"$SWAN_DIR/$1/load.log" ||
        { _swan_fail "swanctl --load-all $2 into $1: $(tail -n 5 "$SWAN_DIR/swanctl.log" "$SWAN_DIR/$1/load.log")"; return 1; }
}

# swan_initiate SIDE CHILD [TIMEOUT_S]: brings CHILD (and its IKE SA) up; returns when
# the CHILD_SA is installed, non-zero on a failure or after TIMEOUT_S (default 20).
swan_initiate() {
    swan "$1" --initiate --child "$2" --timeout "${3:-20}" >>"$SWAN_DIR/$1/initiate.log"
}

# swan_terminate SIDE IKE [TIMEOUT_S]: deletes the IKE SA(s) of connection IKE and waits.
swan_terminate() {
    swan "$1" --terminate --ike "$2" --timeout "${3:-10}" >>"$SWAN_DIR/$1/initiate.log"
}

# swan_sas SIDE [IKE]: `swanctl --list-sas --raw` (of connection IKE only).
swan_sas() {
    if [ -n "${2:-}" ]; then swan "$1" --list-sas --raw --ike "$2"; else swan "$1" --list-sas --raw; fi
}

# The raw listing is one line per IKE SA:
#   list-sa event {NAME {uniqueid=1 version=2 state=ESTABLISHED local-host=10.99.0.1 ...
#     child-sas {CHILD-7 {name=CHILD uniqueid=7 ... spi-in=c5a1... bytes-in=588 ...}}}}
# with lists in brackets and values that may hold spaces (identities as DNs: local-id=C=CH,
# O=x y).
# _swan_fields reads it into lines "ike NAME FIELD VALUE" and "child NAME CHILD FIELD
# VALUE", one per field, the first IKE SA (and CHILD_SA) of each name first. (Readers of
# it read to the end: a reader that stopped early would fail the writer, under pipefail.)
_swan_fields() {
    /usr/bin/python3 -c '
import re, sys
# A value runs up to the next " key=" or " name {" (keys are lower case, the
# attributes of a DN, "C=CH, O=x y", are not), "}" or the end.
tok = re.compile(r"\s*(?:([\w-]*)\s*\{|(\})|([\w-]+)=\[([^\]]*)\]"
                 r"|([\w-]+)=(.*?)(?=\s+[a-z][\w-]*(?:=|\s*\{)|\s*\}|$))")
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("list-sa event"):
        continue
    pos, path = len("list-sa event"), []
    while pos < len(line):
        m = tok.match(line, pos)
        if not m or m.end() == pos:
            break
        pos = m.end()
        if m.group(2):
            path.pop()
        elif m.group(1) is not None:
            path.append(m.group(1))
        else:
            key, val = (m.group(3), m.group(4)) if m.group(3) else (m.group(5), m.group(6))
            if len(path) == 2:
                print("ike", path[1], key, val)
            elif len(path) == 4 and path[2] == "child-sas":
                print("child", path[1], path[3], key, val)
'
}

# swan_ike SIDE IKE FIELD: FIELD of the (first) IKE SA of connection IKE: state,
# local-host, local-port, remote-host, remote-port, initiator-spi, responder-spi,
# encr-alg, encr-keysize, integ-alg, prf-alg, dh-group, nat-local, nat-remote, nat-fake,
# nat-any, uniqueid, ... Empty when there is none.
swan_ike() {
    swan_sas "$1" "$2" | _swan_fields | awk -v n="$2" -v f="$3" '
        $1 == "ike" && $2 == n && $3 == f && !done { sub(/^ike [^ ]+ [^ ]+ /, ""); print; done = 1 }'
}

# swan_child SIDE IKE CHILD FIELD: FIELD of the first CHILD_SA named CHILD under IKE: state,
# mode, protocol, encap, spi-in, spi-out, encr-alg, encr-keysize, integ-alg, dh-group,
# bytes-in, bytes-out, packets-in, packets-out, uniqueid, reqid, local-ts, remote-ts, ...
swan_child() {
    swan_sas "$1" "$2" | _swan_fields | awk -v n="$2" -v c="$3" -v f="$4" '
        $1 == "child" && $2 == n && $4 == "name" && $5 == c && pick == "" { pick = $3 }
        $1 == "child" && $2 == n && $3 == pick && $4 == f && !done { sub(/^child [^ ]+ [^ ]+ [^ ]+ ?/, ""); print; done = 1 }'
}

# swan_wait_sa SIDE IKE [CHILD] [TIMEOUT_S]: waits (default 20 s) until SIDE lists an
# ESTABLISHED IKE SA of connection IKE (and a CHILD_SA named CHILD INSTALLED under it).
swan_wait_sa() {
    local side=$1 ike=$2 child=${3:-} t=${4:-20} i raw
    for ((i = 0; i < t * 10; i++)); do
        raw=$(swan_sas "$side" "$ike" | _swan_fields)
        if grep -qx "ike $ike state ESTABLISHED" <<<"$raw"; then
            [ -z "$child" ] && return 0
            awk -v c="$child" '$1 == "child" && $4 == "name" && $5 == c { n[$3] = 1 }
                $1 == "child" && $4 == "state" && $5 == "INSTALLED" { s[$3] = 1 }
                END { for (k in n) if (k in s) found = 1; exit !found }' <<<"$raw" && return 0
        fi
        sleep 0.1
    done
    _swan_fail "$side: no ESTABLISHED IKE SA $ike${child:+ with an INSTALLED CHILD_SA $child} after $t s"
}

# swan_stop SIDE: stops SIDE's charon (SIGTERM, then SIGKILL after 5 s).
swan_stop() {
    local pid
    pid=$(eval "echo \${swan_pid_$1:-}")
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    eval "swan_pid_$1="
}

# ----- certificates --------------------------------------------------------------------
# Made once per $SWAN_DIR with strongSwan's pki, in $SWAN_DIR/pki: a CA (RSA-2048, its DN
# "C=CH, O=ocf interop, CN=ocf interop CA") and end-entity certificates it issues. Each
# function prints the path of what it made, so that a test writes:
#   ca=$(swan_pki_ca); crt=$(swan_pki_cert gw-a rsa "C=CH, O=ocf interop, CN=gw-a" gw-a.test)
#   key=$(swan_pki_key gw-a)

# pki's own noise (the tpm plugin it cannot load here) goes to pki.log.
_swan_pki() { pki "$@" 2>>"$SWAN_DIR/pki/pki.log"; }

swan_pki_ca() {
    local p
    _swan_dir || return 1
    p=$SWAN_DIR/pki
    mkdir -p "$p"
    if [ ! -s "$p/ca.crt" ]; then
        _swan_pki --gen --type rsa --size 2048 --outform pem >"$p/ca.key" &&
            _swan_pki --self --ca --lifetime 30 --in "$p/ca.key" --type rsa \
                --dn "C=CH, O=ocf interop, CN=ocf interop CA" --outform pem >"$p/ca.crt" ||
            { _swan_fail "pki: the CA"; return 1; }
    fi
    echo "$p/ca.crt"
}

# swan_pki_cert NAME TYPE DN [SAN...]: an end-entity certificate for NAME with a new key
# of TYPE (rsa: RSA-2048; ecdsa: ECDSA P-256), subject DN, the subjectAltNames SAN (FQDNs,
# addresses or e-mail addresses as pki reads them), issued by swan_pki_ca's CA with
# serverAuth; prints the certificate's path ($SWAN_DIR/pki/NAME.crt).
swan_pki_cert() {
    local name=$1 type=$2 dn=$3 p ca size san=()
    shift 3
    _swan_dir || return 1
    ca=$(swan_pki_ca) || return 1
    p=$SWAN_DIR/pki
    case $type in
    rsa) size=2048 ;;
    ecdsa) size=256 ;;
    *) _swan_fail "swan_pki_cert: type $type (rsa or ecdsa)"; return 1 ;;
    esac
    for s in "$@"; do san+=(--san "$s"); done
    if [ ! -s "$p/$name.crt" ]; then
        _swan_pki --gen --type "$type" --size "$size" --outform pem >"$p/$name.key" &&
            _swan_pki --pub --in "$p/$name.key" --type "$type" |
            _swan_pki --issue --lifetime 30 --cacert "$ca" --cakey "$p/ca.key" --dn "$dn" \
                "${san[@]}" --flag serverAuth --outform pem >"$p/$name.crt" ||
            { _swan_fail "pki: the certificate of $name"; return 1; }
    fi
    echo "$p/$name.crt"
}

# swan_pki_key NAME: the path of NAME's private key (PEM; PKCS#1 for RSA, SEC1 for ECDSA).
swan_pki_key() { _swan_dir && echo "$SWAN_DIR/pki/$1.key"; }

# swan_pki_give SIDE NAME...: puts the private keys of NAME... where swan_load finds them
# for SIDE (swanctl loads keys only from the folders beside its file: private/ here), so
# that a connection's `local.certs = $(swan_pki_cert NAME ...)` finds its key.
swan_pki_give() {
    local side=$1 name
    shift
    _swan_dir || return 1
    mkdir -p "$SWAN_DIR/$side/private"
    for name in "$@"; do
        cp "$SWAN_DIR/pki/$name.key" "$SWAN_DIR/$side/private/$name.pem" ||
            { _swan_fail "no key of $name to give $side"; return 1; }
    done
}

# ----- the IKE SA's keys, for Wireshark ------------------------------------------------
# swan_ike_keys SIDE IKE: one record of Wireshark's ikev2_decryption_table for the (first)
# IKE SA of connection IKE on SIDE, read from charon's log, which must have been started
# with SWAN_LOG="... ike=4" (charon then logs "Sk_ei secret => 20 bytes" and the bytes):
#   SPIi,SPIr,SK_ei,SK_er,"encryption",SK_ai,SK_ar,"integrity"
# (bytes in hex; the algorithms as Wireshark names them). tshark takes it as
#   tshark -o "uat:ikev2_decryption_table:$(swan_ike_keys a conn)" ...
# Only AES-CBC and AES-GCM-16 (tshark 4.0 has no ChaCha20-Poly1305 for IKE).
swan_ike_keys() {
    local side=$1 ike=$2 id spi_i spi_r encr size integ
    id=$(swan_ike "$side" "$ike" uniqueid)
    spi_i=$(swan_ike "$side" "$ike" initiator-spi)
    spi_r=$(swan_ike "$side" "$ike" responder-spi)
    encr=$(swan_ike "$side" "$ike" encr-alg)
    size=$(swan_ike "$side" "$ike" encr-keysize)
    integ=$(swan_ike "$side" "$ike" integ-alg)
    [ -n "$id" ] || { _swan_fail "swan_ike_keys: no IKE SA $ike on $side"; return 1; }
    /usr/bin/python3 - "$SWAN_DIR/$side/charon.log" "<$ike|$id>" "$spi_i" "$spi_r" "$encr" "$size" "$integ" <<'EOF'
import re, sys
log, tag, spi_i, spi_r, encr, size, integ = sys.argv[1:]
enc_names = {("AES_CBC", s): f"AES-CBC-{s} [RFC3602]" for s in ("128", "192", "256")}
enc_names.update({("AES_GCM_16", s): f"AES-GCM-{s} with 16 octet ICV [RFC5282]" for s in ("128", "192", "256")})
integ_names = {"": "NONE [RFC4306]", "HMAC_SHA2_256_128": "HMAC_SHA2_256_128 [RFC4868]",
               "HMAC_SHA2_384_192": "HMAC_SHA2_384_192 [RFC4868]",
               "HMAC_SHA2_512_256": "HMAC_SHA2_512_256 [RFC4868]", "HMAC_SHA1_96": "HMAC_SHA1_96 [RFC2404]"}
if (encr, size) not in enc_names or integ not in integ_names:
    sys.exit(f"swan_ike_keys: Wireshark cannot decrypt {encr} {size} {integ}")
keys, cur, want = {}, None, 0
head = re.compile(r"Sk_(ei|er|ai|ar) secret => (\d+) bytes")
row = re.compile(r"^\s*\d+: ((?:[0-9A-F]{2} )*[0-9A-F]{2})")
for line in open(log, errors="replace"):
    at = line.find(tag + " ")
    if at < 0:
        continue
    text = line[at + len(tag) + 1:].rstrip("\n")
    m = head.search(text)
    if m:
        cur, want = m.group(1), int(m.group(2))
        keys[cur] = ""
        continue
    m = row.match(text)
    if cur and m:
        keys[cur] += "".join(m.group(1).split()[:want - len(keys[cur]) // 2]).lower()
        if len(keys[cur]) // 2 >= want:
            cur = None
    else:
        cur = None
need = ["ei", "er"] + (["ai", "ar"] if integ else [])
if any(k not in keys for k in need):
    sys.exit(f"swan_ike_keys: no keys of {tag} in {log} (SWAN_LOG with ike=4?)")
# Wireshark's uat: bytes as bare hex, the algorithms (its names) in quotes.
print(f'{spi_i},{spi_r},{keys["ei"]},{keys["er"]},"{enc_names[(encr, size)]}",'
      f'{keys.get("ai", "")},{keys.get("ar", "")},"{integ_names[integ]}"')
EOF
}
