# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: herald behind a real Caddy (the Debian package), over TCP and
over the unix socket. The Caddyfile is conf/Caddyfile itself with only the
site address, the upstream and the site root replaced (and the site bound to
127.0.0.1 alone), so the directives operators install are the ones tested:
an event reaches 100 readers through Caddy at once (with nothing after it
that could push a buffer out: heartbeats an hour apart), its time printed; the
per-address cap counts the client address Caddy forwards; a spoofed
X-Forwarded-For is ignored, whether sent through Caddy or straight to herald
from a peer that is not a trusted proxy; the stream arrives uncompressed when
the client asks for gzip, while the site's own files are compressed."""
import os
import selectors
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time

from harness import (Herald, PortTaken, Stream, connect, on_spare_ports, parse_frame, parse_head, request,
                     wait_until)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CADDYFILE = os.path.join(ROOT, "conf", "Caddyfile")
CADDY = shutil.which("caddy") or "/usr/bin/caddy"


def _replace_once(text, old, new):
    assert text.count(old) == 1, f"conf/Caddyfile should contain {old!r} exactly once"
    return text.replace(old, new)


class Caddy:
    """caddy run on 127.0.0.1:PORT with conf/Caddyfile's site, proxying
    /api/* to upstream ("127.0.0.1:PORT" or "unix//path"). Caddy cannot
    listen on port 0 and report its port, so PORT is a spare port, and a
    start that finds it taken is tried again on another."""

    def __init__(self, upstream):
        self.dir = tempfile.mkdtemp(prefix="herald-caddy-")
        self.upstream = upstream
        self.site = os.path.join(self.dir, "site")
        os.mkdir(self.site)
        # Big enough for encode's minimum length, so the site is compressed.
        with open(os.path.join(self.site, "index.html"), "w") as f:
            f.write("<!doctype html><title>site</title>\n" + "<p>herald site page</p>\n" * 200)
        self.logpath = os.path.join(self.dir, "caddy.log")
        self.logf = self.proc = None
        try:
            self.port = on_spare_ports(self._start)
            wait_until(self._accepting, timeout=15, what="caddy to accept connections")
        except BaseException:
            self.stop()
            raise

    def _caddyfile(self, port):
        with open(CADDYFILE) as f:
            text = f.read()
        # `bind`: only the loopback address, not the wildcard Caddy binds by
        # default, which would clash with any local socket on the port.
        text = _replace_once(text, "example.com {", f"http://127.0.0.1:{port} {{\n\tbind 127.0.0.1")
        text = _replace_once(text, "reverse_proxy 127.0.0.1:8199 {", f"reverse_proxy {self.upstream} {{")
        text = _replace_once(text, "root * /var/www/html", f"root * {self.site}")
        # Test-only global options: no admin endpoint (parallel instances
        # would fight over :2019) and a short shutdown.
        return "{\n\tadmin off\n\tgrace_period 1s\n}\n\n" + text

    def _start(self, port):
        """Start caddy on port and wait until it serves; PortTaken if the port was taken."""
        self.config = os.path.join(self.dir, "Caddyfile")
        with open(self.config, "w") as f:
            f.write(self._caddyfile(port))
        env = dict(os.environ)
        for k in ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
            env[k] = self.dir
        self.logf = open(self.logpath, "wb")  # each try logs afresh
        self.proc = subprocess.Popen([CADDY, "run", "--config", self.config, "--adapter", "caddyfile"],
                                     stdout=self.logf, stderr=self.logf, stdin=subprocess.DEVNULL, env=env)
        # Caddy logs this once its listeners are bound, and exits if one cannot be.
        wait_until(lambda: self.proc.poll() is not None or "serving initial configuration" in self.log(),
                   timeout=15, what="caddy to start")
        if self.proc.poll() is not None:
            self.logf.close()
            if "address already in use" in self.log():
                raise PortTaken(f"caddy on 127.0.0.1:{port}: {self.log()[-300:]}")
            raise AssertionError(f"caddy exited with {self.proc.returncode}:\n{self.log()}")
        self.port = port
        return port

    def _accepting(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"caddy exited with {self.proc.returncode}:\n{self.log()}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def log(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")[-4000:]

    def stop(self):
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.logf is not None:
            self.logf.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class Dechunk:
    """Incremental HTTP/1.1 chunked-body decoder (Caddy streams to HTTP/1.1
    clients in chunks)."""

    def __init__(self):
        self.raw = b""
        self.need = None
        self.done = False

    def feed(self, data):
        self.raw += data
        out = b""
        while not self.done:
            if self.need is None:
                i = self.raw.find(b"\r\n")
                if i < 0:
                    break
                size = int(self.raw[:i].split(b";")[0], 16)
                self.raw = self.raw[i + 2:]
                if size == 0:
                    self.done = True
                    break
                self.need = size
            if len(self.raw) < self.need + 2:
                break
            out += self.raw[:self.need]
            self.raw = self.raw[self.need + 2:]
            self.need = None
        return out


class ProxiedStream:
    """A stream reader through Caddy: status and headers, then the decoded
    body split into SSE frames. target: herald's stream unless told."""

    def __init__(self, port, headers=None, source=None, timeout=5.0, target="/api/events/stream"):
        self.sock = connect(port, source=source, timeout=timeout)
        h = {"Host": f"127.0.0.1:{port}", "Accept": "text/event-stream"}
        h.update(headers or {})
        head = f"GET {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
        self.sock.sendall(head.encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = self.sock.recv(65536)
            if not d:
                raise AssertionError(f"connection closed before a response head: {buf!r}")
            buf += d
        head, _, rest = buf.partition(b"\r\n\r\n")
        self.status, self.headers = parse_head(head)
        self.chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        self.dechunk = Dechunk()
        self.body = b""
        self.closed = False
        self._add(rest)

    def _add(self, data):
        self.body += self.dechunk.feed(data) if self.chunked else data

    def pump(self):
        """One recv into the body; False once the connection is closed."""
        try:
            d = self.sock.recv(65536)
        except BlockingIOError:
            return True
        if not d:
            self.closed = True
            return False
        self._add(d)
        return True

    def frames(self):
        """Whole frames received so far (removed from the buffer)."""
        out = []
        while b"\n\n" in self.body:
            f, _, self.body = self.body.partition(b"\n\n")
            out.append(f)
        return out

    def wait_frames(self, n, timeout=5.0):
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline and not self.closed:
            got += self.frames()
            if len(got) >= n:
                break
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                self.pump()
            except socket.timeout:
                break
        return got + self.frames()

    def read_refusal(self, timeout=5.0):
        """For a refused stream: the whole (Content-Length) body."""
        n = int(self.headers.get("content-length", "0"))
        deadline = time.monotonic() + timeout
        while len(self.body) < n and time.monotonic() < deadline and not self.closed:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            self.pump()
        return self.body

    def close(self):
        self.sock.close()


def _insert(db, data):
    """INSERT one public event as another program would; returns the time
    just before the write began."""
    con = sqlite3.connect(db, timeout=5)
    try:
        t0 = time.monotonic()
        con.execute("INSERT INTO events(type, topic, data, public) VALUES ('tick', 'news', ?, 1)", (data,))
        con.commit()
        return t0
    finally:
        con.close()


def test_caddy_waits_for_a_restarting_herald_instead_of_502():
    # herald on a unix socket goes away and comes back a second later on
    # the same path: a stream opened through Caddy in the gap is served once
    # herald is back (the Caddyfile retries the dial), never answered 502.
    h = Herald(unix=True)
    path, d = h.sock_path, h.dir
    with Caddy(f"unix/{path}") as c:
        first = ProxiedStream(c.port)
        assert first.status == 200, first.status
        first.close()
        h.stop()
        result = {}

        def open_in_gap():
            try:
                r = ProxiedStream(c.port, timeout=10)
                result["status"] = r.status
                r.close()
            except Exception as e:  # noqa: BLE001 - reported below
                result["error"] = repr(e)
        t = threading.Thread(target=open_in_gap)
        t.start()
        time.sleep(1.0)
        h2 = Herald(unix=True, dir=d)
        try:
            assert h2.sock_path == path
            t.join(15)
            assert result.get("status") == 200, (result, c.log())
        finally:
            h2.stop()


test_caddy_waits_for_a_restarting_herald_instead_of_502.timeout = 60


def _fanout_through_caddy(unix):
    n = 100
    # No heartbeat within the test: an event Caddy buffered would wait for
    # the next bytes on its stream, and none come.
    with Herald(args=["--per-address-limit", str(n * 2), "--heartbeat-interval", "1h"], unix=unix) as h:
        upstream = f"unix/{h.sock_path}" if unix else f"127.0.0.1:{h.port}"
        with Caddy(upstream) as c:
            readers = []
            try:
                for _ in range(n):
                    r = ProxiedStream(c.port, headers={"Accept-Encoding": "gzip, deflate, br"})
                    assert r.status == 200, (r.status, r.headers, r.body)
                    assert r.headers.get("content-type", "").startswith("text/event-stream"), r.headers
                    assert "content-encoding" not in r.headers, r.headers
                    readers.append(r)
                for r in readers:
                    opening = r.wait_frames(1)
                    assert opening and opening[0].startswith(b"retry: "), opening
                for r in readers:
                    r.sock.setblocking(False)
                worst = []
                for i in range(3):
                    want = f"fan-out {i}".encode()
                    sel = selectors.DefaultSelector()
                    for r in readers:
                        sel.register(r.sock, selectors.EVENT_READ, r)
                    t0 = _insert(h.db, want.decode())
                    waiting = set(readers)
                    last = None
                    deadline = t0 + 5.0
                    while waiting and time.monotonic() < deadline:
                        for key, _ in sel.select(timeout=0.5):
                            r = key.data
                            if r not in waiting:
                                continue
                            r.pump()
                            if any(b"data: " + want in f for f in r.frames()):
                                waiting.discard(r)
                                last = time.monotonic()
                    sel.close()
                    assert not waiting, f"{len(waiting)} of {n} readers did not get event {i} within 5 s"
                    worst.append(last - t0)
                # Each reached every reader on its own (the figure is shown,
                # not judged: a busy machine lengthens it, buffering would
                # have held it past the 5 s above).
                print(f"insert to the last of {n} readers through Caddy: " +
                      ", ".join(f"{w * 1000:.1f} ms" for w in worst))
                st, _, body = request(h.port, "GET", "/api/health")
                assert st == 200 and b'"readers":%d' % n in body, body
            finally:
                for r in readers:
                    r.close()


def test_caddy_tcp_event_reaches_100_readers_at_once():
    _fanout_through_caddy(unix=False)


test_caddy_tcp_event_reaches_100_readers_at_once.timeout = 90


def test_caddy_unix_event_reaches_100_readers_at_once():
    _fanout_through_caddy(unix=True)


test_caddy_unix_event_reaches_100_readers_at_once.timeout = 90


def _cap_through_caddy(unix):
    # Only Caddy is trusted: loopback 127.0.0.1 (its TCP upstream address)
    # and the unix socket; clients come from other loopback addresses.
    # Caddy 2.6 closes its upstream connection only when a write to the
    # departed client fails, so a short heartbeat frees a closed stream's
    # place quickly (with the default 15 s it takes up to two heartbeats).
    with Herald(args=["--per-address-limit", "3", "--trusted-proxies", "127.0.0.1/32,unix",
                      "--heartbeat-interval", "200ms"], unix=unix) as h:
        upstream = f"unix/{h.sock_path}" if unix else f"127.0.0.1:{h.port}"
        with Caddy(upstream) as c:
            open_ = []
            try:
                # Client A (127.0.0.2) gets 3 streams, whatever X-Forwarded-For
                # it claims: Caddy replaces the header with the address it sees.
                for i in range(3):
                    r = ProxiedStream(c.port, source="127.0.0.2", headers={"X-Forwarded-For": f"10.0.0.{i + 1}"})
                    assert r.status == 200, (i, r.status, r.body)
                    open_.append(r)
                wait_until(lambda: b'"readers":3' in request(h.port, "GET", "/api/health")[2], what="3 readers")
                # A client that is not an EventSource gets 429 ...
                r = ProxiedStream(c.port, source="127.0.0.2",
                                  headers={"X-Forwarded-For": "10.0.0.9", "Accept": "application/json"})
                assert r.status == 429, (r.status, r.headers, r.body)
                assert "retry-after" in r.headers, r.headers
                assert b'"status":429' in r.read_refusal(), r.body
                r.close()
                # ... a browser's EventSource a short 200 stream it survives.
                r = ProxiedStream(c.port, source="127.0.0.2", headers={"X-Forwarded-For": "10.0.0.9"})
                assert r.status == 200 and r.headers.get("content-type") == "text/event-stream", r.headers
                deadline = time.monotonic() + 5
                while b"\n\n" not in r.body and not r.closed and time.monotonic() < deadline:
                    r.sock.settimeout(max(0.01, deadline - time.monotonic()))
                    try:
                        r.pump()
                    except socket.timeout:
                        break
                assert b"\nevent: refused\ndata: {" in r.body and b"per_address_limit" in r.body, r.body
                r.close()
                # herald logged the forwarded address, not Caddy's and not the spoof.
                h.wait_log(r"refused 127\.0\.0\.2 GET /api/events/stream: 429")
                assert "10.0.0.9" not in h.log(), h.log()
                # Client B (127.0.0.3) is another address: not capped.
                r = ProxiedStream(c.port, source="127.0.0.3")
                assert r.status == 200, (r.status, r.body)
                open_.append(r)
                # Closing one of A's streams frees a place for A.
                open_.pop(0).close()
                wait_until(lambda: b'"readers":3' in request(h.port, "GET", "/api/health")[2], what="3 readers")
                r = ProxiedStream(c.port, source="127.0.0.2")
                assert r.status == 200, (r.status, r.body)
                open_.append(r)
            finally:
                for r in open_:
                    r.close()


def test_caddy_tcp_per_address_cap_uses_forwarded_address():
    _cap_through_caddy(unix=False)


def test_caddy_unix_per_address_cap_uses_forwarded_address():
    _cap_through_caddy(unix=True)


def test_spoofed_forwarded_for_from_untrusted_peer_ignored():
    # Straight to herald: only 127.0.0.1 is a trusted proxy.
    with Herald(args=["--per-address-limit", "2", "--trusted-proxies", "127.0.0.1/32"], unix=True) as h:
        streams = []
        try:
            # An untrusted peer (127.0.0.5) claims a new address each time:
            # herald counts the peer, so the third stream is refused.
            for i in range(2):
                s = Stream(h.port, source="127.0.0.5", headers={"X-Forwarded-For": f"203.0.113.{i + 1}"})
                assert s.status == 200, s.status
                streams.append(s)
            s = Stream(h.port, source="127.0.0.5", headers={"X-Forwarded-For": "203.0.113.3"})
            assert s.status == 429, s.status
            s.close()
            h.wait_log(r"refused 127\.0\.0\.5 GET /api/events/stream: 429")
            # The unix socket is not trusted in this configuration either.
            for i in range(2):
                s = Stream(path=h.sock_path, headers={"X-Forwarded-For": f"198.51.100.{i + 1}"})
                assert s.status == 200, s.status
                streams.append(s)
            s = Stream(path=h.sock_path, headers={"X-Forwarded-For": "198.51.100.3"})
            assert s.status == 429, s.status
            s.close()
            # The trusted proxy (127.0.0.1) is believed: three different
            # forwarded clients, three streams.
            for i in range(3):
                s = Stream(h.port, source="127.0.0.1", headers={"X-Forwarded-For": f"192.0.2.{i + 1}"})
                assert s.status == 200, (i, s.status)
                streams.append(s)
            assert "203.0.113." not in h.log() and "198.51.100." not in h.log(), h.log()
        finally:
            for s in streams:
                s.close()


def test_caddy_stream_uncompressed_when_gzip_asked():
    with Herald(unix=True) as h:
        stored = 40
        for i in range(stored):
            _insert(h.db, f"stored event {i} " + "x" * 80)
        for upstream in (f"127.0.0.1:{h.port}", f"unix/{h.sock_path}"):
            with Caddy(upstream) as c:
                # The site itself is compressed: encode is active in this Caddyfile.
                s = connect(c.port)
                try:
                    s.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{c.port}\r\nAccept-Encoding: gzip\r\n"
                              "Connection: close\r\n\r\n".encode())
                    buf = b""
                    while b"\r\n\r\n" not in buf:
                        d = s.recv(65536)
                        assert d, buf
                        buf += d
                    st, hdrs = parse_head(buf.partition(b"\r\n\r\n")[0])
                    assert st == 200 and hdrs.get("content-encoding") == "gzip", (upstream, st, hdrs)
                finally:
                    s.close()
                # The stream is not, and it arrives at once, frame by frame.
                # Resuming from 0 makes herald's first write (the opening frame
                # and the stored events) far longer than the 512 bytes from
                # which Caddy's encode would compress a response.
                t0 = time.monotonic()
                r = ProxiedStream(c.port, headers={"Accept-Encoding": "gzip", "Last-Event-ID": "0"})
                try:
                    assert r.status == 200, (r.status, r.body)
                    assert "content-encoding" not in r.headers, (upstream, r.headers)
                    assert r.headers.get("content-type", "").startswith("text/event-stream"), r.headers
                    assert r.headers.get("cache-control") == "no-store", r.headers
                    frames = r.wait_frames(1 + stored)
                    assert frames and frames[0] == b"retry: 3000\n: stream open", (upstream, frames[:1])
                    assert len([f for f in frames if parse_frame(f)]) == stored, (upstream, len(frames))
                    assert time.monotonic() - t0 < 2.0, "the stream was held back"
                    sqlite3_t0 = _insert(h.db, "plain text")
                    frames = r.wait_frames(1, timeout=5)
                    evs = [parse_frame(f) for f in frames]
                    evs = [e for e in evs if e]
                    assert evs and evs[0]["data"] == "plain text", (upstream, frames)
                    stored += 1
                    assert time.monotonic() - sqlite3_t0 < 1.0, "the event was held back"
                finally:
                    r.close()
