# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: the router's table. Every route answers each method it does
not take with 405 and an Allow header naming exactly the route's methods
(so this test fails when a route's methods change without it); a CORS
preflight names the same methods; a path no route matches is 404, and so
is a route its setting turns off. Answers on the Mercure hub's paths carry
its Link, 404 and 405 included; others do not."""
from harness import Herald, check_refusal, request

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
