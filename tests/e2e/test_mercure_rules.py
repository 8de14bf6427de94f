# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: the Mercure endpoint's rules against abuse and for a new
user. Subscription events may not push published events out of the log
(each address has a budget of them); a relative topic is judged in the
hub's namespace as matching resolves it; a resume id answers only for an
update the subscriber may see; every answer of the endpoint, refusals
included, carries the hub's Link; a token's refusal names its cause; one
rule for publishing without a token on both publish endpoints; the hub's
URL says https on herald's own TLS listener (HTTP/1.1 and HTTP/2); an
unknown subscribe parameter is refused by name instead of ignored; and
subscription events wait out another program's hold on the database's
write lock, none lost and in order.

Tokens are minted as in test_mercure.py (HS256, both claim styles)."""
import base64
import hashlib
import hmac
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse

from harness import Herald, Stream, connect, publish, request, sqlite, wait_until
from test_mercure import HUB, SECRET, MStream, access, legacy, made_number, mint, mpublish, start

LINK = f'<{HUB}>; rel="mercure"'


def head_only(port, target, headers=None, method="GET", body=b""):
    """Send one request and read only the answer's head (a stream never
    ends): (status, headers with lower-case names, what came of the body)."""
    s = connect(port)
    try:
        h = {"Host": "127.0.0.1"}
        h.update(headers or {})
        raw = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
        s.sendall(raw.encode() + body)
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            assert d, f"closed before a head: {buf!r}"
            buf += d
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        hd = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        n = int(hd.get("content-length", "0"))
        s.settimeout(2.0)
        while len(rest) < n:
            d = s.recv(65536)
            if not d:
                break
            rest += d
        return int(lines[0].split(" ")[1]), hd, rest
    finally:
        s.close()


def error_of(body):
    return json.loads(body)["error"]


def test_subscription_churn_does_not_push_published_events_out():
    # retention_count 400, the default budget of subscription events per
    # address (256 a minute): a subscriber opening and dropping 20
    # subscriptions of 16 matchers wants 640 rows; without a budget they
    # push the update a reader resumes from out of the log. (The budget
    # refills 4 events a second: the loop would need half a minute to earn
    # the rows that would reach the update.)
    conf = "mercure_anonymous = on\nmercure_subscriptions = on\nretention_count = 400\npublish_token = ptok\n"
    with start(conf) as h:
        h.insert_many([("message", "filler", "", True)] * 400)
        _, _, a = mpublish(h.port, [("topic", "https://example.com/a"), ("data", "a"), ("id", "urn:test:a")], "ptok")
        a_num = h.last_id()
        matchers = [("match", f"https://example.com/m/{i}") for i in range(16)]
        opened = refused = 0
        for _ in range(20):
            s = MStream(h.port, matchers)
            if s.status == 200:
                opened += 1
            else:
                assert s.status == 429 and "retry-after" in s.headers, (s.status, s.headers)
                refused += 1
            s.close()
        assert refused > 0 and opened > 0, (opened, refused)

        def announced():
            return int(sqlite(h.db, "SELECT count(*) FROM events WHERE type = 'mercure'"))
        # Every open and close of the subscriptions served is in the log.
        wait_until(lambda: announced() == opened * 16 * 2, what="the subscription events")
        _, _, m = mpublish(h.port, [("topic", "https://example.com/a"), ("data", "m")], "ptok")
        m_num = h.last_id()
        # Retention (every 5 s) has run since: it keeps the newest 400 ids.
        wait_until(lambda: int(sqlite(h.db, "SELECT min(id) FROM events")) > m_num - 400, timeout=15,
                   what="retention to run")
        r = MStream(h.port, [("match", "https://example.com/a")], {"Last-Event-ID": a})
        assert r.headers["mercure-last-event-id"] == a, (opened, r.headers)
        assert [e["data"] for e in r.events(1)] == ["m"]
        r.close()
        s = Stream(h.port, f"topic=https://example.com/a&last_event_id={a_num}")
        got = s.events(1)
        assert got and got[0]["event"] != "reset" and got[0]["data"] == "m", got
        s.close()


def test_a_relative_topic_in_the_hubs_namespace_is_refused():
    with start("publish_token = ptok\n") as h:
        # Matching resolves a relative topic against the hub's URL
        # (https://hub.example/.well-known/mercure): these name its own
        # namespace, where the subscription events are.
        for t in ("mercure/subscriptions/exact/x/urn%3Ax", "mercure", "./mercure/subscriptions",
                  "../.well-known/mercure/subscriptions/x", "x/../mercure/subscriptions", "%6Dercure/x",
                  "?x", "mercure?x", "mercure#x"):
            st, _, body = mpublish(h.port, [("topic", t)], "ptok", expect=None)
            if t.startswith("?"):
                assert st == 200, (t, st, body)  # resolves to /.well-known/?x, outside the namespace
            else:
                assert st == 400 and "namespace" in body, (t, st, body)
        for t in ("books/1", "urn:example:1", "mercurial/x", "/.well-known/mercurex", "https://other.example/a"):
            mpublish(h.port, [("topic", t), ("data", "ok")], "ptok")
        # An alternate topic is judged the same way.
        st, _, body = mpublish(h.port, [("topic", "books/1"), ("topic", "mercure/subscriptions/x")], "ptok",
                               expect=None)
        assert st == 400, body


def test_a_resume_id_answers_only_for_an_update_the_subscriber_may_see():
    with start("mercure_anonymous = on\npublish_token = ptok\n") as h:
        mpublish(h.port, [("topic", "https://example.com/secret"), ("private", "on"), ("data", "s"),
                          ("id", "urn:secret:1")], "ptok")
        _, _, u = mpublish(h.port, [("topic", "https://example.com/public"), ("data", "u")], "ptok")
        granted = {"Authorization": "Bearer " + legacy(subscribe=["https://example.com/secret"])}
        other = {"Authorization": "Bearer " + legacy(subscribe=["https://example.com/other"])}
        for hdrs in ({}, other):
            # The same answer as for an id the log never had: earliest,
            # and the stream goes on from now.
            for how in ({"Last-Event-ID": "urn:secret:1"}, {"Last-Event-ID": "urn:none:1"}):
                r = MStream(h.port, [("match", "*")], dict(hdrs, **how))
                assert r.status == 200 and r.headers["mercure-last-event-id"] == "earliest", (hdrs, how, r.headers)
                assert r.events(1, timeout=0.4) == []
                r.close()
            r = MStream(h.port, [("match", "*"), ("lastEventID", "urn:secret:1")], hdrs)
            assert r.headers["mercure-last-event-id"] == "earliest"
            r.close()
        r = MStream(h.port, [("match", "*")], dict(granted, **{"Last-Event-ID": "urn:secret:1"}))
        assert r.headers["mercure-last-event-id"] == "urn:secret:1"
        assert [e["id"] for e in r.events(1)] == [u]
        r.close()
    # The subscription API's cursor (the newest update) likewise: the
    # update's id to a token that may see it, the id made from its number
    # to another.
    with start("mercure_subscriptions = on\npublish_token = ptok\n") as h:
        mpublish(h.port, [("topic", "https://example.com/secret"), ("private", "on"), ("id", "urn:secret:2")],
                 "ptok")
        newest = h.last_id()
        subs = ("/.well-known/mercure/subscriptions{/*}?", "urlpattern")
        for grants, want in (([subs], newest), ([subs, ("https://example.com/secret", "exact")], "urn:secret:2")):
            st, hd, _ = request(h.port, "GET", "/.well-known/mercure/subscriptions",
                                headers={"Authorization": "Bearer " + access(["subscribe"], grants)})
            link = re.search(r'last-event-id="([^"]*)"', hd.get("link", ""))
            got = link and link.group(1)
            assert st == 200 and (got == want or made_number(got or "") == want), (grants, st, hd)


# Holds the database's write lock until its stdin closes.
HOLD_LOCK = r"""
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], timeout=10, isolation_level=None)
con.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.read()
con.execute("ROLLBACK")
"""


def test_every_answer_of_the_endpoint_carries_the_hubs_link():
    conf = "publish_token = ptok\nper_address_limit = 2\nallow_origin = https://app.example\n"
    with start(conf) as h:
        sub = {"Authorization": "Bearer " + legacy(subscribe=["*"])}
        expired = mint({"mercure": {"subscribe": ["*"], "publish": ["*"]}, "exp": int(time.time()) - 3600})
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        body = urllib.parse.urlencode([("topic", "https://example.com/a")]).encode()
        many = urllib.parse.urlencode([("topic", f"t/{i}") for i in range(65)]).encode()
        cases = [
            # subscribe
            (400, "GET", "/.well-known/mercure?match_regex=a", sub, b""),
            (400, "GET", "/.well-known/mercure?match=a&nonsense=1", sub, b""),
            (400, "GET", "/.well-known/mercure", sub, b""),
            (401, "GET", "/.well-known/mercure?match=a", {}, b""),
            (401, "GET", "/.well-known/mercure?match=a", {"Authorization": "Bearer x.y.z"}, b""),
            (401, "GET", "/.well-known/mercure?match=a", {"Authorization": "Bearer " + expired}, b""),
            (403, "GET", "/.well-known/mercure?match=a",
             {"Cookie": "mercureAuthorization=" + legacy(subscribe=["*"]), "Origin": "https://evil.example"}, b""),
            # publish
            (400, "POST", "/.well-known/mercure", {"Authorization": "Bearer ptok", "Content-Type": "text/plain",
                                                  "Content-Length": str(len(body))}, body),
            (400, "POST", "/.well-known/mercure", dict(form, Authorization="Bearer ptok", **{"Content-Length": "7"}),
             b"data=x&"),
            (401, "POST", "/.well-known/mercure", dict(form, **{"Content-Length": str(len(body))}), body),
            (401, "POST", "/.well-known/mercure", dict(form, Authorization="Bearer x.y.z",
                                                       **{"Content-Length": str(len(body))}), body),
            (403, "POST", "/.well-known/mercure",
             dict(form, Authorization="Bearer " + legacy(publish=["https://example.com/b"]),
                  **{"Content-Length": str(len(body))}), body),
            (413, "POST", "/.well-known/mercure", dict(form, Authorization="Bearer ptok",
                                                       **{"Content-Length": str(len(many))}), many),
            (413, "POST", "/.well-known/mercure", dict(form, Authorization="Bearer ptok",
                                                       **{"Content-Length": "1000000"}), b""),
            (411, "POST", "/.well-known/mercure", dict(form, Authorization="Bearer ptok",
                                                       **{"Transfer-Encoding": "chunked"}), b""),
            # other methods, the preflight, paths under the hub's
            (405, "PUT", "/.well-known/mercure", {"Content-Length": "0"}, b""),
            (405, "DELETE", "/.well-known/mercure", {}, b""),
            (204, "OPTIONS", "/.well-known/mercure", {"Origin": "https://app.example"}, b""),
            (403, "OPTIONS", "/.well-known/mercure", {"Origin": "https://evil.example"}, b""),
            (404, "GET", "/.well-known/mercure/subscriptions", sub, b""),
            (405, "POST", "/.well-known/mercure/subscriptions", {"Content-Length": "0"}, b""),
            (404, "GET", "/.well-known/mercure/elsewhere", {}, b""),
            (405, "POST", "/.well-known/oauth-protected-resource/.well-known/mercure", {"Content-Length": "0"}, b""),
        ]
        for status, method, target, hdrs, payload in cases:
            st, hd, got = head_only(h.port, target, hdrs, method, payload)
            assert st == status, (method, target, hdrs, st, got)
            assert hd.get("link") == LINK, (method, target, st, hd)
        # The caps' refusal, before the token.
        a, b = MStream(h.port, [("match", "a")], sub), MStream(h.port, [("match", "a")], sub)
        st, hd, _ = head_only(h.port, "/.well-known/mercure?match=a", sub)
        assert st == 429 and hd.get("link") == LINK, (st, hd)
        a.close()
        b.close()
    # A publish the log cannot take (another process holds its write lock):
    # 503 after herald's wait for the lock.
    with start("publish_token = ptok\n") as h:
        holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, h.db], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)
        try:
            assert holder.stdout.readline() == b"held\n"
            st, hd, body = mpublish(h.port, [("topic", "a")], "ptok", expect=None)
            assert st == 503 and hd.get("link") == LINK, (st, hd, body)
        finally:
            holder.stdin.close()
            holder.wait(10)
    # The subscription API's refusals.
    with start("mercure_subscriptions = on\n") as h:
        for status, hdrs, target in (
                (401, {}, "/.well-known/mercure/subscriptions"),
                (403, {"Authorization": "Bearer " + access(["subscribe"], [("x", "exact")])},
                 "/.well-known/mercure/subscriptions"),
                (404, {"Authorization": "Bearer " + legacy(subscribe=["*"])},
                 "/.well-known/mercure/subscriptions/exact/x/urn%3Anone")):
            st, hd, _ = head_only(h.port, target, hdrs)
            assert st == status and hd.get("link") == LINK, (target, st, hd)


def test_a_token_refusal_names_its_cause_in_the_answer_and_the_log():
    with start("mercure_anonymous = on\n") as h:
        head, payload, _ = legacy(subscribe=["*"], publish=["*"]).split(".")
        other_key = hmac.new(b"another secret of at least 32 bytes!", (head + "." + payload).encode(), hashlib.sha256)
        forged = head + "." + payload + "." + base64.urlsafe_b64encode(other_key.digest()).rstrip(b"=").decode()
        expired = mint({"mercure": {"subscribe": ["*"], "publish": ["*"]}, "exp": int(time.time()) - 3600})
        no_aud = access(["subscribe", "publish"], [("*", "exact")], aud=None)
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        body = urllib.parse.urlencode([("topic", "https://example.com/a")])
        for tok, cause in ((expired, "expired"), (forged, "signature"), (no_aud, "audience")):
            auth = {"Authorization": "Bearer " + tok}
            st, hd, got = head_only(h.port, "/.well-known/mercure?match=a", auth)
            assert st == 401 and cause in error_of(got), (cause, st, got)
            assert 'error="invalid_token"' in hd["www-authenticate"]
            st, _, got = request(h.port, "POST", "/.well-known/mercure", body, headers=dict(form, **auth))
            assert st == 401 and cause in error_of(got), (cause, st, got)
            h.wait_log(rf"refused 127\.0\.0\.1 GET /\.well-known/mercure: 401 [^\n]*{cause}")
            h.wait_log(rf"refused 127\.0\.0\.1 POST /\.well-known/mercure: 401 [^\n]*{cause}")


def test_publishing_without_a_token_is_one_rule_for_both_endpoints():
    # jwt_algorithm set, no publish_token: a client on this host publishes
    # without a token on both endpoints, and from behind a proxy on neither.
    with start("") as h:
        publish(h.port, topic="t", data="native")
        mpublish(h.port, [("topic", "t"), ("data", "mercure")])
        fwd = {"X-Forwarded-For": "203.0.113.9"}
        st, _, _ = request(h.port, "POST", "/api/events", {"topic": "t", "data": "x"}, headers=fwd)
        assert st == 403
        mpublish(h.port, [("topic", "t")], headers=fwd, expect=403)
        mpublish(h.port, [("topic", "t")], headers={"Origin": "https://evil.example"}, expect=403)
    # publish_token set: both need a token.
    with start("publish_token = ptok\n") as h:
        st, _, _ = request(h.port, "POST", "/api/events", {"topic": "t", "data": "x"})
        assert st == 401
        _, hd, _ = mpublish(h.port, [("topic", "t")], expect=401)
        assert hd["www-authenticate"].startswith("Bearer")


def _make_cert(dir):
    cert, key = os.path.join(dir, "hub.crt"), os.path.join(dir, "hub.key")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=herald-hub",
                        "-addext", "subjectAltName=IP:127.0.0.1"], capture_output=True, timeout=20)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return cert, key


def test_the_hub_url_says_https_on_a_tls_listener():
    tmp = tempfile.mkdtemp(prefix="herald-test-")
    cert, key = _make_cert(tmp)
    with open(os.path.join(tmp, "secret"), "w") as f:
        f.write(SECRET)
    conf = "jwt_algorithm = HS256\njwt_secret_file = %s\n" % os.path.join(tmp, "secret")
    with Herald(dir=tmp, config=conf, args=["--listen", "tls:127.0.0.1:0", "--tls-cert", cert,
                                            "--tls-key", key]) as h:
        meta = "/.well-known/oauth-protected-resource/.well-known/mercure"
        hub_tls = f"https://127.0.0.1:{h.tls_port}/.well-known/mercure"
        ctx = ssl.create_default_context(cafile=cert)
        ctx.set_alpn_protocols(["http/1.1"])

        def tls_head(target, headers=None):
            """One request over TLS: (status, headers, body); a stream's
            body is not waited for."""
            s = ctx.wrap_socket(connect(h.tls_port), server_hostname="127.0.0.1")
            try:
                hd = {"Host": f"127.0.0.1:{h.tls_port}", "Connection": "close"}
                hd.update(headers or {})
                s.sendall((f"GET {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hd.items())
                           + "\r\n").encode())
                buf = b""
                while b"\r\n\r\n" not in buf:
                    d = s.recv(65536)
                    assert d, buf
                    buf += d
                head, _, rest = buf.partition(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                hdrs = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
                while len(rest) < int(hdrs.get("content-length", "0")):
                    rest += s.recv(65536)
                return int(lines[0].split(" ")[1]), hdrs, rest
            finally:
                s.close()
        st, hd, body = tls_head(meta)
        assert st == 200 and json.loads(body)["resource"] == hub_tls, body
        assert hd["link"] == f'<{hub_tls}>; rel="mercure"'
        # An at+jwt token naming that URL as its audience is taken.
        tok = access(["subscribe"], [("*", "exact")], aud=hub_tls)
        st, hd, _ = tls_head("/.well-known/mercure?match=a", {"Authorization": "Bearer " + tok})
        assert st == 200 and hd["link"] == f'<{hub_tls}>; rel="mercure"', (st, hd)
        # The plain listener beside it still says http.
        st, _, body = request(h.port, "GET", meta, headers={"Host": f"127.0.0.1:{h.port}"})
        assert json.loads(body)["resource"] == f"http://127.0.0.1:{h.port}/.well-known/mercure"
        # HTTP/2 over TLS (ALPN h2) says https too.
        r = subprocess.run(["curl", "-sS", "--http2", "--cacert", cert, f"https://127.0.0.1:{h.tls_port}{meta}"],
                           capture_output=True, text=True, timeout=20)
        assert r.returncode == 0 and json.loads(r.stdout)["resource"] == hub_tls, (r.stdout, r.stderr)


def test_subscribe_refuses_an_unknown_query_parameter_by_name():
    with start("mercure_anonymous = on\n") as h:
        for q, name, hint in (("lastEventId=3", "lastEventId", "lastEventID"),
                              ("lasteventid=3", "lasteventid", "lastEventID"),
                              ("last-event-id=3", "last-event-id", "lastEventID"),
                              ("LastEventID=3", "LastEventID", "lastEventID"),
                              ("topics=b", "topics", "topic"),
                              ("Topic=b", "Topic", "topic"),
                              ("since=3", "since", None)):
            st, hd, body = head_only(h.port, "/.well-known/mercure?match=a&" + q)
            assert st == 400 and hd.get("link") == LINK, (q, st, body)
            why = error_of(body)
            assert f'"{name}"' in why and ("did you mean" in why) == (hint is not None), (q, why)
            if hint:
                assert f'"{hint}"' in why.split("did you mean")[1], (q, why)
        # What the protocol and herald name is taken, empty parts too.
        for q in ("match=a&match_exact=b&match_urlpattern=https://e.com/:x&topic=c&lastEventID=earliest",
                  "match=a&last_event_id=earliest", "match=a&&", "&match=a"):
            st, hd, body = head_only(h.port, "/.well-known/mercure?" + q)
            assert st == 200, (q, st, body)
        # A token in the query is not read: said, not ignored.
        for name in ("authorization", "access_token"):
            st, _, body = head_only(h.port, f"/.well-known/mercure?match=a&{name}=" + legacy(subscribe=["*"]))
            assert st == 401 and name in error_of(body), (name, st, body)
        # With a token in the header, the header's is the one.
        st, _, _ = head_only(h.port, "/.well-known/mercure?match=a&authorization=x",
                             {"Authorization": "Bearer " + legacy(subscribe=["*"])})
        assert st == 200


def test_subscription_events_wait_out_a_locked_database():
    # Another program holds SQLite's write lock (an INSERT of its own, as
    # the events table invites) while subscriptions open and close: their
    # events wait for the lock and are stored once it is free, every one
    # and in the order they happened, not dropped.
    with start("mercure_anonymous = on\nmercure_subscriptions = on\n") as h:
        pattern = "/.well-known/mercure/subscriptions/:type/:match/:subscriber"
        token = access(["subscribe"], [(pattern, "urlpattern"),
                                       ("/.well-known/mercure/subscriptions{/*}?", "urlpattern")])
        auth = {"Authorization": "Bearer " + token}
        w = MStream(h.port, [("match_urlpattern", pattern)], auth)
        assert json.loads(w.events(1)[0]["data"])["match"] == pattern

        def listed():
            st, _, body = request(h.port, "GET", "/.well-known/mercure/subscriptions", headers=auth)
            assert st == 200, body
            return {d["subscriber"] for d in json.loads(body)["subscriptions"]}

        def mercure_rows():
            return int(sqlite(h.db, "SELECT count(*) FROM events WHERE type = 'mercure'"))

        before = mercure_rows()
        mark = h.log_size()
        matchers = ["https://example.com/a", "https://example.com/b"]
        want = []  # (subscriber, match, active) in the order herald saw them
        holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, h.db], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)
        try:
            assert holder.stdout.readline() == b"held\n"
            known = listed()
            kept = None
            for i in range(3):
                s = MStream(h.port, [("match", m) for m in matchers])
                assert s.status == 200
                new = listed() - known
                assert len(new) == 1, new
                subscriber = new.pop()
                want += [(subscriber, m, True) for m in matchers]
                if i == 2:
                    kept = s  # the last one stays open
                    break
                s.close()
                wait_until(lambda: subscriber not in listed(), what="the close seen")
                want += [(subscriber, m, False) for m in matchers]
            # herald met the lock (and said so) before it is let go.
            h.wait_log(r"mercure: \d+ subscription events (could not be stored yet|were not stored)", since=mark)
            assert mercure_rows() == before
        finally:
            holder.stdin.close()
            holder.wait(10)
        wait_until(lambda: mercure_rows() >= before + len(want), timeout=10, what="the subscription events stored")
        rows = sqlite(h.db, f"SELECT data FROM events WHERE type = 'mercure' ORDER BY id LIMIT -1 OFFSET {before}")
        stored = [(d["subscriber"], d["match"], d["active"]) for d in map(json.loads, rows.splitlines())]
        assert stored == want, (stored, want)
        # The watcher gets them in the same order.
        got = [json.loads(e["data"]) for e in w.events(len(want), timeout=10)]
        assert [(d["subscriber"], d["match"], d["active"]) for d in got] == want, got
        assert "were not stored" not in h.log()[mark:]
        _, _, metrics = request(h.port, "GET", "/metrics")
        assert b"\nherald_own_events_dropped_total 0\n" in metrics
        # A clean stop closes the last subscription: its events are stored
        # before herald exits, not dropped with the queue.
        h.stop()
        rows = sqlite(h.db, "SELECT data FROM events WHERE type = 'mercure' ORDER BY id").splitlines()
        last = [(d["match"], d["active"]) for d in map(json.loads, rows) if d["subscriber"] == want[-1][0]]
        assert last == [(m, True) for m in matchers] + [(m, False) for m in matchers], last
        kept.close()
        w.close()
