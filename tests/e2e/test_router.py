# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: the router's table. Every route answers each method it does
not take with 405 and an Allow header naming exactly the route's methods
(so this test fails when a route's methods change without it); a CORS
preflight names the same methods; a path no route matches is 404, and so
is a route its setting turns off. Answers on the Mercure hub's paths carry
its Link, 404 and 405 included; others do not."""
from harness import Herald, check_refusal, connect, request

# Every route, with a path it matches and its Allow header.
ROUTES = [
    ("/api/events/stream", "GET, OPTIONS"),
    ("/api/events", "POST, OPTIONS"),
    ("/.well-known/mercure", "GET, POST, OPTIONS"),
    ("/.well-known/mercure/subscriptions", "GET"),
    ("/.well-known/mercure/subscriptions/news", "GET"),
    ("/.well-known/oauth-protected-resource/.well-known/mercure", "GET"),
    ("/api/presence", "GET"),
    ("/api/health", "GET, HEAD"),
    ("/", "GET, HEAD"),
    ("/metrics", "GET"),
]
METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]

# Paths next to the routes' that no route matches.
UNKNOWN = ["/nope", "/api", "/api/", "/api/events/", "/api/event", "/api/events/stream/x", "/api/health/",
           "/metrics/", "/index.html", "/.well-known/mercure/", "/.well-known/mercure/elsewhere",
           "/.well-known/mercure/subscriptionsx", "/.well-known/oauth-protected-resource/",
           "/.well-known/oauth-protected-resource/elsewhere"]

ORIGIN = "https://app.example"


def _ask(port, method, path, headers=None):
    h = {"Content-Length": "0"} if method in ("POST", "PUT", "PATCH") else {}
    h.update(headers or {})
    return request(port, method, path, headers=h)


def _mercure_path(path):
    return path.startswith("/.well-known/mercure") or path.startswith("/.well-known/oauth-protected-resource/")


def _refused(method, st, hd, body, want):
    # A refusal's body is the router's concern only as far as its status:
    # what a HEAD answer holds is conn.c's.
    if method == "HEAD":
        assert st == want, (method, st, hd)
    else:
        check_refusal(st, hd, body, want)


def test_every_route_refuses_the_methods_it_does_not_take_naming_its_own():
    with Herald(["--mercure", "on", "--presence", "on", "--console", "on", "--allow-origin", ORIGIN]) as h:
        for path, allow in ROUTES:
            allowed = set(allow.split(", "))
            for method in METHODS:
                if method in allowed:
                    continue
                st, hd, body = _ask(h.port, method, path)
                _refused(method, st, hd, body, 405)
                assert hd.get("allow") == allow, (method, path, hd)
                assert ("link" in hd) == _mercure_path(path), (method, path, hd)
            # A preflight allows the route's methods (HEAD aside), no more.
            if "OPTIONS" in allowed:
                st, hd, _ = _ask(h.port, "OPTIONS", path, {"Origin": ORIGIN,
                                                            "Access-Control-Request-Method": "GET"})
                assert st == 204, (path, st, hd)
                want = ", ".join(m for m in allow.split(", ") if m not in ("HEAD", "OPTIONS"))
                assert hd.get("access-control-allow-methods") == want, (path, hd)
                assert ("link" in hd) == _mercure_path(path), (path, hd)
        for path in UNKNOWN:
            for method in ("GET", "POST", "OPTIONS"):
                st, hd, body = _ask(h.port, method, path)
                check_refusal(st, hd, body, 404)
                assert "allow" not in hd, (method, path, hd)
                if path.startswith("/.well-known/mercure"):
                    assert "link" in hd, (method, path, hd)
                elif not _mercure_path(path):
                    assert "link" not in hd, (method, path, hd)
        # The allowed methods reach their handlers (not 404 or 405).
        for method, path in (("GET", "/api/health"), ("HEAD", "/api/health"), ("GET", "/"), ("HEAD", "/"),
                             ("GET", "/metrics"), ("GET", "/api/presence?topic=news"),
                             ("GET", "/.well-known/oauth-protected-resource/.well-known/mercure")):
            st, hd, _ = _ask(h.port, method, path)
            assert st == 200, (method, path, st, hd)


def test_a_route_its_setting_turns_off_is_404():
    with Herald(["--mercure", "off", "--presence", "off", "--console", "off"]) as h:
        for path in ("/.well-known/mercure", "/.well-known/mercure/subscriptions",
                     "/.well-known/oauth-protected-resource/.well-known/mercure", "/api/presence", "/"):
            for method in ("GET", "POST", "HEAD", "OPTIONS"):
                st, hd, body = _ask(h.port, method, path)
                _refused(method, st, hd, body, 404)
                assert "allow" not in hd and "link" not in hd, (method, path, hd)
        # The others are still there.
        st, hd, body = _ask(h.port, "DELETE", "/api/health")
        check_refusal(st, hd, body, 405)
        assert hd.get("allow") == "GET, HEAD", hd


def _head_and_rest(port, method, path):
    """Send one request and read until the server closes: (status, headers,
    the bytes after the head)."""
    s = connect(port)
    try:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        buf = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            buf += d
    finally:
        s.close()
    head, sep, rest = buf.partition(b"\r\n\r\n")
    assert sep, buf
    lines = head.decode().split("\r\n")
    hdrs = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return int(lines[0].split(" ")[1]), hdrs, rest


def test_a_refusal_to_head_has_the_head_of_get_and_no_body():
    # RFC 9110 9.3.2: a HEAD answer is GET's head with no body, refusals
    # included. The refusal closes the connection, so every byte after the
    # head up to the close would be body.
    with Herald(["--mercure", "on"]) as h:
        for path, want in (("/nope", 404), ("/metrics/", 404), ("/.well-known/mercure/elsewhere", 404),
                           ("/api/events", 405), ("/metrics", 405), ("/.well-known/mercure", 405)):
            st, hd, rest = _head_and_rest(h.port, "HEAD", path)
            assert st == want, (path, st, hd)
            assert rest == b"", (path, rest)
            gst, ghd, gbody = _head_and_rest(h.port, "GET" if want == 404 else "PUT", path)
            assert gst == want and gbody, (path, gst)
            assert hd.get("content-length") == ghd.get("content-length") == str(len(gbody)), (path, hd, ghd)
            assert hd.get("content-type") == ghd.get("content-type"), (path, hd, ghd)
            assert hd.get("allow") == ghd.get("allow") and hd.get("link") == ghd.get("link"), (path, hd, ghd)
        # A HEAD the server takes still answers keep-alive with the head
        # alone, and the next request on the connection is read as one.
        s = connect(h.port)
        try:
            s.sendall(b"HEAD /api/health HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
            buf = b""
            while buf.count(b"\r\n\r\n") < 2 or not buf.endswith(b"}\n"):
                d = s.recv(65536)
                if not d:
                    break
                buf += d
        finally:
            s.close()
        first, _, rest = buf.partition(b"\r\n\r\n")
        assert first.startswith(b"HTTP/1.1 200 "), buf
        assert rest.startswith(b"HTTP/1.1 404 "), buf
