"""A client of iked's control socket, for timing iked from outside it (bench/ike-setup), as
scripts/lib/vici.py does charon: no ipsecctl process per request, one monitor connection
for the whole run.

The protocol (ipsecd::ike_ctl, spoken by `ipsecctl ike`): one request per connection, one
line ("up CONN", "up CONN new", "down CONN", ...), the client then shuts down its sending
half; the reply is "ok" or "error", a newline and a text, after which iked closes. iked
may send "working" lines first (none for these requests: they answer at once). "monitor"
keeps the connection open and streams iked's events, one line each, after an "ok" line:
"child-sa-installed reqid=N ..." once ipsecd holds a CHILD_SA, "ike-sa-down spi=..
reason=.." when an IKE SA goes, "child-sa-install-refused ..." when ipsecd refused one.

    request ──▶ iked: `up` answers at once ("initiating CONN ..."), the negotiation runs
                       on; its outcome comes as monitor events
    monitor ◀── child-sa-installed / ike-sa-down / child-sa-install-refused

Command line (used by bench/ike-setup; times on stdout, one a line):
    iked_ctl.py SOCKET latency CONN N    N times: `up CONN` and wait for its
                                         child-sa-installed event, then `down CONN` and
                                         wait for ike-sa-down; prints each bring-up's
                                         milliseconds, from the request to the event
    iked_ctl.py SOCKET rate CONN N TIMEOUT_S W
                                         N `up CONN new` requests, W at first and one more
                                         each time one is up or failed (at most W in
                                         flight), counting child-sa-installed events until
                                         N CHILD_SAs are up; prints "seconds up failed"
"""

import queue
import socket
import sys
import threading
import time

# What the reader thread queues when iked closes the stream.
EOF = object()


class IkedError(Exception):
    """A refused request, or a reply not as the protocol says."""


def request(path, line):
    """Sends one request and returns the reply's text; IkedError if iked refused it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(line.encode() + b"\n")
    s.shutdown(socket.SHUT_WR)
    buf = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        buf += d
    s.close()
    while buf.startswith(b"working\n"):
        buf = buf[len(b"working\n"):]
    head, _, text = buf.decode(errors="replace").partition("\n")
    if head == "ok":
        return text
    if head == "error":
        raise IkedError(f"{line}: {text.strip()}")
    raise IkedError(f"{line}: malformed reply {buf[:80]!r}")


class Monitor:
    """iked's event stream, line by line. A thread reads it as it comes: iked drops a
    subscriber whose socket is full rather than wait for it, and a burst of set-ups writes
    hundreds of lines while the main thread waits for its own requests' replies."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.sock.sendall(b"monitor\n")
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        first = self.next_line(10)
        if first != "ok":
            raise IkedError(f"monitor refused: {first!r}")

    def _read(self):
        buf = b""
        while True:
            d = self.sock.recv(65536)
            if not d:
                self.lines.put(EOF)
                return
            buf += d
            *whole, buf = buf.split(b"\n")
            for line in whole:
                self.lines.put(line.decode(errors="replace"))

    def next_line(self, timeout):
        """The next event line, or None after `timeout` seconds without one."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if line is EOF:
            raise IkedError("iked closed the monitor stream (a subscriber that reads too slowly is dropped)")
        return line

    def wait_for(self, prefix, what, timeout=30):
        """Skips events until one starting with `prefix`; IkedError on a failure first."""
        while True:
            line = self.next_line(timeout)
            if line is None:
                raise IkedError(f"no {prefix} within {timeout} s ({what})")
            if line.startswith(prefix):
                return line
            if prefix != "ike-sa-down" and line.startswith(("ike-sa-down", "child-sa-install-refused")):
                raise IkedError(f"{what}: {line}")


def latency(path, conn, n):
    mon = Monitor(path)
    for i in range(n):
        t0 = time.monotonic()
        request(path, f"up {conn}")
        mon.wait_for("child-sa-installed", f"set-up {i}")
        t1 = time.monotonic()
        print(f"{(t1 - t0) * 1000:.3f}", flush=True)
        request(path, f"down {conn}")
        mon.wait_for("ike-sa-down", f"take-down {i}")


def rate(path, conn, n, timeout, window):
    mon = Monitor(path)
    failed = 0

    def initiate():
        nonlocal failed
        try:
            request(path, f"up {conn} new")
        except IkedError as e:
            print(e, file=sys.stderr)
            failed += 1

    t0 = time.monotonic()
    sent = min(n, window)
    for _ in range(sent):
        initiate()
    up = 0
    last = t0
    while up + failed < n:
        line = mon.next_line(timeout)
        if line is None:
            break
        if line.startswith("child-sa-installed"):
            up += 1
            last = time.monotonic()
        elif line.startswith(("ike-sa-down", "child-sa-install-refused")):
            failed += 1
        else:
            continue
        if sent < n:
            initiate()
            sent += 1
    print(f"{last - t0:.3f} {up} {failed}")


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    path, what = argv[1], argv[2]
    if what == "latency" and len(argv) == 5:
        latency(path, argv[3], int(argv[4]))
    elif what == "rate" and len(argv) == 7:
        rate(path, argv[3], int(argv[4]), float(argv[5]), int(argv[6]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except IkedError as e:
        print(f"iked_ctl: {e}", file=sys.stderr)
        sys.exit(1)
