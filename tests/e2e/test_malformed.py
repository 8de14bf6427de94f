# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: a corpus of malformed (and a few edge-valid) requests, each on
its own connection, each answered with its exact status and the one-line
JSON refusal; after each one a health request on another connection still
gets 200, and a reader opened at the start still gets events at the end.
Also slow headers (408), pipelining, and bodies and heads split across
packets."""
import json
import socket
import time

from harness import Herald, HttpConn, Stream, check_refusal, publish, raw_exchange, request, wait_until

ARGS = ["--max-request-line", "256", "--max-header-bytes", "2048", "--max-headers", "10",
        "--max-body", "1000", "--header-timeout", "1"]
H = b"Host: 127.0.0.1\r\n"


def _get(target, version=b"HTTP/1.1", extra=b"", host=H):
    return b"GET " + target + b" " + version + b"\r\n" + host + extra + b"\r\n"


def _post(body, extra=b"", target=b"/api/events"):
    return (b"POST " + target + b" HTTP/1.1\r\n" + H + b"Content-Type: application/json\r\n" +
            b"Content-Length: " + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body)


def _post_head(cl_lines):
    return b"POST /api/events HTTP/1.1\r\n" + H + b"Content-Type: application/json\r\n" + cl_lines + b"\r\n"


def _line_of(n):
    """A GET request line of exactly n bytes (without CRLF) for an unknown path."""
    fixed = len(b"GET / HTTP/1.1")
    return b"GET /" + b"a" * (n - fixed) + b" HTTP/1.1"


CORPUS = [
    # (name, raw bytes, expected status, extra check)
    # --- request line
    ("bad method chars", b"G@T /api/health HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("method with slash", b"GE/T /api/health HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("missing version", b"GET /api/health\r\n" + H + b"\r\n", 400),
    ("HTTP/2.0", _get(b"/api/health", b"HTTP/2.0"), 505),
    ("HTTP/1.2", _get(b"/api/health", b"HTTP/1.2"), 505),
    ("lowercase version", _get(b"/api/health", b"http/1.1"), 400),
    ("extra token in request line", _get(b"/api/health", b"HTTP/1.1 extra"), 400),
    ("two spaces after method", b"GET  /api/health HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("leading space", b" GET /api/health HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("control byte in target", _get(b"/api/\x01health"), 400),
    ("request line over max_request_line", _line_of(300) + b"\r\n" + H + b"\r\n", 414),
    ("request line at max_request_line", _line_of(256) + b"\r\n" + H + b"\r\n", 404),
    # --- headers
    ("one header over max_header_bytes", _get(b"/api/health", extra=b"X-Big: " + b"a" * 2100 + b"\r\n"), 431),
    ("head over max_header_bytes", _get(b"/api/health", extra=b"".join(
        b"X-M%d: " % k + b"m" * 300 + b"\r\n" for k in range(8))), 431),
    ("too many headers", _get(b"/api/health", extra=b"".join(b"X-N%d: v\r\n" % k for k in range(10))), 431),
    ("max_headers exactly", _get(b"/api/health", extra=b"".join(b"X-N%d: v\r\n" % k for k in range(9))), 200),
    ("space before colon", _get(b"/api/health", extra=b"X-A : b\r\n"), 400),
    ("obs-fold", _get(b"/api/health", extra=b"X-A: b\r\n  c\r\n"), 400),
    ("NUL in header value", _get(b"/api/health", extra=b"X-A: b\x00c\r\n"), 400),
    ("header without colon", _get(b"/api/health", extra=b"X-A b\r\n"), 400),
    ("empty header name", _get(b"/api/health", extra=b": b\r\n"), 400),
    ("missing Host on 1.1", _get(b"/api/health", host=b""), 400),
    ("two Host headers", _get(b"/api/health", extra=b"Host: other\r\n"), 400),
    ("HTTP/1.0 without Host is fine", _get(b"/api/health", b"HTTP/1.0", host=b""), 200),
    ("bare LF line ends", b"GET /api/health HTTP/1.1\nHost: 127.0.0.1\n\n", 200),
    # --- Content-Length and framing
    ("Content-Length not a number", _post_head(b"Content-Length: abc\r\n"), 400),
    ("Content-Length negative", _post_head(b"Content-Length: -1\r\n"), 400),
    ("Content-Length with sign", _post_head(b"Content-Length: +5\r\n"), 400),
    ("Content-Length overflowing", _post_head(b"Content-Length: 99999999999999999999999999\r\n"), 400),
    ("Content-Length twice, different", _post_head(b"Content-Length: 5\r\nContent-Length: 6\r\n"), 400),
    ("Content-Length list, different", _post_head(b"Content-Length: 5, 6\r\n"), 400),
    ("Content-Length with Transfer-Encoding",
     _post_head(b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"), 400),
    ("POST without Content-Length", _post_head(b""), 411),
    ("chunked POST", _post_head(b"Transfer-Encoding: chunked\r\n") + b"5\r\nhello\r\n0\r\n\r\n", 411),
    ("body over max_body", _post_head(b"Content-Length: 2000\r\n"), 413),
    ("body exactly max_body", _post(b'{"data":"' + b"p" * 989 + b'"}'), 201),
    ("Content-Length with leading zeros", _post_head(b"Content-Length: 0012\r\n") + b'{"data":"z"}', 201),
    ("Content-Length twice, same value", _post_head(b"Content-Length: 12\r\nContent-Length: 12\r\n") +
     b'{"data":"z"}', None),  # either accepted (201) or refused (400): RFC 9110 allows both
    # --- JSON body
    ("bad JSON", _post(b'{"data":'), 400),
    ("empty body", _post(b""), 400),
    ("JSON array", _post(b'[1,2]'), 400),
    ("JSON string", _post(b'"data"'), 400),
    ("missing data", _post(b'{"type":"x","public":true}'), 400),
    ("type not a string", _post(b'{"data":"x","type":5}'), 400),
    ("public not a bool", _post(b'{"data":"x","public":"yes"}'), 400),
    ("topic not a string", _post(b'{"data":"x","topic":["a"]}'), 400),
    ("unknown key", _post(b'{"data":"x","colour":"red"}'), 400),
    ("bad type chars", _post(b'{"data":"x","type":"a b"}'), 400),
    ("empty type", _post(b'{"data":"x","type":""}'), 400),
    ("type over 64 chars", _post(b'{"data":"x","type":"' + b"t" * 65 + b'"}'), 400),
    ("bad topic chars", _post(b'{"data":"x","topic":"a?b"}'), 400),
    ("topic over 128 chars", _post(b'{"data":"x","topic":"' + b"t" * 129 + b'"}'), 400),
    ("trailing garbage after JSON", _post(b'{"data":"x"} x'), 400),
    ("JSON with whitespace everywhere", _post(b' {\n\t"data" : "x" ,\r\n "public" : false } \n'), 201),
    ("public as a number", _post(b'{"data":"x","public":1}'), 400),
    ("bad escape in JSON", _post(b'{"data":"\\x"}'), 400),
    ("raw control byte in JSON string", _post(b'{"data":"a\x01b"}'), 400),
    # --- routing and query
    ("unknown path", _get(b"/nope"), 404),
    ("query on health", _get(b"/api/health?verbose=1"), 200),
    ("unknown path under /api", _get(b"/api/eventsX"), 404),
    ("GET on the publish path", _get(b"/api/events"), 405, lambda hd: "POST" in hd.get("allow", "")),
    ("POST on the stream path", _post(b"", target=b"/api/events/stream"), 405,
     lambda hd: "GET" in hd.get("allow", "")),
    ("DELETE on health", b"DELETE /api/health HTTP/1.1\r\n" + H + b"\r\n", 405,
     lambda hd: "GET" in hd.get("allow", "")),
    ("bad last_event_id", _get(b"/api/events/stream?last_event_id=abc"), 400),
    ("negative last_event_id", _get(b"/api/events/stream?last_event_id=-5"), 400),
    ("bad topic in query", _get(b"/api/events/stream?topic=bad!"), 400),
    ("space in topic in query", _get(b"/api/events/stream?topic=a%20b"), 400),
]


def test_malformed_corpus():
    assert len([c for c in CORPUS if c[2] is not None and c[2] >= 400]) >= 30
    with Herald(args=ARGS) as h:
        reader = Stream(h.port)
        assert reader.status == 200
        reader.opening()
        failures = []
        for case in CORPUS:
            name, raw, want = case[:3]
            check = case[3] if len(case) > 3 else None
            try:
                st, hd, body = raw_exchange(h.port, raw)
                if want is None:
                    assert st in (201, 400), f"expected 201 or 400, got {st}: {body!r}"
                    if st == 400:
                        check_refusal(st, hd, body, 400)
                elif want >= 400:
                    check_refusal(st, hd, body, want)
                else:
                    assert st == want, f"expected {want}, got {st}: {body!r}"
                if check:
                    assert check(hd), f"headers {hd}"
            except (AssertionError, OSError) as e:
                failures.append(f"{name}: sent {raw[:120]!r}: {e}")
            st, _, body = request(h.port, "GET", "/api/health")
            assert st == 200, f"health after {name!r} got {st}: {body!r}"
        # The reader opened at the start is still served.
        n = publish(h.port, data="still here")
        # (The corpus's one stored event is not public, so this is the first.)
        got = reader.events(1, timeout=5)
        assert got == [{"id": n, "event": "message", "data": "still here"}], got
        reader.close()
        assert not failures, f"{len(failures)} of {len(CORPUS)} cases failed:\n" + "\n".join(failures)


def test_slow_headers_get_408_and_close():
    with Herald(args=ARGS) as h:
        with HttpConn(h.port) as c:
            t0 = time.monotonic()
            c.send(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no blank line
            c.sock.settimeout(4)
            st, hd, body = c.read_response()
            dt = time.monotonic() - t0
            check_refusal(st, hd, body, 408)
            assert 0.5 <= dt <= 3.5, f"408 after {dt:.2f} s with header_timeout 1 s"
            assert c.wait_closed(3), "connection not closed after 408"
        # A head trickled in under the timeout is fine.
        with HttpConn(h.port) as c:
            raw = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            for k in range(0, len(raw), 8):
                c.send(raw[k:k + 8])
                time.sleep(0.01)
            st, _, body = c.read_response()
            assert st == 200, (st, body)
        st, _, _ = request(h.port, "GET", "/api/health")
        assert st == 200


def test_pipelined_requests_answered_in_order():
    with Herald(args=ARGS) as h:
        with HttpConn(h.port) as c:
            reqs = [HttpConn.format("GET", "/api/health"),
                    HttpConn.format("GET", "/metrics"),
                    HttpConn.format("POST", "/api/events", b'{"data":"p1","public":true}'),
                    HttpConn.format("POST", "/api/events", b'{"data":"p2","public":true}'),
                    HttpConn.format("GET", "/api/health"),
                    HttpConn.format("GET", "/nope")]
            c.send(b"".join(reqs))
            got = [c.read_response() for _ in reqs]
            assert [g[0] for g in got] == [200, 200, 201, 201, 200, 404], [(g[0], g[2][:60]) for g in got]
            assert json.loads(got[0][2])["status"] == "ok"
            assert got[1][1].get("content-type", "").startswith("text/plain")
            i1, i2 = json.loads(got[2][2])["id"], json.loads(got[3][2])["id"]
            assert i2 == i1 + 1, (i1, i2)
            check_refusal(*got[5], 404)


def test_body_split_across_packets():
    with Herald(args=ARGS) as h:
        s = Stream(h.port)
        s.opening()
        body = b'{"type":"split","data":"in three pieces","public":true}'
        with HttpConn(h.port) as c:
            c.send(b"POST /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
            # Separate segments (TCP_NODELAY is on); the pauses make the
            # server see each piece in its own read.
            for piece in (body[:10], body[10:30], body[30:]):
                time.sleep(0.05)
                c.send(piece)
            st, _, resp = c.read_response()
            assert st == 201, (st, resp)
            i = json.loads(resp)["id"]
            # The connection stays usable for the next request.
            st, _, resp = c.request("GET", "/api/health")
            assert st == 200, (st, resp)
        assert s.events(1, timeout=5) == [{"id": i, "event": "split", "data": "in three pieces"}]
        s.close()


def test_idle_keepalive_connection_closed_after_keepalive_timeout():
    with Herald(args=ARGS + ["--keepalive-timeout", "1s"]) as h:
        with HttpConn(h.port) as c:
            st, _, _ = c.request("GET", "/api/health")
            assert st == 200
            t0 = time.monotonic()
            # Still usable shortly after.
            time.sleep(0.2)
            st, _, _ = c.request("GET", "/api/health")
            assert st == 200
            t0 = time.monotonic()
            assert c.wait_closed(4), "idle keep-alive connection not closed within 4 s (keepalive_timeout 1s)"
            dt = time.monotonic() - t0
            assert dt >= 0.7, f"idle keep-alive connection closed after {dt:.2f} s (keepalive_timeout 1s)"
            assert c.buf == b"", f"unexpected bytes on an idle close: {c.buf!r}"


def test_publish_with_lowercase_bearer_scheme():
    # The auth scheme is case-insensitive (RFC 9110 11.1).
    with Herald(args=ARGS + ["--publish-token", "tok"]) as h:
        st, _, body = request(h.port, "POST", "/api/events", b'{"data":"x"}', headers={"Authorization": "bearer tok"})
        assert st == 201, (st, body)


def test_trickled_head_gets_408_at_header_timeout():
    # header_timeout bounds the whole head, not the gap between bytes: a
    # client sending a byte every 0.2 s (slowloris) is cut off after ~1 s.
    with Herald(args=ARGS) as h:
        with HttpConn(h.port) as c:
            raw = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"s" * 100 + b"\r\n\r\n"
            t0 = time.monotonic()
            answered = None
            for k in range(len(raw)):
                try:
                    c.send(raw[k:k + 1])
                except OSError:
                    break
                c.sock.settimeout(0.2)
                try:
                    if not c._fill():
                        break
                except socket.timeout:
                    continue
                except ConnectionResetError:
                    break
                if b"\r\n\r\n" in c.buf:
                    answered = time.monotonic() - t0
                    break
                if time.monotonic() - t0 > 6:
                    break
            assert answered is not None, f"no answer within {time.monotonic() - t0:.1f} s of trickling; got {c.buf!r}"
            c.sock.settimeout(3)
            st, hd, body = c.read_response()
            check_refusal(st, hd, body, 408)
            assert answered <= 3.0, f"408 after {answered:.2f} s with header_timeout 1 s"
        st, _, _ = request(h.port, "GET", "/api/health")
        assert st == 200


def test_refusal_log_lines_name_the_request():
    # Every refusal's log line names the method and path once the request
    # line was read: refusals decided from the head before routing (413,
    # 411), heads too large or with too many headers after a whole request
    # line (431), a version not served (505), a head cut off by
    # header_timeout (408). On a keep-alive connection a refusal never names
    # the request before it; bytes that never made a request line say so.
    import re
    with Herald(args=ARGS) as h:
        cases = [
            (_post_head(b"Content-Length: 2000\r\n"), 413, "POST /api/events"),
            (b"POST /api/chunked HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n", 411, "POST /api/chunked"),
            (_get(b"/api/big-header", extra=b"X-Big: " + b"a" * 2100 + b"\r\n"), 431, "GET /api/big-header"),
            (_get(b"/api/many?x=1", extra=b"".join(b"X-N%d: v\r\n" % k for k in range(10))), 431, "GET /api/many"),
            (_get(b"/api/v12", b"HTTP/1.2"), 505, "GET /api/v12"),
            (b"G@T /api/bad HTTP/1.1\r\n" + H + b"\r\n", 400, "(no request line)"),
        ]
        for raw, status, what in cases:
            st, hd, body = raw_exchange(h.port, raw)
            check_refusal(st, hd, body, status)
            h.wait_log(r"refused 127\.0\.0\.1 " + re.escape(what) + r": %d " % status, timeout=5)
        # Keep-alive: the second request's own line, or none, not the first's.
        with HttpConn(h.port) as c:
            assert c.request("GET", "/api/health")[0] == 200
            c.send(_get(b"/api/second", extra=b"X-Big: " + b"a" * 2100 + b"\r\n"))
            check_refusal(*c.read_response(), 431)
        h.wait_log(r"refused 127\.0\.0\.1 GET /api/second: 431 ", timeout=5)
        with HttpConn(h.port) as c:
            assert c.request("GET", "/api/health")[0] == 200
            c.send(b"G@T /api/bad HTTP/1.1\r\n" + H + b"\r\n")
            check_refusal(*c.read_response(), 400)
        wait_until(lambda: len(re.findall(r"refused 127\.0\.0\.1 \(no request line\): 400 ", h.log())) == 2,
                   timeout=5, what="the second refusal without a request line logged as such")
        # A head that stops after its request line: 408 names it.
        with HttpConn(h.port) as c:
            c.send(b"GET /api/slow HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            c.sock.settimeout(4)
            check_refusal(*c.read_response(), 408)
        h.wait_log(r"refused 127\.0\.0\.1 GET /api/slow: 408 ", timeout=5)
        assert not re.search(r"refused 127\.0\.0\.1 GET /api/health", h.log()), h.log()[-3000:]


def test_request_in_the_socket_is_read_before_408():
    # A request that arrived within header_timeout is served even when its
    # wake-up waits in epoll's ready list behind more than a pass takes (128)
    # as the timer comes due. 300 connections are accepted (their first read
    # finds nothing, their timers start), herald is stopped, every request is
    # sent, and header_timeout passes while herald cannot run (the one sleep:
    # there is no state to wait for in a stopped process). On resuming, the
    # first pass takes 128 wake-ups and then the due timers, which used to
    # answer the other 172 with 408 without looking at their sockets.
    import os
    import signal
    from harness import connect
    n = 300
    with Herald(args=["--header-timeout", "300ms", "--per-address-limit", "0"]) as h:
        socks = [connect(h.port) for _ in range(n)]
        try:
            def accepted():
                st, _, body = request(h.port, "GET", "/api/health")
                return st == 200 and json.loads(body)["connections"] >= n + 1
            wait_until(accepted, timeout=10, what="every connection accepted")
            os.kill(h.pid, signal.SIGSTOP)
            try:
                for s in socks:
                    s.sendall(b"GET /api/events/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                time.sleep(0.6)
            finally:
                os.kill(h.pid, signal.SIGCONT)
            statuses = {}
            for s in socks:
                s.settimeout(10)
                buf = b""
                while b"\r\n" not in buf:
                    d = s.recv(4096)
                    if not d:
                        break
                    buf += d
                st = int(buf.split(b" ")[1]) if buf.startswith(b"HTTP/1.1 ") else 0
                statuses[st] = statuses.get(st, 0) + 1
            assert statuses == {200: n}, statuses
        finally:
            for s in socks:
                s.close()
