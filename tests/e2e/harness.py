# SPDX-License-Identifier: BSD-2-Clause
"""harness.py: start real herald processes on loopback and talk to them.

Herald(args=[...]) starts $HERALD_BIN on a fresh temporary folder with its
database there, listening on 127.0.0.1 with a kernel-chosen port (and a unix
socket when unix=True), logging to DIR/herald.log; it returns once herald has
logged that it is ready. stop() sends SIGTERM and checks the exit code.

The event log is SQLite unless a Redis is in use: Herald(redis=RedisServer)
for one herald, or use_redis(server) for every Herald the process starts
after it (test_redis_backend.py reruns SQLite tests that way). With Redis,
a herald's stream name is derived from its database path, so Herald(db=
other.db) shares other's log on either backend. h.insert() and
h.stored_events() write and read the log as another program would.
"""
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

HERALD_BIN = os.environ.get("HERALD_BIN", "build/herald")


# The RedisServer every Herald() uses for its event log unless told otherwise
# (use_redis); None: SQLite.
REDIS = None
_DEFAULT = object()


def use_redis(server):
    """Make every Herald started afterwards in this process keep its log in
    server (a RedisServer), or in SQLite again with None."""
    global REDIS
    REDIS = server


def redis_stream_for(db):
    """The redis_stream name a herald with database path db uses: equal paths,
    equal names, so Herald(db=...) shares a log on both backends."""
    return "t" + hashlib.sha1(os.path.abspath(db).encode()).hexdigest()[:12]


class Herald:
    def __init__(self, args=(), unix=False, db=None, dir=None, env=None, config=None, wait=True,
                 listen=True, stdin=None, pass_fds=(), preexec_fn=None, redis=_DEFAULT, redis_stream=None,
                 redis_db=None):
        self.dir = dir or tempfile.mkdtemp(prefix="herald-test-")
        self.db = db or os.path.join(self.dir, "herald.db")
        self.sock_path = os.path.join(self.dir, "herald.sock") if unix else None
        self.logpath = os.path.join(self.dir, "herald.log")
        # redis: a RedisServer holding the log (the `redis_url` key), None for
        # SQLite; by default whatever use_redis() chose.
        self.redis = REDIS if redis is _DEFAULT else redis
        self.redis_stream = redis_stream or redis_stream_for(self.db)
        self.redis_db = redis_db  # a database number other than 0, in the URL
        cmd = [HERALD_BIN, "--db", self.db]
        if self.redis is not None:
            cmd += ["--redis-url", self.redis.url_for(redis_db), "--redis-stream", self.redis_stream]
        if config is not None:
            cpath = os.path.join(self.dir, "herald.conf")
            with open(cpath, "w") as f:
                f.write(config)
            cmd += ["--config", cpath]
        if listen:
            cmd += ["--listen", "127.0.0.1:0"]
            if unix:
                cmd += ["--listen", "unix:" + self.sock_path]
        cmd += list(args)
        self.cmd = cmd
        full_env = dict(os.environ)
        full_env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        full_env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        full_env.pop("NOTIFY_SOCKET", None)
        full_env.pop("LISTEN_FDS", None)
        full_env.pop("JOURNAL_STREAM", None)
        if env:
            full_env.update(env)
        self.logf = open(self.logpath, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=self.logf, env=full_env,
                                     stdin=stdin if stdin is not None else subprocess.DEVNULL,
                                     pass_fds=pass_fds, preexec_fn=preexec_fn)
        self.pid = self.proc.pid
        self.port = None
        self.tls_port = None  # a tls:127.0.0.1:0 listener's port
        if wait:
            self.wait_ready()

    def log(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")

    def log_size(self):
        """Characters logged so far (for wait_log(since=...))."""
        return len(self.log())

    def wait_log(self, pattern, timeout=10.0, since=0):
        """Wait until the log (from character offset since) matches the regex; return the match."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.log()[since:])
            if m:
                return m
            if self.proc.poll() is not None:
                raise AssertionError(f"herald exited with {self.proc.returncode} before logging {pattern!r}:\n{self.log()}")
            time.sleep(0.02)
        raise AssertionError(f"herald did not log {pattern!r} within {timeout} s:\n{self.log()}")

    def wait_ready(self, timeout=15.0):
        self.wait_log(r"herald ready", timeout)
        m = re.search(r"listening on tcp 127\.0\.0\.1:(\d+)", self.log())
        if m:
            self.port = int(m.group(1))
        m = re.search(r"listening on tls 127\.0\.0\.1:(\d+)", self.log())
        if m:
            self.tls_port = int(m.group(1))
        # herald is ready before its Redis connections are up (until then it
        # answers publishes 503); with a Redis running, wait for them too.
        if self.redis is not None and self.redis.running() and self.port is not None:
            try:
                wait_until(self.log_ok, timeout=timeout, what=f"herald to reach Redis at {self.redis.url}")
            except AssertionError as e:
                raise AssertionError(f"{e}; herald's log:\n{self.log()}") from None
        return self

    def log_ok(self):
        """True if /api/health says the event log is reachable."""
        st, _, body = request(self.port, "GET", "/api/health")
        return st == 200 and json.loads(body).get("log") == "ok"

    def listeners(self):
        """[(kind, address, backlog)] from the `listening on` log lines, e.g.
        ("tcp", "127.0.0.1:41234", 1024), ("tcp", "[::1]:40000", 1024),
        ("unix", "/tmp/.../herald.sock", 1024), ("tls", "127.0.0.1:40001", 1024)."""
        return [(m.group(1), m.group(2), int(m.group(3)))
                for m in re.finditer(r"listening on (tcp|tls|unix) (\S+) \(backlog (\d+)\)", self.log())]

    def port_of(self, host):
        """The port of the TCP listener on host ("127.0.0.1" or "::1"); None if absent."""
        want = f"[{host}]" if ":" in host else host
        for kind, addr, _ in self.listeners():
            if kind == "tcp" and addr.rpartition(":")[0] == want:
                return int(addr.rpartition(":")[2])
        return None

    def rss_kb(self):
        """herald's resident set size (VmRSS) in KiB."""
        return rss_kb(self.pid)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def insert(self, type="message", topic="news", data="", public=True):
        """Write one event into the log the way another program would
        (sqlite3 INSERT, or redis-cli FCALL herald_publish); returns its id.
        Works while herald is stopped too."""
        return self.insert_many([(type, topic, data, public)])

    def insert_many(self, events):
        """Write [(type, topic, data, public), ...] in one transaction (one
        FCALL with Redis); returns the first id (the rest follow it)."""
        if self.redis is not None:
            return self.redis.publish(self.redis_stream, events, db=self.redis_db)
        return insert_sqlite(self.db, events)

    def stored_events(self):
        """Every event in the log, oldest first: [{'id', 'type', 'topic',
        'data', 'public'}], read as another program would."""
        if self.redis is not None:
            return self.redis.stored_events(self.redis_stream, db=self.redis_db)
        out = subprocess.run(["sqlite3", "-json", "-cmd", ".timeout 5000", self.db,
                              "SELECT id, type, topic, data, public FROM events ORDER BY id"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        assert out.returncode == 0, out.stderr.decode(errors="replace")
        rows = json.loads(out.stdout or b"[]")
        return [{"id": r["id"], "type": r["type"], "topic": r["topic"], "data": r["data"],
                 "public": bool(r["public"])} for r in rows]

    def last_id(self):
        """The newest id in the log (0 when it is empty)."""
        if self.redis is not None:
            return self.redis.last_id(self.redis_stream, db=self.redis_db)
        return int(sqlite(self.db, "SELECT coalesce(max(id), 0) FROM events"))

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=10.0, expect_code=0):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"herald did not exit within {timeout} s of SIGTERM:\n{self.log()}")
        self.logf.close()
        if expect_code is not None and code != expect_code:
            raise AssertionError(f"herald exited with {code}, expected {expect_code}:\n{self.log()}")
        return code

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.logf.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            if exc[0] is None:
                self.stop()
            else:
                self.kill()


def connect(port=None, path=None, timeout=5.0, host="127.0.0.1", source=None, rcvbuf=None):
    """A blocking socket to herald's TCP port or unix socket path.
    host may be an IPv6 literal ("::1"); source binds the client end to that
    address first (e.g. "127.0.0.2"); rcvbuf sets SO_RCVBUF before connect,
    which is what limits the receive window the kernel advertises."""
    if path:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    else:
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        if rcvbuf is not None:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if source is not None:
            s.bind((source, 0))
        s.settimeout(timeout)
        s.connect(path if path else (host, port))
    except BaseException:
        s.close()
        raise
    return s


def request(port, method, target, body=None, headers=None, path=None, timeout=5.0, host="127.0.0.1", source=None):
    """One HTTP/1.1 request on a new connection (Connection: close).
    Returns (status, headers dict with lower-case names, body bytes)."""
    headers = dict(headers or {})
    headers.setdefault("Host", "127.0.0.1")
    headers.setdefault("Connection", "close")
    if body is not None:
        if not isinstance(body, (bytes, bytearray)):
            body = json.dumps(body).encode() if not isinstance(body, str) else body.encode()
        headers.setdefault("Content-Type", "application/json")
        headers["Content-Length"] = str(len(body))
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    s = connect(port, path, timeout, host=host, source=source)
    try:
        s.sendall(head.encode() + (body or b""))
        return read_response(s)
    finally:
        s.close()


def read_response(s):
    """Read one whole response (Content-Length framed, or until close)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise AssertionError(f"connection closed before a whole response head: {buf!r}")
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split(" ")[1])
    hdrs = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    if "content-length" in hdrs:
        n = int(hdrs["content-length"])
        while len(rest) < n:
            d = s.recv(65536)
            if not d:
                break
            rest += d
        return status, hdrs, rest[:n]
    while True:
        d = s.recv(65536)
        if not d:
            break
        rest += d
    return status, hdrs, rest


def publish(port, type="message", topic="news", data="hello", public=True, token=None, path=None):
    """POST /api/events; returns the new id (asserts 201)."""
    h = {"Authorization": f"Bearer {token}"} if token else {}
    st, _, body = request(port, "POST", "/api/events", {"type": type, "topic": topic, "data": data, "public": public},
                          headers=h, path=path)
    assert st == 201, f"publish got {st}: {body!r}"
    return json.loads(body)["id"]


class Stream:
    """A raw SSE reader on its own socket. events() parses frames as they come."""

    def __init__(self, port=None, query="", headers=None, path=None, timeout=5.0, host="127.0.0.1",
                 source=None, rcvbuf=None, sock=None):
        # sock: an already connected socket to use instead of opening one.
        self.sock = sock if sock is not None else connect(port, path, timeout, host=host, source=source,
                                                          rcvbuf=rcvbuf)
        self.sock.settimeout(timeout)
        headers = dict(headers or {})
        headers.setdefault("Host", "127.0.0.1")
        target = "/api/events/stream" + (("?" + query) if query else "")
        head = f"GET {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        self.sock.sendall(head.encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            d = self.sock.recv(65536)
            if not d:
                raise AssertionError(f"stream closed before headers: {self.buf!r}")
            self.buf += d
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        self.headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.closed = False

    def _frame(self):
        for sep in (b"\n\n",):
            i = self.buf.find(sep)
            if i >= 0:
                raw, self.buf = self.buf[:i], self.buf[i + 2:]
                return raw
        return None

    def frames(self, timeout=5.0):
        """Yield raw frames (bytes, without the blank line) until timeout."""
        deadline = time.monotonic() + timeout
        while True:
            f = self._frame()
            if f is not None:
                yield f
                continue
            left = deadline - time.monotonic()
            if left <= 0 or self.closed:
                return
            self.sock.settimeout(left)
            try:
                d = self.sock.recv(65536)
            except socket.timeout:
                return
            if not d:
                self.closed = True
                continue
            self.buf += d

    def events(self, n=None, timeout=5.0):
        """Collect parsed events ({'id','event','data'}; comments and retry
        skipped) until n have arrived or timeout passes."""
        out = []
        if n == 0:
            return out
        for f in self.frames(timeout):
            ev = parse_frame(f)
            if ev is None:
                continue
            out.append(ev)
            if n is not None and len(out) >= n:
                break
        return out

    def read_body(self, timeout=5.0):
        """For a refused stream: the Content-Length framed body."""
        n = int(self.headers.get("content-length", "0"))
        deadline = time.monotonic() + timeout
        while len(self.buf) < n and time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            d = self.sock.recv(65536)
            if not d:
                break
            self.buf += d
        body, self.buf = self.buf[:n], self.buf[n:]
        return body

    def read_exact(self, n, timeout=5.0):
        """The next n raw bytes of the stream (fewer if it closes or times out)."""
        deadline = time.monotonic() + timeout
        while len(self.buf) < n and not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.sock.settimeout(left)
            try:
                d = self.sock.recv(65536)
            except socket.timeout:
                break
            if not d:
                self.closed = True
                break
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def opening(self, timeout=5.0):
        """Consume and return the opening frame (up to and including the first blank line)."""
        deadline = time.monotonic() + timeout
        while b"\n\n" not in self.buf and not self.closed and time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                d = self.sock.recv(65536)
            except socket.timeout:
                break
            if not d:
                self.closed = True
                break
            self.buf += d
        i = self.buf.find(b"\n\n")
        if i < 0:
            raise AssertionError(f"no opening frame; got {self.buf!r}")
        out, self.buf = self.buf[:i + 2], self.buf[i + 2:]
        return out

    def wait_closed(self, timeout=5.0):
        """Read until the server closes the stream (what arrives stays in
        self.buf); True if it closed within timeout."""
        deadline = time.monotonic() + timeout
        while not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                d = self.sock.recv(65536)
            except socket.timeout:
                return False
            except ConnectionResetError:
                self.closed = True
                break
            if not d:
                self.closed = True
                break
            self.buf += d
        return True

    def close(self):
        self.sock.close()


def parse_frame(raw):
    """Parse one SSE frame; None when it carries no data (comment/retry)."""
    ev = {"id": None, "event": "message", "data": None}
    data = []
    for line in raw.decode().split("\n"):
        if line.startswith(":") or not line:
            continue
        k, _, v = line.partition(":")
        if v.startswith(" "):
            v = v[1:]
        if k == "data":
            data.append(v)
        elif k == "id":
            ev["id"] = int(v)
        elif k == "event":
            ev["event"] = v
    if not data:
        return None
    ev["data"] = "\n".join(data)
    return ev


def rss_kb(pid):
    """VmRSS of a process in KiB, from /proc/PID/status."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def stop_all(procs):
    """End what a test started, newest first: herald nodes killed (a test
    that failed midway has nothing to wait for), Redis servers and
    sentinels closed."""
    for p in reversed(procs):
        if isinstance(p, Herald):
            p.kill()
        else:
            p.close()


def wait_until(fn, timeout=5.0, interval=0.02, what="condition"):
    """Poll fn() until it returns a true value (returned) or timeout passes (AssertionError)."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class PortTaken(Exception):
    """Raised by a start function given to on_spare_ports() when the process it
    started exited because another socket already held one of its ports."""


def _ephemeral_range():
    """(low, high) of the ports the kernel hands out to connect() and bind(port 0)."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo, hi = (int(x) for x in f.read().split())
    return lo, hi


def _port_is_bound(port):
    """True if some TCP socket on this host (any IPv4 address, any state, TIME_WAIT
    included) holds `port`: a wildcard bind without SO_REUSEADDR then fails."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("0.0.0.0", port))
        return False
    except OSError:
        return True
    finally:
        s.close()


def spare_ports(count=1):
    """`count` distinct TCP ports, for a process under test that cannot listen on
    port 0 and say which port it got (Caddy, systemd-socket-activate). A number
    read from a closed port-0 socket lies in the ephemeral range, where any
    connect() on the host may take it before the process binds it; these are
    drawn at random from outside that range (10000 up to it, or above it) and
    skip ports bound right now. Another process can still bind one first: start
    the process under test through on_spare_ports(), which retries."""
    lo, hi = _ephemeral_range()
    below = range(10000 if lo > 11000 else 1024, lo)
    above = range(hi + 1, 65536)
    n = len(below) + len(above)
    assert n > 0, f"no ports outside the ephemeral range {lo}-{hi}"
    rng = random.SystemRandom()
    ports = []
    for _ in range(1000):
        i = rng.randrange(n)
        port = below[i] if i < len(below) else above[i - len(below)]
        if port not in ports and not _port_is_bound(port):
            ports.append(port)
            if len(ports) == count:
                return ports
    raise AssertionError(f"found only {len(ports)} of {count} unbound ports outside {lo}-{hi}")


def on_spare_ports(start, count=1, attempts=8):
    """Return start(*ports) for `count` fresh spare_ports(). When start raises
    PortTaken (it must have ended what it started), call it again with new
    ports, at most `attempts` times in all."""
    for _ in range(attempts):
        try:
            return start(*spare_ports(count))
        except PortTaken as e:
            last = e
    raise AssertionError(f"a port was already taken on each of {attempts} tries; the last: {last}")


def sqlite(db, sql, timeout_ms=5000):
    """Run one SQL text with the sqlite3 CLI as a separate process (as another
    program writing the events table would); returns its stdout without the
    final newline."""
    r = subprocess.run(["sqlite3", "-cmd", f".timeout {timeout_ms}", db, sql],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    assert r.returncode == 0, f"sqlite3 {sql!r} failed ({r.returncode}): {r.stderr.decode(errors='replace')}"
    out = r.stdout.decode()
    return out[:-1] if out.endswith("\n") else out


def parse_head(head):
    """(status, headers with lower-case names) from a response head without the blank line."""
    lines = head.decode(errors="replace").split("\r\n")
    parts = lines[0].split(" ")
    assert len(parts) >= 2 and parts[0] in ("HTTP/1.1", "HTTP/1.0"), f"bad status line {lines[0]!r}"
    status = int(parts[1])
    hdrs = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs


class HttpConn:
    """One keep-alive connection: send raw bytes or requests, read responses
    one by one (Content-Length framed) without losing pipelined bytes."""

    def __init__(self, port=None, path=None, timeout=5.0, host="127.0.0.1", source=None, nodelay=True):
        self.sock = connect(port, path, timeout, host=host, source=source)
        if nodelay and not path:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.closed = False

    def send(self, data):
        self.sock.sendall(data)

    @staticmethod
    def format(method, target, body=None, headers=None):
        """Bytes of one HTTP/1.1 request (keep-alive; Host and Content-Length filled in)."""
        headers = dict(headers or {})
        headers.setdefault("Host", "127.0.0.1")
        if body is not None:
            if not isinstance(body, (bytes, bytearray)):
                body = json.dumps(body).encode() if not isinstance(body, str) else body.encode()
            headers.setdefault("Content-Type", "application/json")
            headers["Content-Length"] = str(len(body))
        head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        return head.encode() + (bytes(body) if body is not None else b"")

    def request(self, method, target, body=None, headers=None):
        self.send(self.format(method, target, body, headers))
        return self.read_response()

    def _fill(self):
        d = self.sock.recv(262144)
        if not d:
            self.closed = True
            return False
        self.buf += d
        return True

    def read_response(self):
        """(status, headers, body) of the next response; AssertionError if the
        connection closes first."""
        while b"\r\n\r\n" not in self.buf:
            if not self._fill():
                raise AssertionError(f"connection closed before a whole response head: {self.buf!r}")
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        status, hdrs = parse_head(head)
        n = int(hdrs.get("content-length", "0"))
        while len(self.buf) < n:
            if not self._fill():
                raise AssertionError(f"connection closed inside a response body ({len(self.buf)} of {n} bytes)")
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, hdrs, body

    def wait_closed(self, timeout=5.0):
        """True if the server closes the connection within timeout (bytes it
        sends before closing stay in self.buf)."""
        deadline = time.monotonic() + timeout
        while not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                self._fill()
            except socket.timeout:
                return False
            except ConnectionResetError:
                self.closed = True
        return True

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def publish_many(port, events, window=32, token=None, path=None):
    """POST every event (a dict, or bytes taken as the raw JSON body) on one
    keep-alive connection, keeping up to `window` requests in flight; returns
    the ids in order (asserts each answer is 201)."""
    h = {"Authorization": f"Bearer {token}"} if token else {}
    ids = []
    with HttpConn(port, path, timeout=30.0) as c:
        pending = 0
        i = 0
        n = len(events)
        while len(ids) < n:
            batch = b""
            while i < n and pending < window:
                ev = events[i]
                batch += HttpConn.format("POST", "/api/events", ev if isinstance(ev, (bytes, bytearray)) else
                                         json.dumps(ev, separators=(",", ":")).encode(), h)
                i += 1
                pending += 1
            if batch:
                c.send(batch)
            st, _, body = c.read_response()
            assert st == 201, f"publish #{len(ids)} got {st}: {body!r}"
            ids.append(json.loads(body)["id"])
            pending -= 1
    return ids


def raw_exchange(port, data, path=None, timeout=5.0, host="127.0.0.1"):
    """Send raw bytes on a new connection and read one response:
    (status, headers, body). AssertionError if no whole response comes."""
    c = HttpConn(port, path, timeout, host=host)
    try:
        c.send(data)
        return c.read_response()
    finally:
        c.close()


def check_refusal(status, headers, body, expected):
    """Assert a refusal: the expected status, and a body that is the one-line
    JSON {"error":"<cause>","status":N} with the same N."""
    assert status == expected, f"expected {expected}, got {status}: {body!r}"
    text = body.rstrip(b"\n")
    assert b"\n" not in text and body.count(b"\n") <= 1, f"refusal body is not one line: {body!r}"
    try:
        j = json.loads(text)
    except ValueError:
        raise AssertionError(f"refusal body is not JSON: {body!r}")
    assert isinstance(j, dict) and set(j) == {"error", "status"}, f"refusal body keys: {body!r}"
    assert j["status"] == expected and isinstance(j["error"], str) and j["error"], f"refusal body: {body!r}"
    assert headers.get("content-type", "").startswith("application/json"), f"refusal Content-Type: {headers}"


def _sql_text(v):
    return "'" + str(v).replace("'", "''") + "'"


def insert_sqlite(db, events):
    """INSERT [(type, topic, data, public), ...] into db's events table in one
    transaction with the sqlite3 CLI; returns the first id (the others follow
    it, since the transaction holds the write lock)."""
    sql = "BEGIN IMMEDIATE; " + "".join(
        f"INSERT INTO events(type,topic,data,public) VALUES({_sql_text(t)},{_sql_text(tp)},{_sql_text(d)},"
        f"{1 if p else 0}); " for t, tp, d, p in events) + \
        f"SELECT last_insert_rowid() - {len(events) - 1}; COMMIT;"
    return int(sqlite(db, sql))


class RedisError(Exception):
    """An error reply (-ERR ...) from Redis."""


class RedisClient:
    """A minimal blocking RESP2 client, enough to read what herald stored and
    to watch a Redis come up (herald's own inserts go through redis-cli)."""

    def __init__(self, port=None, path=None, timeout=5.0):
        self.sock = connect(port, path, timeout)
        self.buf = b""

    def command(self, *args):
        """Send one command (arguments as str, bytes or int); return the reply:
        int, bytes, None, a list of those, or raise RedisError."""
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self._reply()

    def _line(self):
        while b"\r\n" not in self.buf:
            d = self.sock.recv(65536)
            if not d:
                raise ConnectionError("redis closed the connection")
            self.buf += d
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RedisError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                d = self.sock.recv(65536)
                if not d:
                    raise ConnectionError("redis closed the connection")
                self.buf += d
            v, self.buf = self.buf[:n], self.buf[n + 2:]
            return v
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise AssertionError(f"unexpected RESP line {line!r}")

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


REDIS_SERVER = os.environ.get("REDIS_SERVER", "redis-server")


class RedisServer:
    """Debian's redis-server run by the test itself (never the system
    service): on a spare 127.0.0.1 port, or on DIR/redis.sock with unix=True,
    with its AOF (appendfsync everysec) in a temporary folder and no RDB
    snapshots. stop() (SIGTERM: Redis writes its AOF out and exits), kill()
    (SIGKILL) and start() again on the same port and folder, by pid only.
    password: the default user's (requirepass), then also in url."""

    def __init__(self, unix=False, dir=None, args=(), password=None):
        self.dir = dir or tempfile.mkdtemp(prefix="herald-redis-")
        self.unix = unix
        self.password = password
        self.sock_path = os.path.join(self.dir, "redis.sock") if unix else None
        self.args = list(args)
        self.logpath = os.path.join(self.dir, "redis.log")
        self.port = None
        self.proc = None
        self.logf = None
        try:
            if unix:
                self.start()
            else:
                self.port = on_spare_ports(self._start)
                self._wait_ping()
        except BaseException:
            self.close()
            raise

    @property
    def url(self):
        """What herald's redis_url says for this server."""
        if self.unix:
            return f"unix:{self.sock_path}"
        auth = f"default:{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}"

    def url_for(self, db=None):
        """The url with a database number (None or 0: the default one)."""
        if not db:
            return self.url
        return f"{self.url}?db={db}" if self.unix else f"{self.url}/{db}"

    @property
    def pid(self):
        return self.proc.pid

    def _cmd(self, port):
        cmd = [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(port or 0), "--dir", self.dir,
               "--save", "", "--appendonly", "yes", "--appendfsync", "everysec", "--daemonize", "no",
               "--logfile", "", "--loglevel", "notice"]
        if self.unix:
            cmd += ["--unixsocket", self.sock_path, "--unixsocketperm", "700"]
        if self.password:
            cmd += ["--requirepass", self.password]
        return cmd + self.args

    def _start(self, port):
        """Start redis-server on port; PortTaken (after it exited) when the
        port was held by another socket."""
        if self.logf is not None:
            self.logf.close()
        self.logf = open(self.logpath, "ab")
        since = self.log_size()
        self.proc = subprocess.Popen(self._cmd(port), stdout=self.logf, stderr=self.logf,
                                     stdin=subprocess.DEVNULL)
        # Redis logs this once it listens, and exits when it cannot bind.
        # ("Ready to accept connections tcp", or "... ready to accept
        # connections at PATH" for a unix socket alone).
        wait_until(lambda: self.proc.poll() is not None or
                   "ready to accept connections" in self.log()[since:].lower(),
                   timeout=15, what="redis-server to start")
        if self.proc.poll() is not None:
            if "Address already in use" in self.log()[since:]:
                raise PortTaken(f"redis-server on 127.0.0.1:{port}: {self.log()[since:][-300:]}")
            raise AssertionError(f"redis-server exited with {self.proc.returncode}:\n{self.log()[since:]}")
        return port

    def _ping(self):
        try:
            with self.client(timeout=1) as c:
                return c.command("PING") == b"PONG"
        except (OSError, RedisError):  # not listening yet, or LOADING its AOF
            return False

    def _wait_ping(self):
        wait_until(self._ping, timeout=15, what="redis-server to answer PING")

    def start(self):
        """Start (again) on the same port or socket and folder; returns once
        it answers PING. A port taken in the meantime is retried for 5 s."""
        deadline = time.monotonic() + 5
        while True:
            try:
                self._start(self.port)
                break
            except PortTaken:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self._wait_ping()
        return self

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=10.0):
        """SIGTERM: Redis flushes its AOF and exits; wait for it."""
        if self.running():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"redis-server did not exit within {timeout} s of SIGTERM")

    def kill(self):
        """SIGKILL: whatever the AOF has not written yet is lost."""
        if self.running():
            self.proc.kill()
            self.proc.wait()

    def close(self):
        """Stop it and remove its folder."""
        self.kill()
        if self.logf is not None:
            self.logf.close()
            self.logf = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")

    def log_size(self):
        try:
            return len(self.log())
        except FileNotFoundError:
            return 0

    def client(self, timeout=5.0):
        c = RedisClient(self.port, self.sock_path, timeout)
        if self.password:
            try:
                c.command("AUTH", self.password)
            except BaseException:
                c.close()
                raise
        return c

    def command(self, *args):
        """One command on a new connection; its reply."""
        with self.client() as c:
            return c.command(*args)

    def cli(self, *args, stdin=None, db=None):
        """redis-cli against this server; (exit code, stdout text, stderr text)."""
        cmd = ["redis-cli"] + (["-s", self.sock_path] if self.unix else ["-h", "127.0.0.1", "-p", str(self.port)])
        if db is not None:
            cmd += ["-n", str(db)]
        if self.password:
            cmd += ["--no-auth-warning", "-a", self.password]
        r = subprocess.run(cmd + [str(a) for a in args], input=stdin, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30)
        return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")

    @staticmethod
    def keys(stream):
        """(the stream key, the id counter key) of redis_stream = stream."""
        return "{%s}:events" % stream, "{%s}:last" % stream

    def publish(self, stream, events, db=None):
        """FCALL herald_publish with redis-cli, as another program publishes:
        [(type, topic, data, public), ...] in one call; returns the first id."""
        args = []
        for t, tp, d, p in events:
            args += [t, tp, d, 1 if p else 0]
        rc, out, err = self.cli("FCALL", "herald_publish", 2, *self.keys(stream), *args, db=db)
        text = out.strip()
        assert rc == 0 and text.lstrip("-").isdigit(), f"FCALL herald_publish: exit {rc}: {out!r} {err!r}"
        return int(text)

    def stored_events(self, stream, db=None):
        """Every entry of the stream, oldest first, as herald's events."""
        with self.client() as c:
            if db is not None:
                c.command("SELECT", db)
            entries = c.command("XRANGE", self.keys(stream)[0], "-", "+")
        out = []
        for sid, fields in entries:
            f = {fields[i].decode(): fields[i + 1].decode() for i in range(0, len(fields), 2)}
            n, _, seq = sid.decode().partition("-")
            assert seq == "0", f"stream id {sid!r} is not <n>-0"
            out.append({"id": int(n), "type": f["type"], "topic": f["topic"], "data": f["data"],
                        "public": f["public"] == "1"})
        return out

    def last_id(self, stream, db=None):
        """The id of the newest entry of the stream (0 when empty)."""
        with self.client() as c:
            if db is not None:
                c.command("SELECT", db)
            r = c.command("XREVRANGE", self.keys(stream)[0], "+", "-", "COUNT", 1)
        return int(r[0][0].split(b"-")[0]) if r else 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


REDIS_SENTINEL = os.environ.get("REDIS_SENTINEL", "redis-sentinel")


class RedisSentinel:
    """Debian's redis-sentinel run by the test itself: on a spare 127.0.0.1
    port, its configuration (which Sentinel rewrites as it learns) in a
    temporary folder, watching the primary on 127.0.0.1:primary_port under
    the name master. close() stops it by pid and removes its folder."""

    def __init__(self, primary_port, master="mymaster", quorum=2, down_after_ms=1000, failover_timeout_ms=2000):
        self.dir = tempfile.mkdtemp(prefix="herald-sentinel-")
        self.master = master
        self.settings = [f"sentinel monitor {master} 127.0.0.1 {primary_port} {quorum}",
                         f"sentinel down-after-milliseconds {master} {down_after_ms}",
                         f"sentinel failover-timeout {master} {failover_timeout_ms}",
                         f"sentinel parallel-syncs {master} 1"]
        self.logpath = os.path.join(self.dir, "sentinel.log")
        self.proc = None
        self.logf = None
        self.port = None
        try:
            self.port = on_spare_ports(self._start)
            wait_until(self._ping, timeout=15, what="redis-sentinel to answer PING")
        except BaseException:
            self.close()
            raise

    def _start(self, port):
        conf = os.path.join(self.dir, "sentinel.conf")
        with open(conf, "w") as f:
            f.write("\n".join([f"port {port}", "bind 127.0.0.1", "daemonize no", f"dir {self.dir}",
                               "logfile \"\""] + self.settings) + "\n")
        if self.logf is not None:
            self.logf.close()
        self.logf = open(self.logpath, "ab")
        since = self.log_size()
        self.proc = subprocess.Popen([REDIS_SENTINEL, conf], stdout=self.logf, stderr=self.logf,
                                     stdin=subprocess.DEVNULL)
        wait_until(lambda: self.proc.poll() is not None or "+monitor" in self.log()[since:],
                   timeout=15, what="redis-sentinel to start")
        if self.proc.poll() is not None:
            if "Address already in use" in self.log()[since:]:
                raise PortTaken(f"redis-sentinel on 127.0.0.1:{port}")
            raise AssertionError(f"redis-sentinel exited with {self.proc.returncode}:\n{self.log()[since:]}")
        return port

    def _ping(self):
        try:
            with RedisClient(self.port, timeout=1) as c:
                return c.command("PING") == b"PONG"
        except (OSError, RedisError):
            return False

    def command(self, *args):
        with RedisClient(self.port, timeout=5) as c:
            return c.command(*args)

    def primary(self):
        """The primary's port as this sentinel names it now."""
        r = self.command("SENTINEL", "get-master-addr-by-name", self.master)
        return int(r[1]) if r else None

    def sees(self, replicas, sentinels):
        """True once this sentinel knows that many replicas (online) and
        other sentinels, the state a failover needs."""
        reps = self.command("SENTINEL", "replicas", self.master)
        online = 0
        for r in reps:
            d = {r[i].decode(): r[i + 1].decode() for i in range(0, len(r), 2)}
            if "down" not in d.get("flags", "") and d.get("master-link-status") == "ok":
                online += 1
        return online >= replicas and len(self.command("SENTINEL", "sentinels", self.master)) >= sentinels

    def log(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")

    def log_size(self):
        try:
            return len(self.log())
        except FileNotFoundError:
            return 0

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.logf is not None:
            self.logf.close()
            self.logf = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
