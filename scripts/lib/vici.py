"""A minimal client of strongSwan's vici protocol, for timing charon from outside it
(bench/ike-setup): one persistent connection, so that a measurement pays no swanctl start
and no plugin loading per request.

vici (strongSwan's src/libcharon/plugins/vici/README.md) frames every packet with a
32-bit big-endian length, then one byte of packet type and, for named types, the name:

    CMD_REQUEST=0 name msg    CMD_RESPONSE=1 msg      CMD_UNKNOWN=2
    EVENT_REGISTER=3 name     EVENT_UNREGISTER=4 name EVENT_CONFIRM=5  EVENT_UNKNOWN=6
    EVENT=7 name msg

A message is a sequence of elements: SECTION_START=1 name, SECTION_END=2, KEY_VALUE=3 name
value, LIST_START=4 name, LIST_ITEM=5 value, LIST_END=6 (names: 8-bit length; values:
16-bit big-endian length). Messages are read here into dicts of bytes, lists and dicts.

Command line (used by bench/ike-setup; times on stdout, one a line):
    vici.py SOCKET latency CHILD IKE N     N times: initiate CHILD and wait for it (the
                                           initiate request returns once the CHILD_SA is
                                           installed), then terminate IKE and wait;
                                           prints each initiate's milliseconds
    vici.py SOCKET rate CHILD N TIMEOUT_S W
                                           N initiates of CHILD, W at first and one more
                                           each time one is up or failed (at most W in
                                           flight), counting child-updown events until N
                                           CHILD_SAs are up; prints "seconds up failed"
"""

import socket
import struct
import sys
import time

CMD_REQUEST, CMD_RESPONSE, CMD_UNKNOWN = 0, 1, 2
EVENT_REGISTER, EVENT_UNREGISTER, EVENT_CONFIRM, EVENT_UNKNOWN, EVENT = 3, 4, 5, 6, 7
SECTION_START, SECTION_END, KEY_VALUE, LIST_START, LIST_ITEM, LIST_END = 1, 2, 3, 4, 5, 6


class ViciError(Exception):
    """A reply vici did not give as the protocol says, or a refused command."""


def encode(msg):
    """A dict of str to str/int/bytes, list or dict, as a vici message."""
    out = bytearray()
    for k, v in msg.items():
        name = k.encode()
        if isinstance(v, dict):
            out += bytes([SECTION_START, len(name)]) + name + encode(v) + bytes([SECTION_END])
        elif isinstance(v, list):
            out += bytes([LIST_START, len(name)]) + name
            for item in v:
                b = item if isinstance(item, bytes) else str(item).encode()
                out += bytes([LIST_ITEM]) + struct.pack("!H", len(b)) + b
            out += bytes([LIST_END])
        else:
            b = v if isinstance(v, bytes) else str(v).encode()
            out += bytes([KEY_VALUE, len(name)]) + name + struct.pack("!H", len(b)) + b
    return bytes(out)


def decode(data):
    """A vici message as nested dicts (values bytes, lists of bytes)."""
    root, stack, pos, lst = {}, [], 0, None

    def take(n):
        nonlocal pos
        if pos + n > len(data):
            raise ViciError("message cut short")
        b = data[pos:pos + n]
        pos += n
        return b

    cur = root
    while pos < len(data):
        t = take(1)[0]
        if t in (SECTION_START, KEY_VALUE, LIST_START):
            name = take(take(1)[0]).decode()
        if t == SECTION_START:
            new = {}
            cur[name] = new
            stack.append(cur)
            cur = new
        elif t == SECTION_END:
            if not stack:
                raise ViciError("section end without a start")
            cur = stack.pop()
        elif t == KEY_VALUE:
            cur[name] = take(struct.unpack("!H", take(2))[0])
        elif t == LIST_START:
            lst = cur[name] = []
        elif t == LIST_ITEM:
            if lst is None:
                raise ViciError("list item outside a list")
            lst.append(take(struct.unpack("!H", take(2))[0]))
        elif t == LIST_END:
            lst = None
        else:
            raise ViciError(f"element type {t}")
    return root


class Session:
    """One connection to charon's vici socket."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""

    def _send(self, ptype, name=None, msg=b""):
        body = bytes([ptype])
        if name is not None:
            n = name.encode()
            body += bytes([len(n)]) + n
        body += msg
        self.sock.sendall(struct.pack("!I", len(body)) + body)

    def _recv(self):
        while True:
            if len(self.buf) >= 4:
                n = struct.unpack("!I", self.buf[:4])[0]
                if len(self.buf) >= 4 + n:
                    pkt, self.buf = self.buf[4:4 + n], self.buf[4 + n:]
                    return pkt
            d = self.sock.recv(65536)
            if not d:
                raise ViciError("charon closed the vici connection")
            self.buf += d

    def next_packet(self):
        """(type, event name or None, message dict)."""
        pkt = self._recv()
        t, rest = pkt[0], pkt[1:]
        name = None
        if t in (EVENT, CMD_REQUEST, EVENT_REGISTER, EVENT_UNREGISTER):
            name, rest = rest[1:1 + rest[0]].decode(), rest[1 + rest[0]:]
        return t, name, decode(rest) if t in (EVENT, CMD_RESPONSE) else {}

    def request(self, cmd, msg=None):
        """Sends command cmd and returns its response (events in between are skipped)."""
        self._send(CMD_REQUEST, cmd, encode(msg or {}))
        while True:
            t, _, m = self.next_packet()
            if t == CMD_RESPONSE:
                return m
            if t == CMD_UNKNOWN:
                raise ViciError(f"charon does not know the command {cmd}")

    def send_only(self, cmd, msg=None):
        """Sends command cmd without reading its response (read_response reads it)."""
        self._send(CMD_REQUEST, cmd, encode(msg or {}))

    def register(self, event):
        self._send(EVENT_REGISTER, event)
        t, _, _ = self.next_packet()
        if t != EVENT_CONFIRM:
            raise ViciError(f"event {event}: not confirmed ({t})")


def ok(m):
    return m.get("success") == b"yes"


def latency(path, child, ike, n):
    s = Session(path)
    for i in range(n):
        t0 = time.monotonic()
        m = s.request("initiate", {"child": child, "ike": ike, "timeout": 30000, "loglevel": -1})
        t1 = time.monotonic()
        if not ok(m):
            raise ViciError(f"initiate {i}: {m.get('errmsg', b'').decode()}")
        print(f"{(t1 - t0) * 1000:.3f}", flush=True)
        m = s.request("terminate", {"ike": ike, "timeout": 30000, "loglevel": -1})
        if not ok(m):
            raise ViciError(f"terminate {i}: {m.get('errmsg', b'').decode()}")


def rate(path, child, n, timeout, window):
    events = Session(path)
    events.register("child-updown")
    events.register("ike-updown")
    cmd = Session(path)

    def initiate():
        # timeout -1: charon queues the initiation and answers at once.
        cmd.send_only("initiate", {"child": child, "timeout": -1, "loglevel": -1})

    t0 = time.monotonic()
    sent = min(n, window)
    for _ in range(sent):
        initiate()
    up = failed = 0
    events.sock.settimeout(timeout)
    last = t0
    try:
        while up + failed < n:
            t, name, m = events.next_packet()
            if t != EVENT:
                continue
            # {up = yes, <ike name> = {...}} when up; no "up" when going down.
            if name == "child-updown" and m.get("up") == b"yes":
                up += 1
                last = time.monotonic()
            elif name == "ike-updown" and m.get("up") != b"yes":
                failed += 1
            else:
                continue
            if sent < n:
                initiate()
                sent += 1
    except socket.timeout:
        pass
    for _ in range(sent):
        t, _, m = cmd.next_packet()
        if t != CMD_RESPONSE or not ok(m):
            failed += 1
    print(f"{last - t0:.3f} {up} {failed}")


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    path, what = argv[1], argv[2]
    if what == "latency" and len(argv) == 6:
        latency(path, argv[3], argv[4], int(argv[5]))
    elif what == "rate" and len(argv) == 7:
        rate(path, argv[3], int(argv[4]), float(argv[5]), int(argv[6]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
