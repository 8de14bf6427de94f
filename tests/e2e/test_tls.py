# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: TLS listeners (tls:ADDRESS with tls_cert/tls_key) beside a
plain one. Certificates are made here with `openssl req` (P-256, with
subjectAltName IP:127.0.0.1). curl and openssl s_client talk to herald;
Python's ssl module reads streams. Covered: configuration errors, TLS 1.3
preferred and 1.2 accepted (older refused), ALPN http/1.1, session tickets,
streams and publishes over TLS, a slow TLS reader moved to catch-up without
a broken record, stalled handshakes and garbage closed without delaying
other readers, SIGHUP swapping the certificate (a bad one refused), unusable
certificate files refused by --check-config, and ticket keys rotating."""
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import tempfile
import time

from harness import HERALD_BIN, Herald, HttpConn, Stream, connect, publish, publish_many, request, wait_until


def _run(cmd, timeout=20, input=None):
    return subprocess.run(cmd, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)


def _make_cert(dir, name, cn="herald-test"):
    """A self-signed P-256 certificate for 127.0.0.1: (cert path, key path)."""
    cert, key = os.path.join(dir, name + ".crt"), os.path.join(dir, name + ".key")
    r = _run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
              "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=" + cn,
              "-addext", "subjectAltName=IP:127.0.0.1"])
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return cert, key


def _fingerprint(pem_text):
    r = _run(["openssl", "x509", "-noout", "-fingerprint", "-sha256"], input=pem_text)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout.decode().strip().partition("=")[2]


def _file_fingerprint(cert):
    with open(cert, "rb") as f:
        return _fingerprint(f.read())


def _s_client(port, *extra):
    """openssl s_client's output for one connection to the TLS port."""
    r = _run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", *extra], input=b"", timeout=15)
    return r.returncode, r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")


def _served_fingerprint(port):
    """The SHA-256 fingerprint of the certificate herald serves now."""
    code, out = _s_client(port)
    m = re.search(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", out, re.S)
    assert m, f"s_client got no certificate ({code}):\n{out}"
    return _fingerprint(m.group(0).encode())


def _tls_herald(dir, cert, key, args=()):
    return Herald(args=["--listen", "tls:127.0.0.1:0", "--tls-cert", cert, "--tls-key", key, *args], dir=dir)


def _client_ctx(cafile, max_version=None):
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.set_alpn_protocols(["http/1.1"])
    if max_version is not None:
        ctx.maximum_version = max_version
    return ctx


def _tls_connect(port, cafile, session=None, ctx=None, timeout=5.0, rcvbuf=None):
    """A blocking TLS socket to herald (handshake done)."""
    ctx = ctx or _client_ctx(cafile)
    raw = connect(port, timeout=timeout, rcvbuf=rcvbuf)
    try:
        return ctx.wrap_socket(raw, server_hostname="127.0.0.1", session=session)
    except BaseException:
        raw.close()
        raise


def _tls_http(sock):
    """A harness HttpConn (keep-alive request/response) over a TLS socket."""
    c = HttpConn.__new__(HttpConn)
    c.sock, c.buf, c.closed = sock, b"", False
    return c


def _client_hello():
    """The bytes of a real ClientHello, from a client that never continues."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_side=False)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def _closed_within(sock, timeout):
    """True if the peer closes (EOF or reset) within timeout; data is read and dropped."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        sock.settimeout(left)
        try:
            if not sock.recv(65536):
                return True
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True


def test_tls_configuration_errors():
    d = tempfile.mkdtemp(prefix="herald-tls-")
    cert, key = _make_cert(d, "a")
    _, other_key = _make_cert(d, "b")
    base = [HERALD_BIN, "--db", os.path.join(d, "x.db")]
    # tls_cert without a tls: listener, and a tls: listener without tls_cert.
    r = _run(base + ["--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key, "--check-config"])
    assert r.returncode == 1 and b"no listen address is a tls: one" in r.stderr, r
    r = _run(base + ["--listen", "tls:127.0.0.1:0", "--check-config"])
    assert r.returncode == 1 and b"tls_cert and tls_key are not set" in r.stderr, r
    r = _run(base + ["--listen", "tls:127.0.0.1:0", "--tls-cert", cert, "--check-config"])
    assert r.returncode == 1 and b"must be set together" in r.stderr, r
    r = _run(base + ["--listen", "tls:127.0.0.1:0", "--tls-cert", cert, "--tls-key", key, "--check-config"])
    assert r.returncode == 0, r
    # Unreadable or mismatched files stop the start-up with the reason.
    for c, k, why in ((os.path.join(d, "missing.crt"), key, "tls_cert"),
                      (cert, other_key, "does not match")):
        h = Herald(args=["--listen", "tls:127.0.0.1:0", "--tls-cert", c, "--tls-key", k], dir=d, wait=False)
        try:
            code = h.proc.wait(15)
        finally:
            h.kill()
        assert code == 1, (code, h.log())
        assert why in h.log(), h.log()
    h = Herald(args=["--listen", "tls:unix:" + os.path.join(d, "s.sock"), "--tls-cert", cert, "--tls-key", key],
               dir=d, wait=False)
    try:
        assert h.proc.wait(15) == 1, h.log()
    finally:
        h.kill()
    assert "TLS is served on TCP addresses only" in h.log(), h.log()


def test_curl_and_s_client_against_tls_and_plain_side_by_side():
    d = tempfile.mkdtemp(prefix="herald-tls-")
    cert, key = _make_cert(d, "a")
    with _tls_herald(d, cert, key) as h:
        kinds = sorted(k for k, _, _ in h.listeners())
        assert kinds == ["tcp", "tls"], h.listeners()
        assert h.tls_port and h.port and h.tls_port != h.port
        r = _run(["curl", "-sS", "--max-time", "10", "--cacert", cert, "-w", "\n%{http_code} %{http_version}",
                  f"https://127.0.0.1:{h.tls_port}/api/health"])
        assert r.returncode == 0, r.stderr
        body, _, tail = r.stdout.decode().rpartition("\n")
        # curl offers h2 first, and herald takes it (test_http2.py).
        assert tail == "200 2" and '"status":"ok"' in body, r.stdout
        r = _run(["curl", "-sS", "--max-time", "10", "--cacert", cert, "-H", "Content-Type: application/json",
                  "--data", '{"type":"t","topic":"news","data":"over tls","public":true}',
                  f"https://127.0.0.1:{h.tls_port}/api/events"])
        assert r.returncode == 0 and r.stdout.strip() == b'{"id":1}', r
        # The plain listener still speaks plain HTTP.
        st, _, body = request(h.port, "GET", "/api/health")
        assert st == 200, body
        # TLS 1.3 by default, ALPN http/1.1, the certificate we made.
        code, out = _s_client(h.tls_port, "-alpn", "http/1.1", "-CAfile", cert)
        assert "New, TLSv1.3, Cipher is" in out and "ALPN protocol: http/1.1" in out, out
        assert "Verify return code: 0 (ok)" in out, out
        assert _served_fingerprint(h.tls_port) == _file_fingerprint(cert)
        # TLS 1.2 accepted; a client offering only h2 gets it (HTTP/2,
        # test_http2.py), one offering only protocols herald lacks is refused.
        code, out = _s_client(h.tls_port, "-tls1_2")
        assert "New, TLSv1.2, Cipher is ECDHE-" in out, out
        code, out = _s_client(h.tls_port, "-alpn", "h2")
        assert "ALPN protocol: h2" in out, out
        code, out = _s_client(h.tls_port, "-alpn", "spdy/3")
        assert code != 0 and "no application protocol" in out.lower(), out
        # Nothing older than TLS 1.2, even from a client willing to.
        ctx = _client_ctx(cert, max_version=ssl.TLSVersion.TLSv1_1)
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        try:
            s = _tls_connect(h.tls_port, cert, ctx=ctx)
        except (ssl.SSLError, ConnectionError):
            pass
        else:
            s.close()
            raise AssertionError("a TLS 1.1 handshake succeeded")
        # Plain HTTP sent to the TLS port is not a handshake: closed.
        s = connect(h.tls_port)
        s.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _closed_within(s, 3.0)
        s.close()


def test_tls_stream_receives_published_events():
    d = tempfile.mkdtemp(prefix="herald-tls-")
    cert, key = _make_cert(d, "a")
    with _tls_herald(d, cert, key) as h:
        ts = Stream(sock=_tls_connect(h.tls_port, cert))
        assert ts.status == 200 and ts.headers["content-type"].startswith("text/event-stream"), ts.headers
        assert ts.sock.version() == "TLSv1.3" and ts.sock.selected_alpn_protocol() == "http/1.1"
        assert ts.opening() == b"retry: 3000\n: stream open\n\n"
        ps = Stream(h.port)
        ps.opening()
        big = "x" * 40000
        ids = [publish(h.port, data="one"), publish(h.port, data="two\nlines"), publish(h.port, data=big)]
        # A publish over TLS too (a body larger than one TLS record).
        hc = _tls_http(_tls_connect(h.tls_port, cert))
        st, _, body = hc.request("POST", "/api/events", {"type": "t", "topic": "news", "data": "y" * 60000,
                                                         "public": True})
        assert st == 201, body
        ids.append(int(re.search(rb"\d+", body).group(0)))
        # Pipelined requests over one TLS connection, answered in order.
        hc.send(HttpConn.format("GET", "/api/health") * 40)
        for _ in range(40):
            st, _, _ = hc.read_response()
            assert st == 200
        hc.close()
        for s in (ts, ps):
            evs = s.events(n=4, timeout=10)
            assert [e["id"] for e in evs] == ids, evs
            assert [e["data"] for e in evs] == ["one", "two\nlines", big, "y" * 60000]
        # Resume over TLS from a Last-Event-ID: exactly what came after it.
        rs = Stream(sock=_tls_connect(h.tls_port, cert), headers={"Last-Event-ID": str(ids[1])})
        assert [e["id"] for e in rs.events(n=2, timeout=10)] == ids[2:]
        for s in (ts, ps, rs):
            s.close()


class _BioTLS:
    """A TLS client over a blocking socket through memory BIOs, so that many
    records can be built first and handed to the kernel in one send."""

    def __init__(self, port, cafile):
        self.sock = connect(port, timeout=10)
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = _client_ctx(cafile).wrap_bio(self.inc, self.out, server_hostname="127.0.0.1")
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._pump()
        self.sock.sendall(self.out.read())

    def _pump(self):
        if self.out.pending:
            self.sock.sendall(self.out.read())
        d = self.sock.recv(65536)
        if not d:
            raise AssertionError("closed during the handshake")
        self.inc.write(d)

    def send_records(self, data, record):
        """Send data as TLS records of `record` plaintext bytes, all in one send."""
        for i in range(0, len(data), record):
            self.obj.write(data[i:i + record])
        self.sock.sendall(self.out.read())

    def read_response(self):
        buf = b""
        while True:
            m = re.search(rb"\r\nContent-Length: (\d+)\r\n.*?\r\n\r\n", buf, re.S | re.I)
            if m and len(buf) >= m.end() + int(m.group(1)):
                return int(buf[9:12]), buf[m.end():m.end() + int(m.group(1))]
            try:
                buf += self.obj.read(65536)
                continue
            except ssl.SSLWantReadError:
                pass
            d = self.sock.recv(65536)
            if not d:
                raise AssertionError(f"closed before a whole response: {buf!r}")
            self.inc.write(d)


def test_tls_input_decrypted_but_not_yet_read_is_not_stranded():
    """A request just past the per-wakeup read budget (64 KiB), arriving at
    once in records that do not line up with it: the tail OpenSSL has
    decrypted must be read without waiting for the socket (no 408)."""
    d = tempfile.mkdtemp(prefix="herald-tls-")
    cert, key = _make_cert(d, "a")
    with _tls_herald(d, cert, key, args=["--header-timeout", "4s"]) as h:
        c = _BioTLS(h.tls_port, cert)
        for i, record in enumerate((10000, 7001, 16384, 3333)):
            body = json.dumps({"topic": "big", "data": str(i) * 65450, "public": True}).encode()
            req = HttpConn.format("POST", "/api/events", body, {"Content-Type": "application/json"})
            assert 65536 < len(req)
            t0 = time.monotonic()
            c.send_records(req, record)
            st, body = c.read_response()
            assert st == 201, (record, st, body)
            assert time.monotonic() - t0 < 2.0, f"records of {record} bytes: the tail waited on a timer"
        c.sock.close()


def test_tls_session_resumption():
    d = tempfile.mkdtemp(prefix="herald-tls-")
    cert, key = _make_cert(d, "a")
    with _tls_herald(d, cert, key) as h:
        for version in (None, ssl.TLSVersion.TLSv1_2):
            ctx = _client_ctx(cert, max_version=version)
            s = _tls_connect(h.tls_port, cert, ctx=ctx)
            c = _tls_http(s)
            assert c.request("GET", "/api/health")[0] == 200  # TLS 1.3 tickets come after the handshake
            sess = s.session
            assert not s.session_reused
            c.close()
            assert sess is not None and sess.has_ticket, f"no session ticket ({version})"
            s2 = _tls_connect(h.tls_port, cert, ctx=ctx, session=sess)
            try:
                assert s2.session_reused, f"session not resumed ({version})"
                assert _tls_http(s2).request("GET", "/api/health")[0] == 200
            finally:
                s2.close()


def test_stalled_and_garbage_handshakes_do_not_delay_readers():
    d = tempfile.mkdtemp(prefix="herald-tls-")
    cert, key = _make_cert(d, "a")
    with _tls_herald(d, cert, key, args=["--header-timeout", "2s"]) as h:
        readers = [Stream(sock=_tls_connect(h.tls_port, cert)) for _ in range(3)]
        for r in readers:
            r.opening()
        hello = _client_hello()
        silent = connect(h.tls_port)                 # connects, says nothing
        half = connect(h.tls_port)                   # half a ClientHello
        half.sendall(hello[:len(hello) // 2])
        whole = connect(h.tls_port)                  # a ClientHello, then never its Finished
        whole.sendall(hello)
        whole.settimeout(5)
        assert whole.recv(5)[:1] == b"\x16", "no ServerHello for a whole ClientHello"
        garbage = connect(h.tls_port)                # not TLS at all
        garbage.sendall(os.urandom(64) + b"\r\n\r\n")
        started = time.monotonic()
        for i in range(3):
            t0 = time.monotonic()
            eid = publish(h.port, data=f"e{i}")
            for r in readers:
                evs = r.events(n=1, timeout=5)
                assert [e["id"] for e in evs] == [eid], evs
            assert time.monotonic() - t0 < 1.0, "readers were delayed by stalled handshakes"
        assert _closed_within(garbage, 2.0), "garbage on the TLS port was not closed at once"
        # The stalled ones are closed at header_timeout (2 s), not before, not much after.
        for s in (silent, half, whole):
            assert _closed_within(s, 6.0), "a stalled handshake was not closed"
        elapsed = time.monotonic() - started
        assert 1.0 <= elapsed < 6.0, elapsed
        for s in (silent, half, whole, garbage):
            s.close()
        # The readers are still there.
        eid = publish(h.port, data="after")
        for r in readers:
            assert [e["id"] for e in r.events(n=1, timeout=5)] == [eid]
            r.close()


def test_slow_tls_reader_catches_up_without_a_broken_record():
    d = tempfile.mkdtemp(prefix="herald-tls-")
    cert, key = _make_cert(d, "a")
    with _tls_herald(d, cert, key, args=["--queue-limit", "16k"]) as h:
        s = Stream(sock=_tls_connect(h.tls_port, cert, rcvbuf=4096, timeout=20))
        s.opening()
        # Enough to fill the socket buffers on both sides and pass the queue limit.
        n = 3000
        ids = publish_many(h.port, [{"type": "t", "topic": "news", "data": f"{i}:" + "z" * 3000, "public": True}
                                    for i in range(n)])
        time.sleep(0.3)
        evs = s.events(n=n, timeout=30)
        got = [e["id"] for e in evs]
        assert got == ids, f"got {len(got)} events; first gap near {next((a for a, b in zip(got, ids) if a != b), None)}"
        assert all(e["data"] == f"{i}:" + "z" * 3000 for i, e in enumerate(evs))
        _, _, m = request(h.port, "GET", "/metrics")
        moved = re.search(rb"^herald_readers_to_catchup_total (\d+)", m, re.M)
        assert moved and int(moved.group(1)) >= 1, "the reader never overflowed into catch-up"
        s.close()


def test_reload_swaps_certificate_and_keeps_readers():
    d = tempfile.mkdtemp(prefix="herald-tls-")
    cert, key = _make_cert(d, "live")
    new_cert, new_key = _make_cert(d, "next", cn="herald-next")
    fp_old, fp_new = _file_fingerprint(cert), _file_fingerprint(new_cert)
    assert fp_old != fp_new
    ctx = _client_ctx(cert)  # one context (sessions belong to it) trusting both
    ctx.load_verify_locations(new_cert)
    with _tls_herald(d, cert, key) as h:
        assert _served_fingerprint(h.tls_port) == fp_old
        r = Stream(sock=_tls_connect(h.tls_port, cert))
        r.opening()
        # A session from before the reload resumes after it (ticket keys kept).
        s = _tls_connect(h.tls_port, cert, ctx=ctx)
        assert _tls_http(s).request("GET", "/api/health")[0] == 200
        sess = s.session
        s.close()
        os.replace(new_cert, cert)
        os.replace(new_key, key)
        since = h.log_size()
        h.signal(signal.SIGHUP)
        h.wait_log(r"tls: reloaded .*sha256 " + re.escape(fp_new), since=since)
        h.wait_log(r"configuration reloaded; 1 readers kept", since=since)
        assert _served_fingerprint(h.tls_port) == fp_new
        eid = publish(h.port, data="after reload")
        assert [e["id"] for e in r.events(n=1, timeout=5)] == [eid]
        r2 = Stream(sock=_tls_connect(h.tls_port, cert))  # cert now holds the new certificate
        assert r2.status == 200
        s = _tls_connect(h.tls_port, cert, ctx=ctx, session=sess)
        assert s.session_reused
        s.close()
        r.close()
        r2.close()


def test_bad_certificate_at_reload_keeps_the_old_one():
    d = tempfile.mkdtemp(prefix="herald-tls-")
    cert, key = _make_cert(d, "live")
    other_cert, _ = _make_cert(d, "other")
    fp = _file_fingerprint(cert)
    with open(cert, "rb") as f:
        good_cert = f.read()
    with _tls_herald(d, cert, key) as h:
        r = Stream(sock=_tls_connect(h.tls_port, cert))
        r.opening()
        # Garbage where the certificate was; then a certificate whose key is not the one in tls_key.
        for bad, blamed in ((b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n",
                             "tls_cert"),
                            (open(other_cert, "rb").read(), "tls_key")):
            with open(cert, "wb") as f:
                f.write(bad)
            since = h.log_size()
            h.signal(signal.SIGHUP)
            # The new settings are checked as a whole, certificates included:
            # the reload is refused, naming the key and the file.
            h.wait_log(r"reload failed; the running configuration stays in force", since=since)
            said = h.log()[since:]
            assert f'{blamed} = "' in said, said
            assert "configuration reloaded" not in said, said
            assert _served_fingerprint(h.tls_port) == fp
            with open(cert, "wb") as f:
                f.write(good_cert)
            s = _tls_connect(h.tls_port, cert)  # verifies against the old certificate
            assert _tls_http(s).request("GET", "/api/health")[0] == 200
            s.close()
        eid = publish(h.port, data="still here")
        assert [e["id"] for e in r.events(n=1, timeout=5)] == [eid]
        assert h.proc.poll() is None
        r.close()


def test_check_config_refuses_unusable_certificates_naming_their_origin():
    d = tempfile.mkdtemp(prefix="herald-tls-")
    cert, key = _make_cert(d, "a")
    other_cert, other_key = _make_cert(d, "b")
    garbage = os.path.join(d, "garbage.crt")
    with open(garbage, "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    missing = os.path.join(d, "missing.pem")
    base = [HERALD_BIN, "--db", os.path.join(d, "x.db"), "--listen", "tls:127.0.0.1:0", "--check-config"]
    for c, k, bad, why in ((missing, key, "tls_cert", "No such file"),
                           (cert, missing, "tls_key", "No such file"),
                           (garbage, key, "tls_cert", ""),
                           (cert, other_key, "tls_key", "does not match")):
        shown = c if bad == "tls_cert" else k
        r = _run(base + ["--tls-cert", c, "--tls-key", k])
        err = r.stderr.decode()
        assert r.returncode == 1, f"--check-config accepted {c} / {k}:\n{err}"
        flag = "--" + bad.replace("_", "-")
        assert f'option {flag}: {bad} = "{shown}"' in err and why in err, err
        # From a file, the origin is its line.
        conf = os.path.join(d, "h.conf")
        with open(conf, "w") as f:
            f.write(f"listen = tls:127.0.0.1:0\ntls_cert = {c}\ntls_key = {k}\n")
        r = _run([HERALD_BIN, "--config", conf, "--check-config"])
        line = 2 if bad == "tls_cert" else 3
        assert r.returncode == 1 and f'{conf}:{line}: {bad} = "{shown}"' in r.stderr.decode(), r
    # Start-up refuses them the same way, before the database is created.
    r = _run([HERALD_BIN, "--db", os.path.join(d, "never.db"), "--listen", "tls:127.0.0.1:0",
              "--tls-cert", cert, "--tls-key", other_key], timeout=15)
    assert r.returncode == 1 and b"does not match" in r.stderr, r
    assert not os.path.exists(os.path.join(d, "never.db"))
    r = _run(base + ["--tls-cert", other_cert, "--tls-key", other_key])
    assert r.returncode == 0, r


def _session(port, cafile, version):
    """A fresh session (with a ticket) from a full handshake."""
    ctx = _client_ctx(cafile, max_version=version)
    s = _tls_connect(port, cafile, ctx=ctx)
    assert _tls_http(s).request("GET", "/api/health")[0] == 200  # TLS 1.3 tickets follow the handshake
    assert not s.session_reused
    sess = s.session
    s.close()
    assert sess is not None and sess.has_ticket
    return ctx, sess


def _resumes(port, cafile, ctx_sess):
    ctx, sess = ctx_sess
    s = _tls_connect(port, cafile, ctx=ctx, session=sess)
    try:
        assert _tls_http(s).request("GET", "/api/health")[0] == 200
        return s.session_reused
    finally:
        s.close()


def test_session_ticket_keys_rotate():
    """With tls_ticket_rotate = 4s: a ticket issued before one rotation still
    resumes; one from before two rotations gets a full handshake. Each
    session is offered once; each step takes well under a period."""
    d = tempfile.mkdtemp(prefix="herald-tls-")
    cert, key = _make_cert(d, "a")
    versions = (None, ssl.TLSVersion.TLSv1_2)
    with _tls_herald(d, cert, key, args=["--tls-ticket-rotate", "4s", "--log-level", "debug"]) as h:
        first = {v: [_session(h.tls_port, cert, v) for _ in range(3)] for v in versions}
        for v in versions:  # the same key: resumed
            assert _resumes(h.tls_port, cert, first[v].pop()), f"no resumption before any rotation ({v})"
        h.wait_log(r"tls: session ticket key rotated", timeout=10)
        second = {v: [_session(h.tls_port, cert, v) for _ in range(2)] for v in versions}
        for v in versions:  # issued under the previous key: still resumed
            assert _resumes(h.tls_port, cert, first[v].pop()), f"a ticket from one rotation ago refused ({v})"
        since = h.log_size()
        h.wait_log(r"tls: session ticket key rotated", timeout=10, since=since)
        for v in versions:
            assert not _resumes(h.tls_port, cert, first[v].pop()), f"a ticket from two rotations ago resumed ({v})"
            assert _resumes(h.tls_port, cert, second[v].pop()), f"a ticket from one rotation ago refused ({v})"
        assert len(re.findall(r"tls: session ticket key rotated", h.log())) == 2, h.log()


test_session_ticket_keys_rotate.timeout = 60


def _tickets_seen(port, cafile):
    """How many TLS 1.3 session tickets one connection receives (s_client
    prints a line for each), reading a whole HTTP/1.0 answer after them."""
    r = _run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_3", "-CAfile", cafile, "-ign_eof",
              "-msg"], input=b"GET /api/health HTTP/1.0\r\nHost: x\r\n\r\n", timeout=15)
    out = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
    assert '"status":"ok"' in out, out
    return out.count("NewSessionTicket")


def test_one_ticket_per_handshake_and_it_resumes():
    """herald sends one TLS 1.3 session ticket per handshake (OpenSSL's
    default is two), and that ticket resumes, again and again: every
    resumption brings the next ticket."""
    d = tempfile.mkdtemp(prefix="herald-tls-")
    cert, key = _make_cert(d, "a")
    with _tls_herald(d, cert, key) as h:
        assert _tickets_seen(h.tls_port, cert) == 1
        ctx = _client_ctx(cert)
        sess = None
        for i in range(4):
            s = _tls_connect(h.tls_port, cert, ctx=ctx, session=sess)
            assert s.session_reused == (i > 0), f"connection {i}: resumed {s.session_reused}"
            c = _tls_http(s)
            assert c.request("GET", "/api/health")[0] == 200  # the ticket comes before the answer
            sess = s.session
            assert sess.has_ticket
            c.close()


def test_after_a_burst_of_handshakes_memory_is_trimmed_and_streams_go_on():
    """Once a burst of handshakes is over, herald hands the heap's free pages
    back (logged at debug); a stream opened before the burst then still gets
    a large event whole after being idle (its record buffers were released
    and are allocated again), and tickets issued before it still resume."""
    d = tempfile.mkdtemp(prefix="herald-tls-")
    cert, key = _make_cert(d, "a")
    with _tls_herald(d, cert, key, args=["--log-level", "debug"]) as h:
        ctx = _client_ctx(cert)
        early = Stream(sock=_tls_connect(h.tls_port, cert, ctx=ctx))
        assert early.opening() == b"retry: 3000\n: stream open\n\n"
        first = _tls_connect(h.tls_port, cert, ctx=ctx)
        assert _tls_http(first).request("GET", "/api/health")[0] == 200
        ticket = first.session
        first.close()
        # 70 handshakes, a few at a time, then none in progress.
        socks = []
        for _ in range(70):
            socks.append(_tls_connect(h.tls_port, cert, ctx=ctx))
            if len(socks) == 10:
                for s in socks:
                    s.close()
                socks = []
        for s in socks:
            s.close()
        h.wait_log(r"tls: \d+ handshakes since the last trim; free heap pages", timeout=5)
        time.sleep(0.5)
        big = "".join(chr(ord("a") + i % 26) for i in range(60000))  # four TLS records
        eid = publish(h.port, data=big)
        evs = early.events(n=1, timeout=10)
        assert [e["id"] for e in evs] == [eid] and evs[0]["data"] == big
        again = _tls_connect(h.tls_port, cert, ctx=ctx, session=ticket)
        assert again.session_reused, "a ticket issued before the burst did not resume"
        assert _tls_http(again).request("GET", "/api/health")[0] == 200
        again.close()
        early.close()


def _raw_stream(port, cafile, max_version=None):
    """A TLS socket that reports an end without close_notify as an error,
    with the stream request sent and its head and opening frame read."""
    ctx = _client_ctx(cafile, max_version=max_version)
    s = ctx.wrap_socket(connect(port, timeout=10), server_hostname="127.0.0.1", suppress_ragged_eofs=False)
    s.sendall(b"GET /api/events/stream HTTP/1.1\r\nHost: x\r\n\r\n")
    got = b""
    while b": stream open\n\n" not in got:
        chunk = s.recv(65536)
        assert chunk, got
        got += chunk
    return s, got


def _read_until(s, marker, got=b""):
    while marker not in got:
        chunk = s.recv(65536)
        assert chunk, f"stream ended before {marker!r}: {got[-200:]!r}"
        got += chunk
    return got


def test_open_tls13_streams_are_parked_and_stay_correct():
    """A TLS 1.3 stream gives up its OpenSSL session on its first write and
    keeps only its traffic key, IV and record sequence (logged at debug):
    events of one record and of several still arrive whole and in order,
    and when herald stops, the stream ends with a close_notify this client
    accepts (sealed with the right key and sequence; a wrong one would be a
    bad record MAC). A TLS 1.2 stream keeps its session and works the same.
    A client's own close_notify ends a parked stream at once."""
    d = tempfile.mkdtemp(prefix="herald-tls-")
    cert, key = _make_cert(d, "a")
    with _tls_herald(d, cert, key, args=["--log-level", "debug"]) as h:
        s13, _ = _raw_stream(h.tls_port, cert)
        s12, _ = _raw_stream(h.tls_port, cert, max_version=ssl.TLSVersion.TLSv1_2)
        assert s13.version() == "TLSv1.3" and s12.version() == "TLSv1.2"
        h.wait_log(r"tls: stream from 127\.0\.0\.1 parked \(sequence \d+\)", timeout=5)
        assert len(re.findall(r"parked \(sequence", h.log())) == 1, h.log()
        big = "".join(chr(ord("a") + i % 26) for i in range(50000))  # four records
        ids = [publish(h.port, data="small"), publish(h.port, data=big), publish(h.port, data="after")]
        for s in (s13, s12):
            got = _read_until(s, b"data: after\n")
            at = [got.find(f"id: {i}\n".encode()) for i in ids]
            assert 0 <= at[0] < at[1] < at[2], at
            assert got.find(b"data: small\n") > at[0] and got.find(f"data: {big}\n".encode()) > at[1]
        # A second parked stream that the client ends with close_notify.
        s3, _ = _raw_stream(h.tls_port, cert)
        wait_until(lambda: len(re.findall(r"parked \(sequence", h.log())) == 2, timeout=5)
        raw = s3.unwrap()  # sends close_notify, waits for herald's answer or its close
        raw.close()
        wait_until(lambda: b'"readers":2,' in request(h.port, "GET", "/api/health")[2], timeout=5)
        h.stop()
        for s in (s13, s12):
            tail = b""
            while True:
                chunk = s.recv(65536)  # ssl.SSLEOFError without a valid close_notify
                if not chunk:
                    break
                tail += chunk
            s.close()


def _s_client_read_until(p, marker, got, timeout=10.0):
    """Read s_client's output (a non-blocking pipe) until marker appears;
    the bytes so far."""
    import select
    deadline = time.monotonic() + timeout
    while marker not in got:
        left = deadline - time.monotonic()
        assert left > 0 and p.poll() is None, \
            f"s_client ({p.poll()}) gave no {marker!r}: {got[-300:]!r}\n{p.stderr.read().decode(errors='replace')}"
        if select.select([p.stdout], [], [], left)[0]:
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                continue
            got += chunk
    return got


def test_stream_to_a_client_with_a_maximum_fragment_length():
    """A TLS 1.3 client that negotiated a maximum fragment length of 512
    bytes (RFC 6066) has its stream parked like any other, and is sent no
    record larger than that: events of 4 KiB and more arrive whole and in
    order, and no alert ends the stream (a larger record is `data length too
    long` to OpenSSL)."""
    d = tempfile.mkdtemp(prefix="herald-tls-")
    cert, key = _make_cert(d, "a")
    with _tls_herald(d, cert, key, args=["--log-level", "debug"]) as h:
        p = subprocess.Popen(["openssl", "s_client", "-connect", f"127.0.0.1:{h.tls_port}", "-tls1_3",
                              "-maxfraglen", "512", "-CAfile", cert, "-quiet"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            p.stdin.write(b"GET /api/events/stream HTTP/1.1\r\nHost: x\r\n\r\n")
            p.stdin.flush()
            os.set_blocking(p.stdout.fileno(), False)
            got = _s_client_read_until(p, b": stream open\n\n", b"")
            assert got.startswith(b"HTTP/1.1 200 "), got
            h.wait_log(r"tls: stream from 127\.0\.0\.1 parked \(sequence \d+\)", timeout=5)
            datas = ["".join(chr(ord("a") + (i + k) % 26) for i in range(n)) for k, n in
                     enumerate((4096, 100, 20000))]
            ids = [publish(h.port, data=x) for x in datas]
            got = _s_client_read_until(p, f"id: {ids[-1]}\n".encode(), got)
            got = _s_client_read_until(p, f"data: {datas[-1]}\n\n".encode(), got)
            at = [got.find(f"id: {i}\nevent: message\ndata: {x}\n\n".encode()) for i, x in zip(ids, datas)]
            assert 0 < at[0] < at[1] < at[2], at
            assert p.poll() is None, p.stderr.read()
        finally:
            p.kill()
            p.wait()
            err = p.stderr.read().decode(errors="replace")
            p.stdin.close()
            p.stdout.close()
            p.stderr.close()
        assert "error" not in err and "alert" not in err, err
