# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: HTTP/2. h2c with prior knowledge on the TCP and unix
listeners, h2 chosen by ALPN on a TLS listener (and the `http2` setting
that turns both off), against real clients: curl (--http2-prior-knowledge,
--http2) and nghttp. Health, publish and the event stream mean the same as
over HTTP/1.1; many streams share one connection; flow control is
backpressure (a stream whose window is spent is a slow reader, caught up
from the store without loss, its neighbours unaffected); the limits hold
(concurrent streams, header-list size, rapid reset, CONTINUATION, PING and
SETTINGS floods, a window never opened, idle sessions, GOAWAY on stop);
operators see sessions and streams apart from sockets (/metrics,
/api/health), and the open-file limit caps descriptors, not streams; Caddy
with docs/browsers.md's h2c block carries readers across a restart of herald.

The misbehaving clients are written here as raw frames (H2Raw): nothing
else sends a flood on purpose. They read DATA, RST_STREAM and GOAWAY; they
never need to decode herald's HPACK."""
import json
import os
import socket
import struct
import subprocess
import tempfile
import time

from harness import Herald, connect, publish, request, wait_until

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def _run(cmd, timeout=20, input=None):
    return subprocess.run(cmd, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)


def _curl(*args, timeout=20):
    """curl's (exit code, stdout text, stderr text)."""
    r = _run(["curl", "-sS", *args], timeout=timeout)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def _make_cert(dir):
    cert, key = os.path.join(dir, "h2.crt"), os.path.join(dir, "h2.key")
    r = _run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
              "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=herald-h2",
              "-addext", "subjectAltName=IP:127.0.0.1"])
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return cert, key


def _tls_herald(args=(), **kw):
    dir = tempfile.mkdtemp(prefix="herald-h2-")
    cert, key = _make_cert(dir)
    return Herald(args=["--listen", "tls:127.0.0.1:0", "--tls-cert", cert, "--tls-key", key, *args], dir=dir, **kw)


class CurlStream:
    """curl -N reading an event stream in the background; lines() parses
    what came so far."""

    def __init__(self, url, *args):
        self.p = subprocess.Popen(["curl", "-sS", "-N", *args, url], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        os.set_blocking(self.p.stdout.fileno(), False)
        self.out = b""

    def text(self):
        try:
            d = self.p.stdout.read()
        except BlockingIOError:
            d = None
        if d:
            self.out += d
        return self.out.decode(errors="replace")

    def ids(self):
        return [int(ln[4:]) for ln in self.text().split("\n") if ln.startswith("id: ")]

    def wait_ids(self, want, timeout=10.0):
        wait_until(lambda: self.ids() == want, timeout=timeout, what=f"ids {want} (have {self.ids()})")

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        self.p.stdout.close()
        self.p.stderr.close()


def _hpack_int(n, prefix_bits, first=0):
    limit = (1 << prefix_bits) - 1
    if n < limit:
        return bytes([first | n])
    out = [first | limit]
    n -= limit
    while n >= 128:
        out.append((n & 127) | 128)
        n >>= 7
    out.append(n)
    return bytes(out)


def hpack_literal(fields):
    """A header block of literal fields, never indexed, no Huffman coding."""
    out = b""
    for k, v in fields:
        k, v = k.encode(), v.encode()
        out += b"\x00" + _hpack_int(len(k), 7) + k + _hpack_int(len(v), 7) + v
    return out


def hpack_indexing(name, value):
    """One field as a literal with incremental indexing (a new name): the
    decoder puts it into its dynamic table, where the next entry is index
    62 (RFC 7541 2.3.3)."""
    k, v = name.encode(), value.encode()
    return b"\x40" + _hpack_int(len(k), 7) + k + _hpack_int(len(v), 7) + v


def hpack_indexed(index):
    """One field by its index in the static or dynamic table: one byte for
    an index below 127, whatever the field's size."""
    return _hpack_int(index, 7, 0x80)


class H2Raw:
    """An HTTP/2 client of raw frames over a socket: it sends what a test
    says, and reads DATA (per stream), RST_STREAM and GOAWAY. SETTINGS are
    acknowledged, and PINGs unless told not to; WINDOW_UPDATE is sent only
    when asked. send() keeps to no window; send_data() keeps to the
    connection's and the stream's, as a client must."""

    def __init__(self, port=None, path=None, settings=(), conn_window=None, timeout=5.0, sock=None,
                 answer_pings=True):
        self.sock = sock or connect(port, path, timeout)
        self.answer_pings = answer_pings
        self.pinged = 0
        self.buf = b""
        self.data = {}
        self.ended = set()
        self.resets = {}
        self.goaway = None
        self.eof = False
        self.pings = 0
        self.settings_seen = 0
        self.next_id = 1
        # What herald lets this client send: RFC 9113's 65,535 at first
        # (herald leaves SETTINGS_INITIAL_WINDOW_SIZE alone), then its
        # WINDOW_UPDATEs.
        self.send_window = 65535
        self.stream_send_window = {}
        self.sock.sendall(PREFACE)
        self.settings(settings)
        if conn_window:
            self.window_update(0, conn_window)

    def send(self, type, flags, sid, payload=b""):
        self.sock.sendall(struct.pack(">I", len(payload))[1:] + bytes([type, flags]) + struct.pack(">I", sid) + payload)

    def send_data(self, sid, payload, flags=0, timeout=10.0):
        """One DATA frame, once both windows have room for it."""
        self.wait(lambda: min(self.send_window, self.stream_send_window.get(sid, 65535)) >= len(payload),
                  timeout, what="a window with room for %d bytes on stream %d" % (len(payload), sid))
        self.send_window -= len(payload)
        self.stream_send_window[sid] = self.stream_send_window.get(sid, 65535) - len(payload)
        self.send(DATA, flags, sid, payload)

    def frame_bytes(self, type, flags, sid, payload=b""):
        return struct.pack(">I", len(payload))[1:] + bytes([type, flags]) + struct.pack(">I", sid) + payload

    def send_block(self, sid, block, end_stream=True, frame_max=16384):
        """A header block as HEADERS and as many CONTINUATION frames as
        frame_max makes it, all in one write."""
        pieces = [block[i:i + frame_max] for i in range(0, len(block), frame_max)] or [b""]
        out = b""
        for i, p in enumerate(pieces):
            last = END_HEADERS if i == len(pieces) - 1 else 0
            if i == 0:
                out += self.frame_bytes(HEADERS, last | (END_STREAM if end_stream else 0), sid, p)
            else:
                out += self.frame_bytes(CONTINUATION, last, sid, p)
        self.sock.sendall(out)

    def settings(self, pairs):
        self.send(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))

    def window_update(self, sid, n):
        self.send(WINDOW_UPDATE, 0, sid, struct.pack(">I", n))

    def request(self, path="/api/events/stream", method="GET", extra=(), end=True):
        sid = self.next_id
        self.next_id += 2
        block = hpack_literal([(":method", method), (":scheme", "http"), (":authority", "127.0.0.1"),
                               (":path", path), *extra])
        self.send(HEADERS, END_HEADERS | (END_STREAM if end else 0), sid, block)
        return sid

    def pump(self, timeout=0.2):
        """Read and take apart whatever frames come within timeout. False
        once the connection has ended."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.sock.settimeout(left)
            try:
                d = self.sock.recv(65536)
            except socket.timeout:
                break
            except (ConnectionResetError, BrokenPipeError):
                d = b""
            if not d:
                self.eof = True
                break
            self.buf += d
            self._parse()
        return not self.eof

    def _parse(self):
        while len(self.buf) >= 9:
            n = int.from_bytes(self.buf[:3], "big")
            if len(self.buf) < 9 + n:
                return
            type, flags = self.buf[3], self.buf[4]
            sid = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
            payload, self.buf = self.buf[9:9 + n], self.buf[9 + n:]
            if type == DATA:
                self.data[sid] = self.data.get(sid, b"") + payload
                if flags & END_STREAM:
                    self.ended.add(sid)
            elif type == HEADERS and flags & END_STREAM:
                self.ended.add(sid)
            elif type == RST_STREAM:
                self.resets[sid] = int.from_bytes(payload[:4], "big")
            elif type == SETTINGS and not flags & ACK:
                self.settings_seen += 1
                self.send(SETTINGS, ACK, 0)
            elif type == PING and flags & ACK:
                self.pings += 1
            elif type == PING:
                self.pinged += 1
                if self.answer_pings:
                    self.send(PING, ACK, 0, payload)
            elif type == WINDOW_UPDATE and len(payload) == 4:
                n = int.from_bytes(payload, "big") & 0x7FFFFFFF
                if sid == 0:
                    self.send_window += n
                else:
                    self.stream_send_window[sid] = self.stream_send_window.get(sid, 65535) + n
            elif type == GOAWAY:
                self.goaway = (int.from_bytes(payload[:4], "big") & 0x7FFFFFFF, int.from_bytes(payload[4:8], "big"))

    def text(self, sid):
        return self.data.get(sid, b"").decode(errors="replace")

    def ids(self, sid):
        return [int(ln[4:]) for ln in self.text(sid).split("\n") if ln.startswith("id: ")]

    def wait(self, cond, timeout=10.0, what="condition"):
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            if not self.pump(0.1) and not cond():
                raise AssertionError(f"connection ended while waiting for {what}")

    def wait_closed(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not self.eof and time.monotonic() < deadline:
            try:
                self.pump(0.2)
            except OSError:
                self.eof = True
        return self.eof

    def close(self):
        self.sock.close()


def _post_json(event):
    return ["-H", "Content-Type: application/json", "--data-binary", json.dumps(event)]


# ---- slice 1: h2c and h2 with the same meaning as HTTP/1.1 ----


def test_h2c_prior_knowledge_health_publish_and_stream_over_tcp_and_unix():
    with Herald(unix=True) as h:
        for where in ([h.url], ["--unix-socket", h.sock_path, "http://localhost"]):
            base, opts = where[-1], where[:-1]
            code, out, err = _curl("--http2-prior-knowledge", "-i", *opts, base + "/api/health")
            assert code == 0, err
            assert out.startswith("HTTP/2 200"), out
            assert json.loads(out.partition("\r\n\r\n")[2])["status"] == "ok"
        s = CurlStream(h.url + "/api/events/stream?topic=news", "--http2-prior-knowledge")
        u = CurlStream("http://localhost/api/events/stream?topic=news", "--http2-prior-knowledge",
                       "--unix-socket", h.sock_path)
        try:
            wait_until(lambda: "retry:" in s.text() and "retry:" in u.text(), what="opening frames")
            code, out, err = _curl("--http2-prior-knowledge", "-i", *_post_json(
                {"type": "message", "topic": "news", "data": "over h2c", "public": True}), h.url + "/api/events")
            assert code == 0 and out.startswith("HTTP/2 201"), (out, err)
            first = json.loads(out.partition("\r\n\r\n")[2])["id"]
            second = publish(h.port, data="over HTTP/1.1")
            s.wait_ids([first, second])
            u.wait_ids([first, second])
            assert "data: over h2c" in s.text() and "data: over HTTP/1.1" in u.text()
        finally:
            s.close()
            u.close()
        # HTTP/1.1 beside it is untouched.
        code, out, _ = _curl("-i", h.url + "/api/health")
        assert out.startswith("HTTP/1.1 200"), out
        assert h.log_ok()


def test_h2_by_alpn_on_tls_and_http1_beside_it():
    h = _tls_herald()
    with h:
        url = f"https://127.0.0.1:{h.tls_port}"
        code, out, err = _curl("--http2", "-k", "-w", "%{http_version}", "-o", "/dev/null", url + "/api/health")
        assert code == 0 and out == "2", (out, err)
        code, out, err = _curl("--http1.1", "-k", "-w", "%{http_version}", "-o", "/dev/null", url + "/api/health")
        assert code == 0 and out == "1.1", (out, err)
        s = CurlStream(url + "/api/events/stream", "--http2", "-k")
        try:
            wait_until(lambda: "retry:" in s.text(), what="opening frame over h2")
            code, out, err = _curl("--http2", "-k", "-i", *_post_json(
                {"type": "message", "topic": "news", "data": "over h2", "public": True}), url + "/api/events")
            assert code == 0 and out.startswith("HTTP/2 201"), (out, err)
            eid = json.loads(out.partition("\r\n\r\n")[2])["id"]
            s.wait_ids([eid])
            # nghttp, another client, agrees on the protocol and the head.
            r = _run(["nghttp", "-nv", url + "/api/health"])
            text = r.stdout.decode(errors="replace")
            assert "The negotiated protocol: h2" in text and ":status: 200" in text, text
        finally:
            s.close()
        assert h.log_ok()


def test_tls_session_parks_and_reads_on():
    # An HTTP/2 session over TLS 1.3 sheds OpenSSL's state at a write and
    # keeps reading the client's frames itself: after the park, PINGs are
    # answered, a new stream opens on the same connection and events reach
    # both streams, over many records from the client; the client's
    # close_notify ends it cleanly.
    h = _tls_herald(args=["--log-level", "debug"])
    with h:
        c = H2Raw(sock=_tls_sock(h.tls_port))
        try:
            c.window_update(0, 1 << 20)
            a = c.request()
            c.wait(lambda: "retry:" in c.text(a), what="the first stream's opening frame")
            wait_until(lambda: "parked" in h.log() and "reading on" in h.log(), what="the session parked")
            for k in range(30):
                c.send(PING, 0, 0, struct.pack(">Q", k))
            c.wait(lambda: c.pings == 30, what="every PING answered")
            b = c.request("/api/events/stream?topic=news")
            c.wait(lambda: "retry:" in c.text(b), what="the second stream's opening frame")
            code, out, err = _curl("--http2", "-k", *_post_json(
                {"type": "message", "topic": "news", "data": "after the park", "public": True}),
                f"https://127.0.0.1:{h.tls_port}/api/events")
            assert code == 0, (out, err)
            eid = json.loads(out)["id"]
            c.wait(lambda: eid in c.ids(a) and eid in c.ids(b), what="the event on both streams")
            c.window_update(a, 1 << 16)
            c.settings([(4, 1 << 20)])
            c.send(PING, 0, 0, b"lastping")
            c.wait(lambda: c.pings == 31, what="the PING after more frames")
            c.sock.settimeout(5)
            c.sock.unwrap()  # our close_notify, answered by herald's
        finally:
            c.close()
        assert "parked" in h.log() and "reading on" in h.log()
        assert h.log_ok()


def test_http2_off_keeps_http1_only():
    h = _tls_herald(args=["--http2", "off"], unix=False)
    with h:
        url = f"https://127.0.0.1:{h.tls_port}"
        code, out, err = _curl("--http2", "-k", "-w", "%{http_version}", "-o", "/dev/null", url + "/api/health")
        assert code == 0 and out == "1.1", (out, err)
        # The preface on a plain listener is refused as HTTP/1.1 refuses
        # any other version.
        s = connect(h.port)
        s.sendall(PREFACE)
        d = s.recv(4096)
        assert d.startswith(b"HTTP/1.1 505"), d
        s.close()


def test_every_endpoint_means_the_same_over_h2c():
    with Herald(args=["--read-token", "sekrit", "--allow-origin", "https://app.example"]) as h:
        h2 = ["--http2-prior-knowledge"]
        code, out, err = _curl(*h2, "-I", h.url + "/api/health")
        assert out.startswith("HTTP/2 200") and "content-length:" in out, out
        code, out, err = _curl(*h2, "-o", "/dev/null", "-w", "%{http_code} %{content_type}", h.url + "/")
        assert out.startswith("200 text/html"), out
        code, out, err = _curl(*h2, h.url + "/metrics")
        assert "herald_readers " in out, out[:200]
        code, out, err = _curl(*h2, "-i", "-X", "OPTIONS", "-H", "Origin: https://app.example",
                               "-H", "Access-Control-Request-Method: GET", h.url + "/api/events/stream")
        assert out.startswith("HTTP/2 204") and "access-control-allow-origin: https://app.example" in out, out
        code, out, err = _curl(*h2, "-i", h.url + "/api/events/stream?token=wrong")
        assert out.startswith("HTTP/2 403"), out
        code, out, err = _curl(*h2, "-i", h.url + "/nope")
        assert out.startswith("HTTP/2 404"), out
        ids = [publish(h.port, data=f"e{i}", public=False) for i in range(3)]
        # The token from the query or the header; resume from Last-Event-ID
        # or last_event_id; the envelope.
        for args, want in (([h.url + f"/api/events/stream?token=sekrit&last_event_id={ids[0]}"], ids[1:]),
                           (["-H", "Authorization: Bearer sekrit", "-H", f"Last-Event-ID: {ids[1]}",
                             h.url + "/api/events/stream"], ids[2:]),
                           ([h.url + "/api/events/stream?token=sekrit&envelope=1&last_event_id=0"], ids)):
            s = CurlStream(args[-1], *h2, *args[:-1])
            try:
                s.wait_ids(want)
            finally:
                s.close()


def _curl_head(*args):
    """curl -i's status and fields (names lowercased, in order) and the
    body, for one request; an event stream is cut after a moment."""
    code, out, err = _curl("-i", "--max-time", "1", *args)
    head, _, body = out.replace("\r\n", "\n").partition("\n\n")
    lines = head.split("\n")
    fields = [(k.strip().lower(), v.strip()) for k, _, v in (ln.partition(":") for ln in lines[1:])]
    return int(lines[0].split(" ")[1]), fields, body


def test_a_head_is_the_same_fields_over_h2c_as_over_http1():
    # One head record serves both protocols: HTTP/2 sends the fields
    # HTTP/1.1 writes, in the same order, without Connection; and to HEAD,
    # no body on either, refusals included.
    with Herald(args=["--read-token", "sekrit", "--allow-origin", "https://app.example", "--mercure", "on"]) as h:
        cases = [["-I", h.url + "/"], ["-I", h.url + "/nope"], ["-I", h.url + "/metrics"],
                 ["-I", h.url + "/.well-known/mercure"], [h.url + "/nope"], ["-X", "DELETE", h.url + "/api/health"],
                 ["-X", "OPTIONS", "-H", "Origin: https://app.example", "-H", "Access-Control-Request-Method: GET",
                  h.url + "/api/events/stream"],
                 ["-H", "Authorization: Bearer wrong", h.url + "/api/events/stream"],
                 ["-H", "Origin: https://app.example", h.url + "/api/events/stream?token=sekrit"],
                 [h.url + "/.well-known/mercure?topic=x"]]
        for args in cases:
            st1, f1, b1 = _curl_head("--http1.1", *args)
            st2, f2, b2 = _curl_head("--http2-prior-knowledge", *args)
            assert st1 == st2, (args, st1, st2)
            assert [f for f in f1 if f[0] != "connection"] == f2, (args, f1, f2)
            assert not any(k == "connection" for k, _ in f2), (args, f2)
            if "-I" in args:
                assert b1 == "" and b2 == "", (args, b1, b2)
            else:
                assert b1 == b2 or "event-stream" in dict(f1).get("content-type", ""), (args, b1, b2)


def test_publishes_on_one_connection_share_group_commits():
    with Herald() as h:
        body = os.path.join(h.dir, "body.json")
        with open(body, "w") as f:
            json.dump({"type": "message", "topic": "news", "data": "from h2load", "public": True}, f)
        # 300 POSTs, 50 in flight on each of two connections.
        r = _run(["h2load", "-n", "300", "-c", "2", "-m", "50", "-d", body, "-H", "Content-Type: application/json",
                  h.url + "/api/events"], timeout=60)
        out = r.stdout.decode(errors="replace")
        assert "status codes: 300 2xx" in out, out
        assert h.last_id() == 300
        commits = _metric(h, "herald_group_commits_total")
        assert commits is not None and commits < 300, commits


# ---- slice 2: flow control is backpressure; DATA carries the shared chunks ----


def _metric(h, name):
    code, out, _ = _curl(h.url + "/metrics")
    for ln in out.split("\n"):
        if ln.startswith(name + " "):
            return float(ln.split()[1])
    return None


def test_spent_window_is_a_slow_reader_caught_up_without_loss_and_neighbours_flow():
    # queue_limit at its least: the stalled stream is moved to catch-up fast.
    with Herald(args=["--queue-limit", "4096"]) as h:
        c = H2Raw(h.port, settings=[(0x4, 64)], conn_window=1 << 24)  # INITIAL_WINDOW_SIZE 64
        try:
            slow = c.request()
            fast = c.request()
            c.window_update(fast, 1 << 24)
            c.wait(lambda: "retry:" in c.text(fast), what="the fast stream's opening")
            c.wait(lambda: len(c.data.get(slow, b"")) == 27, what="the slow stream's opening (27 of its 64 bytes)")
            pad = "x" * 200
            ids = [publish(h.port, data=f"{i} {pad}") for i in range(120)]
            c.wait(lambda: c.ids(fast) == ids, what="every event on the stream with an open window")
            # The slow stream took only what its window allowed...
            c.pump(0.3)
            assert len(c.data[slow]) <= 64, len(c.data[slow])
            # ...and, past queue_limit, is fed from the store instead.
            wait_until(lambda: _metric(h, "herald_readers_catching_up") == 1, what="the slow stream in catch-up")
            c.window_update(slow, 1 << 24)
            c.wait(lambda: c.ids(slow) == ids, what="every event, in order, once the window opened")
            assert not c.resets and c.goaway is None
        finally:
            c.close()
        assert h.log_ok()


def test_stream_written_idle_and_written_again_gets_every_byte_through_windows_spent_midway():
    # Each write of a stream's connection is a data item that ends with its
    # last byte (the stream stays open); an event larger than the window
    # left spends it midway, and its item resumes, in pieces, as the window
    # opens. Every byte arrives once, in order, between idle spells.
    with Herald() as h:
        c = H2Raw(h.port, settings=[(0x4, 600)], conn_window=1 << 24)  # INITIAL_WINDOW_SIZE 600
        granted = 600
        try:
            sid = c.request()
            c.wait(lambda: "stream open" in c.text(sid), what="the opening frame")
            want, datas, spent_midway = [], [], 0

            def take_all(data):
                nonlocal granted, spent_midway
                deadline = time.monotonic() + 15
                while not c.text(sid).endswith(f"data: {data}\n\n"):
                    assert time.monotonic() < deadline, f"ids {c.ids(sid)}, wanted {want}"
                    c.pump(0.1)
                    got = len(c.data.get(sid, b""))
                    assert got <= granted, f"{got} bytes sent through a window of {granted}"
                    if got == granted and not c.text(sid).endswith(f"data: {data}\n\n"):
                        spent_midway += 1
                        c.window_update(sid, 500)
                        granted += 500

            for r in range(4):
                for data in (f"small {r}", f"big {r} " + "z" * 1800):
                    datas.append(data)
                    want.append(publish(h.port, data=data))
                    take_all(data)
                    c.pump(0.2)  # idle: nothing more comes
                    assert c.ids(sid) == want
            text = c.text(sid)
            got = [ln[6:] for ln in text.split("\n") if ln.startswith("data: ")]
            assert got == datas, [len(d) for d in got]
            assert spent_midway >= 4 * 3, spent_midway
            assert sid not in c.ended and not c.resets and c.goaway is None
        finally:
            c.close()
        assert h.log_ok()


def test_nghttp_small_window_gets_every_event():
    with Herald() as h:
        # Windows of 2^8-1 bytes for the stream and 2^16-1 for the
        # connection: herald sends within them, nghttp opens them as it reads.
        p = subprocess.Popen(["stdbuf", "-o0", "nghttp", "-w", "8", "-W", "16", h.url + "/api/events/stream"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.set_blocking(p.stdout.fileno(), False)
        got = b""

        def text():
            nonlocal got
            try:
                d = p.stdout.read()
            except BlockingIOError:
                d = None
            if d:
                got += d
            return got.decode(errors="replace")

        try:
            wait_until(lambda: "retry:" in text(), what="nghttp's opening frame")
            ids = [publish(h.port, data=f"{i} " + "y" * 300) for i in range(40)]
            wait_until(lambda: [int(ln[4:]) for ln in text().split("\n") if ln.startswith("id: ")] == ids,
                       timeout=15, what="all events through a 255-byte window")
        finally:
            p.kill()
            p.wait()
            p.stdout.close()
            p.stderr.close()


# ---- slice 3: the limits ----

REFUSED_STREAM, CANCEL, ENHANCE_YOUR_CALM, NO_ERROR, INTERNAL_ERROR, PROTOCOL_ERROR = 0x7, 0x8, 0xB, 0x0, 0x2, 0x1


def test_max_concurrent_streams_refuses_the_rest():
    with Herald(args=["--http2-max-streams", "3"]) as h:
        c = H2Raw(h.port)
        try:
            sids = [c.request() for _ in range(5)]
            c.wait(lambda: all("retry:" in c.text(s) for s in sids[:3]), what="three streams open")
            c.wait(lambda: all(c.resets.get(s) == REFUSED_STREAM for s in sids[3:]),
                   what="the fourth and fifth refused")
            # A stream that ends makes room for another.
            c.send(RST_STREAM, 0, sids[0], struct.pack(">I", CANCEL))
            wait_until(lambda: _metric(h, "herald_readers") == 2, what="the reset stream closed")
            again = c.request()
            c.wait(lambda: "retry:" in c.text(again), what="a stream in the freed place")
        finally:
            c.close()


def test_per_address_limit_and_max_readers_count_streams_not_connections():
    with Herald(args=["--per-address-limit", "2"]) as h:
        c = H2Raw(h.port)
        try:
            a, b, third = c.request(), c.request(), c.request()
            c.wait(lambda: third in c.ended, what="the third stream ended")
            assert '"status":429' in c.text(third), c.text(third)
            assert "retry:" in c.text(a) and "retry:" in c.text(b)
        finally:
            c.close()
    with Herald(args=["--max-readers", "1"]) as h:
        c = H2Raw(h.port)
        try:
            a, b = c.request(), c.request()
            c.wait(lambda: b in c.ended, what="the second stream ended")
            assert '"status":503' in c.text(b), c.text(b)
        finally:
            c.close()


def test_header_list_too_large_is_refused_with_431():
    with Herald(args=["--max-header-bytes", "1024"]) as h:
        c = H2Raw(h.port)
        try:
            sid = c.request("/api/health", extra=[("x-big", "z" * 4000)])
            c.wait(lambda: sid in c.ended or sid in c.resets, what="the stream ended")
            assert '"status":431' in c.text(sid), (c.text(sid), c.resets)
            ok = c.request("/api/health")
            c.wait(lambda: ok in c.ended, what="the next request on the connection")
            assert '"status":"ok"' in c.text(ok)
        finally:
            c.close()


def test_rapid_reset_ends_the_connection():
    with Herald() as h:
        c = H2Raw(h.port)
        try:
            # Open and cancel streams as fast as the socket takes them
            # (CVE-2023-44487): the connection is cut, not served.
            batch = b""
            for _ in range(3000):
                sid = c.next_id
                c.next_id += 2
                block = hpack_literal([(":method", "GET"), (":scheme", "http"), (":authority", "x"),
                                       (":path", "/api/events/stream")])
                batch += c.frame_bytes(HEADERS, END_HEADERS | END_STREAM, sid, block)
                batch += c.frame_bytes(RST_STREAM, 0, sid, struct.pack(">I", CANCEL))
            try:
                c.sock.sendall(batch)
            except (BrokenPipeError, ConnectionResetError):
                pass
            assert c.wait_closed(10)
            # nghttp2's own limit answers INTERNAL_ERROR.
            assert c.goaway is None or c.goaway[1] in (ENHANCE_YOUR_CALM, INTERNAL_ERROR), c.goaway
        finally:
            c.close()
        wait_until(lambda: _metric(h, "herald_readers") == 0, what="no reader left behind")
        assert h.log_ok()


def test_continuation_flood_ends_the_connection():
    with Herald() as h:
        c = H2Raw(h.port)
        try:
            block = hpack_literal([(":method", "GET"), (":scheme", "http"), (":authority", "x"),
                                   (":path", "/api/health")])
            c.send(HEADERS, 0, 1, block)
            try:
                for i in range(200):
                    c.send(CONTINUATION, 0, 1, hpack_literal([(f"x-{i}", "v")]))
            except (BrokenPipeError, ConnectionResetError):
                pass
            assert c.wait_closed(10)
            assert 1 not in c.ended
        finally:
            c.close()
        assert h.log_ok()


def test_ping_and_settings_floods_end_the_connection():
    with Herald() as h:
        for type in (PING, SETTINGS):
            c = H2Raw(h.port)
            try:
                payload = b"12345678" if type == PING else struct.pack(">HI", 0x3, 100)
                frames = c.frame_bytes(type, 0, 0, payload) * 2000
                try:
                    c.sock.sendall(frames)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                assert c.wait_closed(10), type
                assert c.goaway is None or c.goaway[1] == ENHANCE_YOUR_CALM, c.goaway
            finally:
                c.close()
        assert h.log_ok()


def test_window_never_opened_is_closed_as_a_stalled_reader():
    with Herald(args=["--stall-timeout", "1s", "--heartbeat-interval", "200ms", "--keepalive-timeout", "1s"]) as h:
        c = H2Raw(h.port, settings=[(0x4, 0)])  # INITIAL_WINDOW_SIZE 0, never opened
        try:
            sid = c.request()
            c.wait(lambda: c.resets.get(sid) == CANCEL, what="the stalled stream reset")
            assert c.data.get(sid, b"") == b""
            # Then the connection, with no stream left, goes idle and closes.
            assert c.wait_closed(10)
            assert c.goaway and c.goaway[1] == NO_ERROR, c.goaway
        finally:
            c.close()
        assert "no bytes accepted" in h.log()


def test_idle_session_closes_with_goaway():
    with Herald(args=["--keepalive-timeout", "500ms"]) as h:
        c = H2Raw(h.port)
        try:
            sid = c.request("/api/health")
            c.wait(lambda: sid in c.ended, what="the health answer")
            t0 = time.monotonic()
            assert c.wait_closed(10)
            assert c.goaway == (sid, NO_ERROR), c.goaway
            assert time.monotonic() - t0 < 5
        finally:
            c.close()


def test_session_idle_after_its_first_request_closes_after_keepalive_not_header_timeout():
    # The session's timer is first set for header_timeout (no request yet);
    # once a request was answered the shorter keepalive_timeout applies.
    with Herald(args=["--keepalive-timeout", "500ms", "--header-timeout", "10s"]) as h:
        c = H2Raw(h.port)
        try:
            c.wait(lambda: c.settings_seen, what="herald's SETTINGS (the session begun, its timer set)")
            sid = c.request("/api/health")
            c.wait(lambda: sid in c.ended, what="the health answer")
            t0 = time.monotonic()
            assert c.wait_closed(8)
            assert time.monotonic() - t0 < 4, time.monotonic() - t0
            assert c.goaway == (sid, NO_ERROR), c.goaway
        finally:
            c.close()


def test_silent_client_is_pinged_and_closed_without_an_answer():
    with Herald(args=["--keepalive-timeout", "500ms", "--stall-timeout", "1s"]) as h:
        mute = H2Raw(h.port, answer_pings=False)
        alive = H2Raw(h.port)
        try:
            ms, al = mute.request(), alive.request()
            mute.wait(lambda: "retry:" in mute.text(ms), what="the mute client's stream open")
            alive.wait(lambda: "retry:" in alive.text(al), what="the answering client's stream open")
            t0 = time.monotonic()
            while not mute.eof and time.monotonic() - t0 < 10:
                mute.pump(0.05)
                alive.pump(0.05)  # answers its PINGs as they come
            assert mute.eof and mute.pinged >= 1 and time.monotonic() - t0 >= 1.0
            # The client that answers keeps its stream through several PINGs.
            alive.wait(lambda: alive.pinged >= 3, timeout=10, what="three PINGs answered")
            assert not alive.eof and al not in alive.ended
        finally:
            mute.close()
            alive.close()


def test_graceful_stop_sends_goaway_and_ends_streams():
    h = Herald()
    c = H2Raw(h.port)
    try:
        a, b = c.request(), c.request()
        c.wait(lambda: "retry:" in c.text(a) and "retry:" in c.text(b), what="two streams open")
        h.stop()
        c.wait(lambda: a in c.ended and b in c.ended, what="both streams ended")
        assert c.goaway and c.goaway[1] == NO_ERROR, c.goaway
        assert c.wait_closed(5)
    finally:
        c.close()


def test_rotation_ends_streams_and_sends_the_session_away():
    with Herald(args=["--rotate-after", "1s"]) as h:
        c = H2Raw(h.port)
        try:
            a = c.request()
            c.wait(lambda: a in c.ended, timeout=5, what="the stream rotated")
            # Its reconnect on this old connection is served, and told to
            # take the next one elsewhere.
            b = c.request()
            c.wait(lambda: "retry:" in c.text(b) and c.goaway is not None, what="served and sent away")
            assert c.goaway == (b, NO_ERROR), c.goaway
        finally:
            c.close()


def test_churn_of_streams_resets_and_dropped_connections():
    # Streams opened, reset and dropped with their connections at random
    # while events flow; herald (under the sanitizers in the suite) stays
    # whole and every surviving stream has every event in order.
    import random
    rnd = random.Random(7)
    with Herald(args=["--per-address-limit", "0", "--queue-limit", "4096"]) as h:
        keep = H2Raw(h.port)
        ks = keep.request()
        keep.wait(lambda: "retry:" in keep.text(ks), what="the steady stream open")
        ids = []
        for rnd_i in range(12):
            cs = [H2Raw(h.port, settings=[(0x4, rnd.choice([0, 50, 65535]))]) for _ in range(4)]
            for c in cs:
                for _ in range(rnd.randrange(1, 12)):
                    sid = c.request(rnd.choice(["/api/events/stream", "/api/health", "/api/events/stream?topic=a"]))
                    if rnd.random() < 0.3:
                        c.send(RST_STREAM, 0, sid, struct.pack(">I", CANCEL))
            ids += [publish(h.port, data="c" * rnd.randrange(1, 2000)) for _ in range(3)]
            for c in cs:
                c.pump(0.02)
                if rnd.random() < 0.5:
                    c.send(GOAWAY, 0, 0, struct.pack(">II", 0, 0))
                c.close()
            keep.pump(0.02)
        keep.wait(lambda: keep.ids(ks) == ids, what="every event on the steady stream")
        keep.close()
        wait_until(lambda: _metric(h, "herald_readers") == 0, what="every reader gone")
        assert h.log_ok()


# ---- what operators see: /metrics, /api/health, the open-file cap ----


def _metrics_text(port):
    st, _, body = request(port, "GET", "/metrics")
    assert st == 200, st
    return body.decode()


def _gauge(text, name):
    """The value of an unlabelled sample, or of name{labels} given whole."""
    for ln in text.split("\n"):
        if ln.startswith(name + " "):
            return float(ln.split()[1])
    return None


def _health(port):
    st, _, body = request(port, "GET", "/api/health")
    assert st == 200, (st, body)
    return json.loads(body)


def _streams_open(c, n, path="/api/events/stream"):
    sids = [c.request(path) for _ in range(n)]
    c.wait(lambda: all("retry:" in c.text(s) for s in sids), what=f"{n} streams open")
    return sids


def test_metrics_count_http2_sessions_streams_and_the_sessions_herald_ended():
    with Herald() as h:
        a, b = H2Raw(h.port), H2Raw(h.port)
        try:
            _streams_open(a, 3)
            _streams_open(b, 1)
            # The /metrics request itself is the third socket.
            want = {"herald_http2_sessions": 2, "herald_http2_streams": 4, "herald_readers": 4,
                    "herald_connections": 3}
            wait_until(lambda: {k: _gauge(_metrics_text(h.port), k) for k in want} == want,
                       what=f"gauges {want}")
            a.close()
            want = {"herald_http2_sessions": 1, "herald_http2_streams": 1, "herald_connections": 2}
            wait_until(lambda: {k: _gauge(_metrics_text(h.port), k) for k in want} == want,
                       what=f"gauges {want} once a session closed")
        finally:
            a.close()
            b.close()
        ended = 'herald_http2_sessions_ended_total{cause="%s"}'
        text = _metrics_text(h.port)
        assert all(_gauge(text, ended % c) == 0 for c in ("protocol_error", "flood", "stall_timeout",
                                                          "ping_unanswered")), text
        # A PING flood, and a protocol error nghttp2 finds (DATA on stream 0).
        flood = H2Raw(h.port)
        try:
            try:
                flood.sock.sendall(flood.frame_bytes(PING, 0, 0, b"12345678") * 2000)
            except (BrokenPipeError, ConnectionResetError):
                pass
            assert flood.wait_closed(10)
        finally:
            flood.close()
        bad = H2Raw(h.port)
        try:
            bad.send(DATA, 0, 0, b"x")
            assert bad.wait_closed(10)
            assert bad.goaway and bad.goaway[1] == PROTOCOL_ERROR, bad.goaway
        finally:
            bad.close()
        wait_until(lambda: (lambda t: (_gauge(t, ended % "flood"), _gauge(t, ended % "protocol_error"),
                                       _gauge(t, "herald_http2_sessions")))(_metrics_text(h.port)) == (1, 1, 0),
                   what="one session ended for a flood, one for a protocol error")


def test_metrics_of_a_group_sum_every_workers_http2_sessions_and_streams():
    with Herald(config="workers = 2\n") as h:
        cs = [H2Raw(h.port) for _ in range(4)]
        try:
            for c in cs:
                _streams_open(c, 2)
            # The connections land on either worker; the sums do not care.
            want = {"herald_http2_sessions": 4, "herald_http2_streams": 8, "herald_readers": 8}
            wait_until(lambda: {k: _gauge(_metrics_text(h.port), k) for k in want} == want, timeout=10,
                       what=f"the group's gauges {want}")
        finally:
            for c in cs:
                c.close()


def test_health_counts_sockets_as_connections_and_http2_streams_apart():
    with Herald() as h:
        c = H2Raw(h.port)
        try:
            _streams_open(c, 3)
            # Over HTTP/1.1: the h2c socket and this request's.
            wait_until(lambda: (lambda j: (j["connections"], j["http2_streams"], j["readers"]))(_health(h.port))
                       == (2, 3, 3), what="connections 2, http2_streams 3")
            # Over the same h2c connection: one socket, the health request
            # being a fourth stream.
            sid = c.request("/api/health")
            c.wait(lambda: sid in c.ended, what="health over h2c")
            j = json.loads(c.text(sid))
            assert (j["connections"], j["http2_streams"], j["readers"]) == (1, 4, 3), j
        finally:
            c.close()
        wait_until(lambda: (lambda j: (j["connections"], j["http2_streams"]))(_health(h.port)) == (1, 0),
                   what="only the health request's own socket left")


def test_open_file_limit_caps_sockets_not_http2_streams():
    from test_caps import _herald_with_nofile, _readers_until_refused
    # 64 descriptors: about 32 for clients. One h2c connection carries 90
    # streams, all served; HTTP/1.1 readers beside it are refused once the
    # sockets reach the cap, as without HTTP/2.
    with _herald_with_nofile(64, ["--per-address-limit", "0"]) as h:
        c = H2Raw(h.port)
        got = []
        try:
            sids = _streams_open(c, 90)
            _readers_until_refused(h.port, got)
            text = _metrics_text(h.port)
            assert _gauge(text, 'herald_refusals_total{code="503",cause="open_file_limit"}') == 1, text
            n = publish(h.port, data="fd")
            c.wait(lambda: all(c.ids(s) == [n] for s in sids), what="every h2c stream has the event")
            for st, s in got[:-1]:
                assert [e["id"] for e in s.events(1, timeout=5)] == [n]
        finally:
            c.close()
            for _, s in got:
                if s:
                    s.close()


test_open_file_limit_caps_sockets_not_http2_streams.timeout = 60


def test_explicit_max_readers_still_counts_http2_streams_under_the_open_file_limit():
    from test_caps import _herald_with_nofile
    with _herald_with_nofile(64, ["--per-address-limit", "0", "--max-readers", "40"]) as h:
        c = H2Raw(h.port)
        try:
            sids = [c.request() for _ in range(41)]
            c.wait(lambda: sids[-1] in c.ended, what="the 41st stream refused")
            assert '"status":503' in c.text(sids[-1]), c.text(sids[-1])
            c.wait(lambda: all("retry:" in c.text(s) for s in sids[:-1]), what="40 streams open")
        finally:
            c.close()


# ---- slice 4: a proxy speaking h2c to herald ----

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _docs_h2c_block():
    """The Caddyfile block docs/browsers.md gives for h2c to herald."""
    with open(os.path.join(ROOT, "docs", "browsers.md")) as f:
        text = f.read()
    after = text.split("Caddy in front, speaking h2c to herald", 1)[1]
    return after.split("```\n", 2)[1]


def _established_to(port):
    """TCP connections established to 127.0.0.1:port (herald's side)."""
    n = 0
    with open("/proc/net/tcp") as f:
        for ln in f.readlines()[1:]:
            local, st = ln.split()[1], ln.split()[3]
            if st == "01" and int(local.split(":")[1], 16) == port:
                n += 1
    return n


def _h2c_caddy(upstream):
    """Caddy on a spare port with docs/browsers.md's h2c block, its site address
    and upstream replaced."""
    from test_caddy import Caddy, _replace_once

    class H2cCaddy(Caddy):
        def _caddyfile(self, port):
            text = _docs_h2c_block()
            text = _replace_once(text, "https://events.example.com {",
                                 f"http://127.0.0.1:{port} {{\n\tbind 127.0.0.1")
            text = _replace_once(text, "reverse_proxy 127.0.0.1:8199 {", f"reverse_proxy {self.upstream} {{")
            return "{\n\tadmin off\n\tgrace_period 1s\n}\n\n" + text

    return H2cCaddy(upstream)


def _insert_while_down(db, datas):
    """Public events on 'news' written to herald's database by another
    program while herald is stopped; returns their ids."""
    import sqlite3
    con = sqlite3.connect(db)
    ids = [con.execute("INSERT INTO events(type, topic, data, public) VALUES('message', 'news', ?, 1)",
                       (d,)).lastrowid for d in datas]
    con.commit()
    con.close()
    return ids


def _herald_again(db, port):
    """herald started again on db and the same port."""
    h = Herald(db=db, listen=False, args=["--listen", f"127.0.0.1:{port}"])
    h.port = port
    return h


def test_caddy_h2c_carries_2000_readers_over_few_connections_across_a_restart():
    import selectors
    from test_caddy import ProxiedStream

    n = 2000
    h = Herald()
    port, db = h.port, h.db
    caddy = _h2c_caddy(f"127.0.0.1:{port}")
    readers = []
    try:
        def open_all(last_ids=None):
            out = []
            for i in range(n):
                extra = {"Last-Event-ID": str(last_ids[i])} if last_ids else {}
                r = ProxiedStream(caddy.port, headers=extra, source="127.0.0.%d" % (2 + i % 200))
                assert r.status == 200, r.status
                r.sock.setblocking(False)
                r.ids = []
                out.append(r)
            return out

        def read_until(rs, want):
            sel = selectors.DefaultSelector()
            for r in rs:
                sel.register(r.sock, selectors.EVENT_READ, r)
            deadline = time.monotonic() + 30
            while any(r.ids != want for r in rs):
                assert time.monotonic() < deadline, "readers missing events: " + str(
                    [r.ids for r in rs if r.ids != want][:3])
                for key, _ in sel.select(0.2):
                    r = key.data
                    r.pump()
                    for f in r.frames():
                        for ln in f.decode().split("\n"):
                            if ln.startswith("id: "):
                                r.ids.append(int(ln[4:]))
            sel.close()

        readers = open_all()
        first = [publish(port, data="one"), publish(port, data="two")]
        read_until(readers, first)
        # Three hundred readers, a handful of herald connections.
        # At most http2_max_streams (100) on each: twenty-odd connections
        # where HTTP/1.1 would hold two thousand.
        conns = _established_to(port)
        assert 1 <= conns <= n // 100 + 4, conns
        print(f"{n} readers through Caddy over {conns} h2c connection(s)")
        # Restart herald on the same port; events written while it is down
        # and after come to every reader resuming with Last-Event-ID.
        h.stop()
        for r in readers:
            r.sock.close()
        sqlite_ids = _insert_while_down(db, [f"while down {i}" for i in range(3)])
        h = _herald_again(db, port)
        readers = open_all([first[-1]] * n)
        after = publish(port, data="after")
        read_until(readers, sqlite_ids + [after])
        assert _established_to(port) <= n // 100 + 4
        assert h.log_ok()
    finally:
        for r in readers:
            r.sock.close()
        caddy.stop()
        h.stop()


test_caddy_h2c_carries_2000_readers_over_few_connections_across_a_restart.timeout = 120
test_caddy_h2c_carries_2000_readers_over_few_connections_across_a_restart.alone = True


def test_caddy_h2c_new_requests_during_a_restart_wait_for_herald_and_resume():
    """What Caddy 2.6 does with docs/browsers.md's h2c block while herald restarts
    (without herald.socket holding the port): a request that finds herald
    down is dialled again every lb_try_interval for lb_try_duration, and
    reaches herald once it listens again, resuming without loss; one that
    finds no herald for longer gets a 502 and Caddy serves on."""
    from test_caddy import ProxiedStream

    class Pending(ProxiedStream):
        """A stream request sent now, its answer read later."""

        def __init__(self, port, headers=None):
            self.sock = connect(port, timeout=15)
            h = {"Host": f"127.0.0.1:{port}", "Accept": "text/event-stream", **(headers or {})}
            self.sock.sendall(("GET /api/events/stream HTTP/1.1\r\n" +
                               "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n").encode())

        def answer(self):
            from harness import parse_head
            from test_caddy import Dechunk
            buf = b""
            while b"\r\n\r\n" not in buf:
                d = self.sock.recv(65536)
                assert d, f"closed before a response head: {buf!r}"
                buf += d
            head, _, rest = buf.partition(b"\r\n\r\n")
            self.status, self.headers = parse_head(head)
            self.chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
            self.dechunk, self.body, self.closed = Dechunk(), b"", False
            self._add(rest)
            return self.status

        def ids_until(self, want, timeout=10.0):
            got, deadline = [], time.monotonic() + timeout
            self.sock.settimeout(0.2)
            while got != want:
                assert time.monotonic() < deadline, f"ids {got}, want {want}"
                try:
                    if not self.pump():
                        raise AssertionError(f"stream closed with ids {got}, want {want}")
                except socket.timeout:
                    pass
                for f in self.frames():
                    got += [int(ln[4:]) for ln in f.decode().split("\n") if ln.startswith("id: ")]
            return got

    assert "lb_try_duration 5s" in _docs_h2c_block()
    h = Herald()
    port, db = h.port, h.db
    caddy = _h2c_caddy(f"127.0.0.1:{port}")
    readers = []
    try:
        first = Pending(caddy.port)
        assert first.answer() == 200
        e1 = publish(port, data="before")
        assert first.ids_until([e1]) == [e1]
        h.stop()
        # The stream open at the stop ends for the client too (herald's
        # GOAWAY and END_STREAM, passed on by Caddy), so EventSource
        # reconnects by itself.
        def ended():
            try:
                first.pump()
            except socket.timeout:
                pass
            return first.closed or first.dechunk.done
        wait_until(ended, timeout=10, what="the open stream ended through Caddy")
        first.sock.close()
        # Down for longer than lb_try_duration: Caddy answers 502 once it
        # has tried for that long, and goes on serving.
        t0 = time.monotonic()
        st, _, _ = request(caddy.port, "GET", "/api/health", headers={"Host": f"127.0.0.1:{caddy.port}"},
                           timeout=20)
        waited = time.monotonic() - t0
        assert st == 502 and waited >= 4.5, (st, waited)
        # Down a moment: an event written meanwhile, readers asking Caddy
        # (one resuming, one new), then herald on the same port again.
        e2, = _insert_while_down(db, ["down"])
        readers = [Pending(caddy.port, {"Last-Event-ID": str(e1)}) for _ in range(3)] + [Pending(caddy.port)]
        h = _herald_again(db, port)
        assert [r.answer() for r in readers] == [200] * 4
        e3 = publish(port, data="after")
        for r in readers[:3]:
            assert r.ids_until([e2, e3]) == [e2, e3]
        assert readers[3].ids_until([e3]) == [e3]
        assert h.log_ok()
    finally:
        for r in readers:
            r.sock.close()
        caddy.stop()
        h.stop()


test_caddy_h2c_new_requests_during_a_restart_wait_for_herald_and_resume.timeout = 60


# ---- slice 4: Chromium on herald's own TLS listener ----


def test_chromium_forty_event_sources_over_one_tls_connection():
    from test_browser import Page, ids
    names = [f"e{i}" for i in range(40)]
    # Forty streams from one address: past the default per_address_limit.
    # A spare connection Chromium may race beside the first carries no
    # stream: it is closed once idle for keepalive_timeout. The session
    # parks at its first write and reads Chromium's frames itself.
    h = _tls_herald(args=["--per-address-limit", "64", "--keepalive-timeout", "1s", "--log-level", "debug"])
    with h:
        base = f"https://127.0.0.1:{h.tls_port}"
        with Page("stream.mjs", page=base + "/api/health", streams={n: base + "/api/events/stream" for n in names},
                  flags=["--ignore-certificate-errors"]) as p:
            st = p.ready()
            assert all(st[n]["readyState"] == 1 for n in names), st
            wait_until(lambda: json.loads(_curl(h.url + "/api/health")[1])["readers"] == 40, timeout=10,
                       what="herald to count 40 readers")
            # All on one connection, and the page's other requests pass.
            wait_until(lambda: _established_to(h.tls_port) == 1, timeout=10,
                       what=f"one connection (have {_established_to(h.tls_port)})")
            assert p.value("fetch('/api/health').then(r => r.status)") == 200
            sent = [publish(h.port, data=f"to-forty {i}") for i in range(3)]
            st = p.do(until=" && ".join(f"esCount('{n}') >= 3" for n in names))
            proto = p.value("performance.getEntriesByType('navigation')[0].nextHopProtocol")
        assert "parked (sequence" in h.log() and "reading on" in h.log()
    assert proto == "h2", f"the page came over {proto!r}, not HTTP/2"
    for n in names:
        assert ids(st[n]) == sent, (n, st[n])
        assert st[n]["errors"] == [], (n, st[n])


test_chromium_forty_event_sources_over_one_tls_connection.timeout = 60
test_chromium_forty_event_sources_over_one_tls_connection.alone = True


# ---- slice 5: figures (docs/BENCHMARKS.md) ----


def _cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])


def _tls_sock(port):
    import ssl
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    s = ctx.wrap_socket(connect(port), server_hostname="127.0.0.1")
    assert s.selected_alpn_protocol() == "h2"
    return s


def h2_figures(streams=1000, conns=10, tls=False, events=10):
    """Open `streams` event streams over `conns` HTTP/2 connections (h2c, or
    h2 over TLS), then publish `events` events one at a time. Returns
    herald's RSS per stream (KiB), the milliseconds from each publish to
    the last stream having it (median and worst) and herald's CPU per event
    (ms)."""
    import selectors
    args = ["--per-address-limit", "0", "--http2-max-streams", str(max(100, streams // conns)),
            "--heartbeat-interval", "1h"]
    h = _tls_herald(args=args) if tls else Herald(args=args)
    cs = []
    try:
        time.sleep(0.3)
        rss0 = h.rss_kb()
        per = streams // conns
        for _ in range(conns):
            c = H2Raw(sock=_tls_sock(h.tls_port)) if tls else H2Raw(h.port)
            c.window_update(0, 1 << 30)
            c.sids = [c.request() for _ in range(per)]
            cs.append(c)
        for c in cs:
            c.wait(lambda c=c: all(b"stream open" in c.data.get(s, b"") for s in c.sids), timeout=60,
                   what="every opening frame")
        # Idle sessions: past the second after which a quiet session gives
        # its frame buffer's pages back (h2_session.c, QUIET_MS).
        time.sleep(1.5)
        rss1 = h.rss_kb()
        sel = selectors.DefaultSelector()
        for c in cs:
            c.sock.setblocking(False)
            sel.register(c.sock, selectors.EVENT_READ, c)
        lat = []
        cpu0 = _cpu_ticks(h.pid)
        for k in range(events):
            want = f"id: {publish(h.port, data=f'figure {k}')}\n".encode()
            t0 = time.monotonic()
            left = {(id(c), s) for c in cs for s in c.sids}
            while left:
                for key, _ in sel.select(5):
                    c = key.data
                    while True:  # all there is (TLS gives a record a call)
                        try:
                            d = c.sock.recv(1 << 20)
                        except (BlockingIOError, ssl_want_read()):
                            break
                        if not d:
                            break
                        c.buf += d
                    c._parse()
                left = {(i, s) for i, s in left
                        if want not in next(c for c in cs if id(c) == i).data.get(s, b"")}
            lat.append((time.monotonic() - t0) * 1000)
            time.sleep(0.2)
        cpu1 = _cpu_ticks(h.pid)
        lat.sort()
        return {"streams": streams, "conns": conns, "tls": tls, "rss_per_stream_kib": (rss1 - rss0) / streams,
                "event_to_last_ms_p50": lat[len(lat) // 2], "event_to_last_ms_max": lat[-1],
                "cpu_ms_per_event": (cpu1 - cpu0) * 1000.0 / os.sysconf("SC_CLK_TCK") / events}
    finally:
        for c in cs:
            c.close()
        h.stop()


def _sanitized(path):
    with open(path, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__ubsan_handle_" in data


def test_idle_streams_over_one_connection_cost_about_a_kilobyte_each():
    # An idle stream holds no data item in nghttp2, small records of its
    # own and of its connection, and no output ring: 0.97 KiB of RSS each
    # over one h2c connection in a release build, 1.40 before
    # (docs/BENCHMARKS.md). The bound leaves a fifth for the allocator.
    # Under a sanitizer RSS is the sanitizer's, so only a release herald
    # is held to it (HERALD_BUILD=build).
    from harness import HERALD_BIN
    if _sanitized(HERALD_BIN):
        print(f"{HERALD_BIN} is sanitized: the bound is asserted on a release build only")
        return
    f = h2_figures(streams=1000, conns=1, events=1)
    assert f["rss_per_stream_kib"] < 1.2, f


test_idle_streams_over_one_connection_cost_about_a_kilobyte_each.alone = True


def ssl_want_read():
    import ssl
    return ssl.SSLWantReadError


def test_figures_small_run():
    # A small run of the measurement behind docs/BENCHMARKS.md, so it keeps
    # working; the figures there come from a release build.
    f = h2_figures(streams=200, conns=2, events=3)
    assert f["event_to_last_ms_max"] < 5000, f
    f = h2_figures(streams=20, conns=20, tls=True, events=2)
    assert f["event_to_last_ms_max"] < 5000, f


test_figures_small_run.alone = True


if __name__ == "__main__":
    # python3 tests/e2e/test_http2.py: the figures, with $HERALD_BIN.
    for kw in ({"streams": 1000, "conns": 1}, {"streams": 1000, "conns": 10}, {"streams": 200, "conns": 200},
               {"streams": 1000, "conns": 1, "tls": True}, {"streams": 200, "conns": 200, "tls": True}):
        print(json.dumps(h2_figures(**kw)), flush=True)
