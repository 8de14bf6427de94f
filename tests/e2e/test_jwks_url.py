# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: a JWK Set fetched from an identity provider (jwt_jwks_url).

The provider is a small HTTP server on loopback run by the test (a thread
of Python's http.server) that serves a set with a Cache-Control header,
counts the requests it gets, and can be told to answer slowly, answer
something that is not a set, answer a set over herald's cap, or be down.
Real herald processes check that tokens signed by the served keys are
accepted; that a token naming a key the provider added since is refused,
starts one fetch (at most one a minute: a second unknown kid starts none)
and is accepted once the new set is in, while streams stay open across
the swap; that the next fetch is due at the set's Cache-Control max-age,
clamped to a minute and a day (an hour without one); that a provider
down, a bad or oversized document keep the keys in force with one error
line per run of failures; that a slow provider never stalls the loop
(health answers while the fetch is out) and a stop with a fetch out is
clean; that start-up goes on without keys when the provider is down and
takes them when it comes back; that a reload switches between the URL
and a file; that each worker of a group fetches; that an https provider
is verified (refused under the system's CAs, taken under
outbound_ca_file); and that the configuration refuses a clear-text URL
to another host, jwt_jwks_url beside jwt_jwks_file or jwt_algorithm, and
a CA file that cannot be read.
"""
import http.server
import json
import os
import signal
import ssl
import tempfile
import threading
import time

from harness import Herald, publish, request, wait_until
from test_jwks import oct_jwk, tok
from test_jwt import expect_refused, open_stream, until_id
from test_tls import _make_cert

PT = "static-publish-token-0123456789"
S1 = b"first-provider-secret-0123456789abcdef"
S2 = b"second-provider-secret-0123456789abcdef"
S3 = b"third-provider-secret-0123456789abcdefgh"


class Provider:
    """An identity provider's key endpoint on 127.0.0.1, in a thread."""

    def __init__(self, keys, cache_control="public, max-age=300", port=0, tls=None):
        self.keys = keys
        self.cache_control = cache_control
        self.body = None  # bytes served instead of the set, when set
        self.status = 200
        self.hold = None  # a threading.Event the answer waits for, when set
        self.requests = 0
        self.lock = threading.Lock()
        provider = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                with provider.lock:
                    provider.requests += 1
                    hold = provider.hold
                if hold is not None:
                    hold.wait(30)
                body = provider.body if provider.body is not None else json.dumps({"keys": provider.keys}).encode()
                try:
                    self.send_response(provider.status)
                    self.send_header("Content-Type", "application/jwk-set+json")
                    self.send_header("Cache-Control", provider.cache_control)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # herald gave up on a held answer, as the slow-provider test means it to

            def log_message(self, *args):
                pass

        http.server.ThreadingHTTPServer.allow_reuse_address = True
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}/.well-known/jwks.json"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def count(self):
        with self.lock:
            return self.requests

    def stop(self):
        if self.hold is not None:
            self.hold.set()
        self.server.shutdown()
        self.server.server_close()


def herald_on(provider, extra=""):
    return Herald(config=f"jwt_jwks_url = {provider.url}\npublish_token = {PT}\n{extra}")


def accepted(h, token):
    s = open_stream(h, token, query="topic=t/1")
    ok = s.status == 200
    s.close()
    return ok


def stream_ok(h, token):
    s = open_stream(h, token, query="topic=t/1")
    assert s.status == 200, f"stream refused: {s.status} {s.read_body()!r}\n{h.log()[-2000:]}"
    return s


def test_jwks_url_keys_rotation_by_unknown_kid():
    p = Provider([oct_jwk(S1, kid="k1")])
    try:
        with herald_on(p) as h:
            h.wait_log(r"jwt: 1 keys from jwt_jwks_url in force")
            assert p.count() == 1
            assert "serves 1 shared secret (oct keys)" in h.log()
            s = stream_ok(h, tok("HS256", S1, "k1", subscribe=["t/*"]))
            # The provider rotates: k2 added. A token of k2 is refused at
            # first and starts one fetch; once the set is in, it is taken.
            p.keys = [oct_jwk(S1, kid="k1"), oct_jwk(S2, kid="k2")]
            new = tok("HS256", S2, "k2", subscribe=["t/*"])
            expect_refused(open_stream(h, new, query="topic=t/1"), 401, "unknown key id.*jwt_jwks_url",
                           "a kid the set had not yet")
            h.wait_log(r"jwt: 2 keys from jwt_jwks_url in force")
            assert accepted(h, new)
            assert p.count() == 2, p.count()
            # Another unknown kid within the minute: refused, no fetch.
            since = h.log_size()
            expect_refused(open_stream(h, tok("HS256", S3, "k3"), query="topic=t/1"), 401, "unknown key id",
                           "a kid still unknown")
            h.wait_log(r'refused a token whose kid "k3" is not in jwt_jwks_url', since=since)
            assert "fetching the set again" not in h.log()[since:], h.log()[since:]
            assert h.log().count("fetching the set again") == 1
            # The stream opened before the swap is still served.
            eid = publish(h.port, type="t", topic="t/1", data="after the swap", public=True, token=PT)
            assert [e["data"] for e in until_id(s, eid, what="stream across the swap")][-1] == "after the swap"
            s.close()
            # A set served again unchanged is no swap (SIGHUP fetches it).
            since = h.log_size()
            h.signal(signal.SIGHUP)
            wait_until(lambda: p.count() == 3, timeout=10, what="the fetch after SIGHUP")
            h.wait_log(r"configuration reloaded", since=since)
            assert accepted(h, new)
    finally:
        p.stop()


def test_jwks_url_refresh_follows_cache_control():
    p = Provider([oct_jwk(S1, kid="k1")], cache_control="max-age=5")
    try:
        with herald_on(p, "log_level = debug\n") as h:
            # Below a minute: a minute.
            h.wait_log(r"a set of 1 key arrived; next fetch in 60 s")
            for cc, due in (("public, max-age=120", 120), ("max-age=999999", 86400), ("no-store", 3600),
                            ("max-age=0", 60)):
                p.cache_control = cc
                since = h.log_size()
                h.signal(signal.SIGHUP)
                h.wait_log(rf"the set is unchanged; next fetch in {due} s", since=since)
    finally:
        p.stop()


def test_jwks_url_failures_keep_the_keys():
    p = Provider([oct_jwk(S1, kid="k1")])
    token = tok("HS256", S1, "k1", subscribe=["t/*"])
    try:
        with herald_on(p, "log_level = debug\n") as h:
            h.wait_log(r"jwt: 1 keys from jwt_jwks_url in force")
            port = p.port
            for what, setup, cause in (
                    ("a document that is not JSON", lambda: setattr(p, "body", b"<html>oops</html>"),
                     r"not a JWK Set herald takes"),
                    ("a set refused by the key rules",
                     lambda: setattr(p, "body", b'{"keys": [{"kid": "c", "kty": "EC", "crv": "P-384"}]}'),
                     r'not a JWK Set herald takes: keys\[0\] \(kid "c"\)'),
                    ("a set over the cap", lambda: setattr(p, "body", b'{"keys": [' + b" " * 300000 + b"]}"),
                     r"the set is over 256 KiB"),
                    ("an error status", lambda: setattr(p, "status", 500), r"answered HTTP 500")):
                setup()
                since = h.log_size()
                h.signal(signal.SIGHUP)
                h.wait_log(r"error: jwt_jwks_url .*: " + cause + r".*; the keys in force stay", since=since)
                assert accepted(h, token), what
                # The same failure again is no new error line.
                since = h.log_size()
                h.signal(signal.SIGHUP)
                h.wait_log(r"jwt_jwks_url .*\(still\)", since=since)
                assert "error: jwt_jwks_url" not in h.log()[since:], what
                # Back to a good set: said once.
                p.body, p.status = None, 200
                since = h.log_size()
                h.signal(signal.SIGHUP)
                h.wait_log(r"jwt_jwks_url .* answers again", since=since)
            # The provider down: the keys stay, one line; it is tried again
            # by itself and found back.
            p.stop()
            since = h.log_size()
            h.signal(signal.SIGHUP)
            h.wait_log(r"error: jwt_jwks_url .*: .*; the keys in force stay", since=since)
            assert accepted(h, token)
            p = Provider([oct_jwk(S1, kid="k1")], port=port)
            h.wait_log(r"jwt_jwks_url .* answers again", since=since, timeout=20)
            assert accepted(h, token)
    finally:
        p.stop()


def test_jwks_url_slow_provider_never_stalls():
    p = Provider([oct_jwk(S1, kid="k1")])
    token = tok("HS256", S1, "k1", subscribe=["t/*"])
    try:
        with herald_on(p) as h:
            h.wait_log(r"jwt: 1 keys from jwt_jwks_url in force")
            p.hold = threading.Event()
            h.signal(signal.SIGHUP)
            wait_until(lambda: p.count() == 2, timeout=10, what="the fetch to reach the provider")
            # While the provider sits on the answer, herald answers.
            for _ in range(5):
                t0 = time.monotonic()
                st, _, _ = request(h.port, "GET", "/api/health")
                assert st == 200 and time.monotonic() - t0 < 1.0
            assert accepted(h, token)
            p.hold.set()
            h.wait_log(r"the set is unchanged|keys from jwt_jwks_url in force")
            assert accepted(h, token)
            # Stopped with a fetch out: it is cancelled, nothing leaks.
            p.hold = threading.Event()
            h.signal(signal.SIGHUP)
            wait_until(lambda: p.count() == 3, timeout=10, what="the second fetch to reach the provider")
            h.stop()
    finally:
        p.stop()


def test_jwks_url_start_without_the_provider():
    p = Provider([oct_jwk(S1, kid="k1")])
    port = p.port
    p.stop()
    token = tok("HS256", S1, "k1", subscribe=["t/*"])
    h = Herald(config=f"jwt_jwks_url = http://127.0.0.1:{port}/jwks\npublish_token = {PT}\n")
    try:
        with h:
            h.wait_log(r"error: jwt_jwks_url .*: .*; no keys yet: signed tokens are refused")
            expect_refused(open_stream(h, token, query="topic=t/1"), 401, "unknown key id", "no keys yet")
            st, _, _ = request(h.port, "GET", "/api/health")
            assert st == 200
            p = Provider([oct_jwk(S1, kid="k1")], port=port)
            wait_until(lambda: accepted(h, token), timeout=20, what="the keys once the provider is up")
    finally:
        p.stop()


def test_jwks_url_https_verified_against_outbound_ca_file():
    d = tempfile.mkdtemp(prefix="herald-jwks-url-")
    cert, key = _make_cert(d, "idp")
    p = Provider([oct_jwk(S1, kid="k1")], tls=(cert, key))
    token = tok("HS256", S1, "k1", subscribe=["t/*"])
    try:
        # The system's CAs do not know the provider's certificate: no keys.
        with herald_on(p) as h:
            h.wait_log(r"error: jwt_jwks_url https://.*: .*certificate.*; no keys yet")
            expect_refused(open_stream(h, token, query="topic=t/1"), 401, "unknown key id", "unverified provider")
            # Its CA named: the set is fetched over verified TLS.
            with open(os.path.join(h.dir, "herald.conf"), "a") as f:
                f.write(f"outbound_ca_file = {cert}\n")
            since = h.log_size()
            h.signal(signal.SIGHUP)
            h.wait_log(r"jwt: 1 keys from jwt_jwks_url in force", since=since)
            assert accepted(h, token)
    finally:
        p.stop()


def test_jwks_url_reload_switches_to_a_file_and_back():
    p = Provider([oct_jwk(S1, kid="k1")])
    t1, t2 = tok("HS256", S1, "k1", subscribe=["t/*"]), tok("HS256", S2, "k2", subscribe=["t/*"])
    try:
        with herald_on(p) as h:
            h.wait_log(r"jwt: 1 keys from jwt_jwks_url in force")
            conf = os.path.join(h.dir, "herald.conf")
            path = os.path.join(h.dir, "jwks.json")
            with open(path, "w") as f:
                json.dump({"keys": [oct_jwk(S2, kid="k2")]}, f)
            with open(conf, "w") as f:
                f.write(f"jwt_jwks_file = {path}\npublish_token = {PT}\n")
            since = h.log_size()
            h.signal(signal.SIGHUP)
            h.wait_log(r"configuration reloaded", since=since)
            assert accepted(h, t2)
            # The fetcher is gone: an unknown kid starts no fetch.
            expect_refused(open_stream(h, t1, query="topic=t/1"), 401, "unknown key id.*jwt_jwks_file", "k1")
            assert p.count() == 1
            # Back to the URL: fetched again.
            with open(conf, "w") as f:
                f.write(f"jwt_jwks_url = {p.url}\npublish_token = {PT}\n")
            since = h.log_size()
            h.signal(signal.SIGHUP)
            h.wait_log(r"jwt: 1 keys from jwt_jwks_url in force", since=since)
            assert accepted(h, t1) and p.count() == 2
    finally:
        p.stop()


def test_jwks_url_each_worker_fetches():
    p = Provider([oct_jwk(S1, kid="k1")])
    token = tok("HS256", S1, "k1", subscribe=["t/*"])
    try:
        with Herald(args=["--workers", "2"], config=f"jwt_jwks_url = {p.url}\npublish_token = {PT}\n") as h:
            wait_until(lambda: h.log().count("keys from jwt_jwks_url in force") == 2, timeout=15,
                       what="both workers' sets")
            assert p.count() == 2
            for _ in range(4):  # whichever worker answers
                assert accepted(h, token)
    finally:
        p.stop()


def refused_config(config, *needles):
    h = Herald(config=config, wait=False)
    try:
        code = h.proc.wait(30)
    finally:
        h.kill()
    log = h.log()
    assert code != 0, log
    for n in needles:
        assert n in log, f"{n!r} not in:\n{log}"


def test_jwks_url_config_errors(tmp_path=None):
    refused_config("jwt_jwks_url = http://idp.example/.well-known/jwks.json\n", "jwt_jwks_url", "loopback",
                   "use https://")
    refused_config("jwt_jwks_url = ftp://idp.example/jwks\n", "not an https:// URL")
    refused_config("jwt_jwks_url = https://user:pw@idp.example/jwks\n", "user name or password")
    refused_config("jwt_jwks_url = https://idp.example/jwks\njwt_jwks_file = /etc/jwks.json\n",
                   "jwt_jwks_file and jwt_jwks_url", "are both set")
    refused_config("jwt_jwks_url = https://idp.example/jwks\njwt_algorithm = HS256\n",
                   'jwt_algorithm = "HS256" is set, but jwt_jwks_url')
    refused_config("jwt_jwks_url = https://idp.example/jwks\noutbound_ca_file = /nonexistent/ca.pem\n",
                   "outbound_ca_file", "No such file or directory")
