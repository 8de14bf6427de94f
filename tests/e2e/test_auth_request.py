# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: the application's say on stream opens (auth_request).

The application is a small HTTP server on loopback run by the test (a thread
of Python's http.server). It authorizes by the `session` cookie, counts the
requests it gets and keeps what they carried, and by session can refuse (401,
403), fail (500), answer something that is not JSON, narrow the topics, name
a subject, or hold its answer until the test lets it go; it sends
Cache-Control max-age when told. Real herald processes check that an allowed
open streams events and the request carried the reader's Cookie and
Authorization and the topics asked; that 401 and 403 reach the reader as
herald's own refusals, and a 500 or a body that is not JSON a 503 with
Retry-After; that a narrowing delivers only the narrowed topic and one past
the topics asked is a 502; that the subject reaches presence; that a slow
application is a 503 within auth_timeout while another reader's events keep
flowing, and a down one a 503; that answers with max-age are cached (one
request for many opens) and opens asked together before the first answer
share one request; that a reader closing while it waits cancels its request
and leaves nothing waiting; that past auth_max_waiting an open is a 503 at
once; and that the counters in /metrics follow.
"""
import http.server
import json
import re
import socket
import threading
import time

from harness import Herald, Stream, check_refusal, connect, publish, request, wait_until

PT = "auth-request-publish-token-0123456789"


class App:
    """The application's authorization endpoint on 127.0.0.1, in a thread."""

    def __init__(self):
        self.max_age = None  # Cache-Control max-age sent, when set
        self.hold = threading.Event()  # what a "slow" session's answer waits for
        self.seen = []  # (cookie, authorization, body) per request
        self.lock = threading.Lock()
        app = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(n))
                cookie = self.headers.get("Cookie") or ""
                with app.lock:
                    app.seen.append((cookie, self.headers.get("Authorization"), body))
                m = re.search(r"session=([\w.-]+)", cookie)
                session = m.group(1) if m else ""
                status, answer = 200, {}
                if session.startswith("slow"):
                    app.hold.wait(30)
                if session == "" or session == "deny401":
                    status = 401
                elif session == "deny403":
                    status = 403
                elif session == "fail":
                    status = 500
                elif session == "notjson":
                    answer = b"<html>"
                elif session == "narrow":
                    answer = {"topics": ["room/1"]}
                elif session == "wide":
                    answer = {"topics": ["other"]}
                elif session.startswith("subj-"):
                    answer = {"subject": session[5:]}
                raw = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    if app.max_age is not None:
                        self.send_header("Cache-Control", f"private, max-age={app.max_age}")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except OSError:
                    pass  # herald cancelled the request

            def log_message(self, *args):
                pass

        http.server.ThreadingHTTPServer.allow_reuse_address = True
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/herald/auth"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def count(self, session=None):
        with self.lock:
            return sum(1 for c, _, _ in self.seen if session is None or f"session={session}" in c)

    def stop(self):
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()


def herald_for(url, extra=""):
    return Herald(config=f"auth_request = {url}\nauth_timeout = 300ms\npublish_token = {PT}\n"
                         f"per_address_limit = 0\n{extra}")


def open_stream(h, session=None, query="topic=room/1", headers=None):
    hd = dict(headers or {})
    if session is not None:
        hd["Cookie"] = f"theme=dark; session={session}"
    return Stream(h.port, query=query, headers=hd)


def refused(s, status):
    body = s.read_body()
    check_refusal(s.status, s.headers, body, status)
    s.close()
    return json.loads(body)["error"]


def metric(h, name):
    st, _, body = request(h.port, "GET", "/metrics")
    m = re.search(rf"^{re.escape(name)} (\S+)$", body.decode(), re.M)
    assert m, f"{name} missing from /metrics"
    return float(m.group(1))


def send_open(h, session, query="topic=room/1"):
    """A stream request sent and not yet read: its socket."""
    s = connect(h.port)
    s.sendall(f"GET /api/events/stream?{query} HTTP/1.1\r\nHost: x\r\nCookie: session={session}\r\n\r\n".encode())
    return s


def status_of(sock, timeout=5.0):
    sock.settimeout(timeout)
    buf = b""
    while b"\r\n" not in buf:
        d = sock.recv(4096)
        if not d:
            raise AssertionError(f"closed before a status line: {buf!r}")
        buf += d
    return int(buf.split(b" ")[1])


def test_auth_request_allows_refuses_narrows_and_names():
    app = App()
    try:
        with herald_for(app.url) as h:
            # Allowed: the stream opens and reads; the request carried the
            # reader's cookie and Authorization, the topics and the resume point.
            s = open_stream(h, "alice", query="topic=room/1,news&last_event_id=0",
                            headers={"Authorization": "Bearer opaque-token"})
            assert s.status == 200, (s.status, s.read_body(), h.log()[-1500:])
            s.opening()
            eid = publish(h.port, topic="room/1", data="hi", token=PT)
            ev = s.events(1)
            assert ev and ev[0]["id"] == eid and ev[0]["data"] == "hi", ev
            s.close()
            cookie, authz, body = app.seen[-1]
            assert cookie == "theme=dark; session=alice" and authz == "Bearer opaque-token", app.seen[-1]
            assert body == {"topics": ["room/1", "news"], "last_event_id": 0}, body
            # Without topics, every topic is asked for: "*".
            open_stream(h, "alice", query="").close()
            wait_until(lambda: app.seen[-1][2] == {"topics": ["*"], "last_event_id": None}, what="a '*' question")
            # Refusals pass on as herald's own, each with a log line.
            assert "auth_request answered 401" in refused(open_stream(h, "deny401"), 401)
            assert "auth_request answered 403" in refused(open_stream(h, "deny403"), 403)
            assert "auth_request answered 401" in refused(open_stream(h), 401)
            h.wait_log(r"refus.*403.*auth_request answered 403|403.*auth_request answered 403")
            # A failing application, or an answer that is not JSON: 503, Retry-After.
            for session, why in (("fail", "answered HTTP 500"), ("notjson", "not a JSON object")):
                s = open_stream(h, session)
                assert s.headers.get("retry-after"), s.headers
                assert why in refused(s, 503)
            # Narrowed: asked room/*, allowed room/1 only.
            s = open_stream(h, "narrow", query="topic=room/*")
            assert s.status == 200
            s.opening()
            publish(h.port, topic="room/2", data="not yours", token=PT)
            e1 = publish(h.port, topic="room/1", data="yours", token=PT)
            ev = s.events(1)
            assert [(e["id"], e["data"]) for e in ev] == [(e1, "yours")], ev
            s.close()
            # A topic past those asked is the application's error: 502.
            assert "did not ask for" in refused(open_stream(h, "wide"), 502)
            h.wait_log(r"auth_request: question [0-9a-f]{16}: the application's topics names a topic")
            # The subject is presence's.
            s = open_stream(h, "subj-carol")
            assert s.status == 200
            st, _, body = request(h.port, "GET", "/api/presence?topic=room/1")
            assert json.loads(body)["topics"]["room/1"]["subjects"] == ["carol"], body
            s.close()
            # No max-age: nothing is kept, each open asks.
            n = app.count("alice")
            open_stream(h, "alice").close()
            open_stream(h, "alice").close()
            assert app.count("alice") == n + 2
            assert metric(h, "herald_auth_refused_total") == 3
            assert metric(h, "herald_auth_failures_total") == 3
            assert metric(h, "herald_auth_cache_hits_total") == 0
            assert "opaque-token" not in h.log() and "alice" not in h.log()
            h.stop()
    finally:
        app.stop()


def test_auth_request_slow_and_down_are_503_and_the_loop_flows():
    app = App()
    try:
        with herald_for(app.url) as h:
            app.max_age = 60
            reader = open_stream(h, "alice")
            assert reader.status == 200
            reader.opening()
            t0 = time.monotonic()
            slow = send_open(h, "slow1")
            # While the application holds its answer, the other reader's
            # events flow.
            eid = publish(h.port, topic="room/1", data="during", token=PT)
            ev = reader.events(1)
            assert ev and ev[0]["id"] == eid, ev
            st = status_of(slow)
            took = time.monotonic() - t0
            assert st == 503 and 0.25 <= took < 1.5, (st, took)
            slow.close()
            h.wait_log(r"did not answer within auth_timeout")
            reader.close()
            h.stop()
        # Down: nothing listens at the URL.
        with socket.socket() as spare:
            spare.bind(("127.0.0.1", 0))
            port = spare.getsockname()[1]
        with herald_for(f"http://127.0.0.1:{port}/auth") as h:
            s = open_stream(h, "alice")
            assert "refused the connection" in refused(s, 503)
            h.stop()
    finally:
        app.stop()


def test_auth_request_cache_and_one_request_for_opens_together():
    app = App()
    try:
        with herald_for(app.url, "auth_timeout = 5s\n") as h:
            app.max_age = 60
            for _ in range(10):
                s = open_stream(h, "alice")
                assert s.status == 200
                s.close()
            assert app.count("alice") == 1
            assert metric(h, "herald_auth_cache_hits_total") == 9
            # Refusals with max-age are kept too.
            for _ in range(3):
                refused(open_stream(h, "deny403"), 403)
            assert app.count("deny403") == 1
            # 300 opens of one session before its answer: one request (and
            # the answer told over more than one pass of the loop).
            socks = [send_open(h, "slow-together") for _ in range(300)]
            wait_until(lambda: metric(h, "herald_auth_waiting") == 300, what="300 opens waiting")
            wait_until(lambda: app.count("slow-together") == 1, what="the request at the application")
            assert metric(h, "herald_auth_joined_total") == 299
            app.hold.set()
            assert [status_of(s) for s in socks] == [200] * 300
            for s in socks:
                s.close()
            assert app.count("slow-together") == 1
            assert metric(h, "herald_auth_requests_total") == 3
            assert metric(h, "herald_auth_allowed_total") == 310
            h.stop()
    finally:
        app.stop()


def test_auth_request_reader_gone_while_waiting_and_the_cap():
    app = App()
    try:
        with herald_for(app.url, "auth_timeout = 10s\nauth_max_waiting = 3\n") as h:
            socks = [send_open(h, f"slow-{i}") for i in range(3)]
            wait_until(lambda: app.count() == 3, what="3 requests at the application")
            # A fourth waits nowhere: 503 at once.
            t0 = time.monotonic()
            assert "auth_max_waiting" in refused(open_stream(h, "slow-4"), 503)
            assert time.monotonic() - t0 < 1.0
            for s in socks:
                s.close()
            # Their requests are cancelled, nothing waits.
            wait_until(lambda: metric(h, "herald_auth_waiting") == 0, what="the waiting opens gone")
            assert metric(h, "herald_readers") == 0
            st, _, _ = request(h.port, "GET", "/api/health")
            assert st == 200
            h.stop()  # an ASan build reports any leak here
    finally:
        app.stop()


def test_auth_request_config_refuses_clear_text_to_another_host():
    h = Herald(config="auth_request = http://example.com/auth\n", wait=False)
    assert h.proc.wait(10) != 0
    assert re.search(r"auth_request.*http://example.com/auth", h.log()), h.log()


def test_auth_request_over_http2_and_tls():
    from test_http2 import CurlStream, _curl, _tls_herald
    app = App()
    conf = f"auth_request = {app.url}\nauth_timeout = 5s\npublish_token = {PT}\n"
    try:
        with _tls_herald(config=conf) as h:
            tls = f"https://127.0.0.1:{h.tls_port}"
            for base, opts in ((h.url, ["--http2-prior-knowledge"]), (tls, ["--http2", "-k"]),
                               (tls, ["--http1.1", "-k"])):
                s = CurlStream(base + "/api/events/stream?topic=room/1", *opts, "-b", "session=alice")
                try:
                    wait_until(lambda: "retry:" in s.text(), what=f"opening frame {opts}")
                    eid = publish(h.port, topic="room/1", data="x", token=PT)
                    s.wait_ids([eid])
                finally:
                    s.close()
                code, out, err = _curl(*opts, "-i", "-b", "session=deny403", base + "/api/events/stream")
                assert code == 0 and re.match(r"HTTP/[12.]+ 403", out), (opts, out, err)
                assert "auth_request answered 403" in out
            assert app.count("alice") == 3
            # An HTTP/2 stream reset while its open waits: its request goes.
            s = CurlStream(tls + "/api/events/stream", "--http2", "-k", "-b", "session=slow-h2")
            wait_until(lambda: metric(h, "herald_auth_waiting") == 1, what="the h2 open waiting")
            s.close()
            wait_until(lambda: metric(h, "herald_auth_waiting") == 0, what="the h2 open gone")
            h.stop()
    finally:
        app.stop()


def test_auth_request_gives_back_a_namespace_place():
    # A namespace capping one topic at one reader: opens the application
    # refuses, and one whose reader leaves while it waits, hold no place
    # afterwards; the allowed one then takes it.
    app = App()
    try:
        with herald_for(app.url, "auth_timeout = 10s\n[namespace \"room/*\"]\nmax_readers = 1\n") as h:
            for _ in range(3):
                refused(open_stream(h, "deny403"), 403)
            w = send_open(h, "slow-ns")
            wait_until(lambda: metric(h, "herald_auth_waiting") == 1, what="an open waiting")
            w.close()
            wait_until(lambda: metric(h, "herald_auth_waiting") == 0, what="the waiting open gone")
            s = open_stream(h, "alice")
            assert s.status == 200, (s.status, s.read_body())
            t = open_stream(h, "alice")
            assert t.status == 503, t.status  # the cap holds for allowed opens
            t.close()
            s.close()
            h.stop()
    finally:
        app.stop()


def test_auth_request_per_namespace():
    # Only the namespace that names a hook asks the application; a stream
    # reaching namespaces whose hooks differ (one and none) is refused
    # rather than half asked; a section's empty auth_request turns the
    # defaults' hook off there.
    app, other = App(), App()
    try:
        conf = (f"publish_token = {PT}\nper_address_limit = 0\n"
                f"[namespace \"app/*\"]\nauth_request = {app.url}\n"
                f"[namespace \"other/*\"]\nauth_request = {other.url}\n")
        with Herald(config=conf) as h:
            s = open_stream(h, "alice", query="topic=app/1")
            assert s.status == 200, (s.status, s.read_body())
            s.close()
            assert app.count("alice") == 1 and other.count() == 0
            refused(open_stream(h, "deny403", query="topic=app/1"), 403)
            s = open_stream(h, "alice", query="topic=other/x")
            assert s.status == 200 and other.count("alice") == 1
            s.close()
            s = open_stream(h, None, query="topic=news")
            assert s.status == 200, s.status  # the defaults have no hook
            s.close()
            before = app.count() + other.count()
            for q in ("topic=app/1,news", "topic=app/1,other/x", "", "topic=*"):
                assert refused(open_stream(h, "alice", query=q), 400), q
            assert app.count() + other.count() == before
            assert "auth_request hooks" in h.log()
        conf = (f"auth_request = {app.url}\npublish_token = {PT}\n"
                f"[namespace \"open/*\"]\nauth_request =\n")
        with Herald(config=conf) as h:
            n = app.count()
            s = open_stream(h, None, query="topic=open/1")
            assert s.status == 200, s.status
            s.close()
            refused(open_stream(h, None, query="topic=news"), 401)
            assert app.count() == n + 1
            st, _, body = request(h.port, "GET", "/api/health")
            ns = json.loads(body)["namespaces"]
            assert ns == [dict(ns[0], pattern="open/*", auth_request=False)], ns
    finally:
        app.stop()
        other.stop()


test_auth_request_per_namespace.timeout = 60
