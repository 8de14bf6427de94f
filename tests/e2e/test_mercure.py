# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: the Mercure protocol at /.well-known/mercure on herald's own
event log.

Real herald processes on loopback with a HS256 secret; tokens are minted
here with the standard library, in both claim styles (RFC 9068 access
tokens with authorization_details, and the older "mercure" claim). The
tests check publishing (form fields, ids made and given, the refusals the
specification names), subscribing (match, match_exact, match_urlpattern,
the older topic parameter, "*"), private updates on live delivery and on
resume, the mercureAuthorization cookie, resume by Last-Event-ID (an id used
twice names its earliest update),
last_event_id, lastEventID and earliest, ids across a restart, and that
events cross between herald's own API and the Mercure endpoint.
"""
import base64
import hashlib
import hmac
import json
import os
import re
import tempfile
import time
import urllib.parse

from harness import Herald, RedisServer, Stream, connect, publish, request, wait_until

SECRET = "a-mercure-test-secret-of-at-least-32-bytes"
HUB = "https://hub.example/.well-known/mercure"
DETAIL = "https://mercure.rocks/authorization-detail"


MADE_ID = re.compile(r"urn:uuid:([0-9a-f]{8})-([0-9a-f]{4})-8([0-9a-f]{3})-([89ab][0-9a-f]{3})-([0-9a-f]{12})")


def made_number(mid):
    """The event number in an id herald made from its log's identity and the
    number (a urn:uuid: of version 8: 48 bits of identity, the number's top
    bits beside the version, its low 62 beside the variant), else None."""
    m = MADE_ID.fullmatch(mid)
    if not m:
        return None
    return int(m.group(3), 16) << 62 | int(m.group(4) + m.group(5), 16) & ((1 << 62) - 1)


def made_identity(mid):
    """The log's identity part of a made id (its first 13 characters after
    urn:uuid:)."""
    assert made_number(mid) is not None, mid
    return mid[9:22]


def b64u(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def mint(claims, typ="JWT"):
    header = {"alg": "HS256", "typ": typ}
    claims = dict(claims)
    claims.setdefault("exp", int(time.time()) + 3600)
    signing = b64u(json.dumps(header).encode()) + "." + b64u(json.dumps(claims).encode())
    sig = hmac.new(SECRET.encode(), signing.encode(), hashlib.sha256).digest()
    return signing + "." + b64u(sig)


def legacy(publish=(), subscribe=()):
    """A token in the older claim style."""
    return mint({"mercure": {"publish": list(publish), "subscribe": list(subscribe)}})


def access(actions, topics, **extra):
    """An RFC 9068 access token with one Mercure authorization detail;
    topics are (match, match_type) pairs."""
    claims = {"iss": "https://app.example", "aud": HUB, "sub": "user-1", "client_id": "app", "iat": int(time.time()),
              "jti": "j1",
              "authorization_details": [{"type": DETAIL, "actions": list(actions),
                                         "topics": [{"match": m, "match_type": t} for m, t in topics]}]}
    claims.update(extra)
    return mint({k: v for k, v in claims.items() if v is not None}, typ="at+jwt")


def start(extra="", **kw):
    """A herald with HS256 tokens and the hub URL set, extra added to its
    configuration."""
    tmp = tempfile.mkdtemp(prefix="herald-test-")
    with open(os.path.join(tmp, "secret"), "w") as f:
        f.write(SECRET)
    conf = ("jwt_algorithm = HS256\njwt_secret_file = %s\nmercure_url = %s\n%s"
            % (os.path.join(tmp, "secret"), HUB, extra))
    return Herald(dir=tmp, config=conf, **kw)


def mpublish(port, fields, token=None, headers=None, expect=200):
    """POST a form; returns (status, headers, body text)."""
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    h["Content-Type"] = "application/x-www-form-urlencoded"
    body = urllib.parse.urlencode(fields)
    st, hd, b = request(port, "POST", "/.well-known/mercure", body, headers=h)
    if expect is not None:
        assert st == expect, f"publish {fields} got {st}: {b!r}"
    return st, hd, b.decode()


class MStream:
    """A raw Mercure subscription on its own socket."""

    def __init__(self, port, params, headers=None, timeout=5.0):
        self.sock = connect(port, timeout=timeout)
        q = urllib.parse.urlencode(params)
        h = {"Host": "127.0.0.1", "Accept": "text/event-stream"}
        h.update(headers or {})
        head = f"GET /.well-known/mercure?{q} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
        self.sock.sendall((head + "\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            d = self.sock.recv(65536)
            assert d, f"closed before headers: {self.buf!r}"
            self.buf += d
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        self.headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}

    def events(self, n, timeout=5.0):
        """The next n events as dicts (id, event, data, retry); fewer on timeout."""
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            i = self.buf.find(b"\n\n")
            if i >= 0:
                raw, self.buf = self.buf[:i], self.buf[i + 2:]
                ev, data = {"event": "message"}, []
                for line in raw.decode().split("\n"):
                    if not line or line.startswith(":"):
                        continue
                    k, _, v = line.partition(":")
                    v = v[1:] if v.startswith(" ") else v
                    if k == "data":
                        data.append(v)
                    else:
                        ev[k] = v
                if data:
                    ev["data"] = "\n".join(data)
                    out.append(ev)
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.sock.settimeout(left)
            try:
                d = self.sock.recv(65536)
            except OSError:
                break
            if not d:
                break
            self.buf += d
        return out

    def close(self):
        self.sock.close()


def test_mercure_publish_and_subscribe_exact_and_urlpattern():
    with start("mercure_anonymous = on\n") as h:
        pub = legacy(publish=["*"])
        exact = MStream(h.port, [("match", "https://example.com/books/1")])
        pattern = MStream(h.port, [("match_urlpattern", "https://example.com/books/:id")])
        old = MStream(h.port, [("topic", "https://example.com/books/2")])
        every = MStream(h.port, [("match", "*")])
        assert exact.status == 200 and exact.headers["content-type"] == "text/event-stream"
        st, hd, id1 = mpublish(h.port, [("topic", "https://example.com/books/1"), ("data", "one\nline two"),
                                        ("type", "book"), ("retry", "1500")], pub)
        assert hd["content-type"].startswith("text/plain")
        assert id1.startswith("urn:uuid:") and len(id1) == 45, id1
        _, _, id2 = mpublish(h.port, [("topic", "https://example.com/books/2"), ("data", "two"),
                                      ("id", "urn:example:2")], pub)
        assert id2 == "urn:example:2"
        e = exact.events(1)
        assert e == [{"id": id1, "event": "book", "retry": "1500", "data": "one\nline two"}], e
        assert [x["id"] for x in pattern.events(2)] == [id1, id2]
        assert [x["id"] for x in old.events(1)] == [id2]
        assert [x["data"] for x in every.events(2)] == ["one\nline two", "two"]
        # An id used again is taken; resuming from it starts after its
        # earliest update, and the later one with the same id follows.
        _, _, again = mpublish(h.port, [("topic", "https://example.com/books/2"), ("data", "again"),
                                        ("id", "urn:example:2")], pub)
        assert again == "urn:example:2"
        r = MStream(h.port, [("match", "*"), ("last_event_id", "urn:example:2")])
        assert [(x["id"], x["data"]) for x in r.events(1)] == [("urn:example:2", "again")]
        r.close()
        for s in (exact, pattern, old, every):
            s.close()


def test_mercure_refusals_the_specification_names():
    with start() as h:
        pub = legacy(publish=["https://example.com/{id}", "https://example.com/a"])
        # Anonymous subscribers are refused unless mercure_anonymous is on.
        st, hd, _ = request(h.port, "GET", "/.well-known/mercure?match=a")
        assert st == 401 and hd["www-authenticate"].startswith("Bearer") and "error" not in hd["www-authenticate"]
        sub = legacy(subscribe=["*"])
        for q in ("match_regex=a", "MATCHES=a", "", "match_urlpattern=https://e.com/(\\d%2B)",
                  "match=" + urllib.parse.quote("a\u200bb")):
            st, _, body = request(h.port, "GET", "/.well-known/mercure?" + q,
                                  headers={"Authorization": "Bearer " + sub})
            assert st == 400, (q, st, body)
        for bad in ("x.y.z", access(["subscribe"], [("*", "exact")], aud="https://other.example/.well-known/mercure"),
                    access(["subscribe"], [("*", "exact")], iss=None)):
            st, hd, _ = request(h.port, "GET", "/.well-known/mercure?match=a", headers={"Authorization": "Bearer " + bad})
            assert st == 401 and 'error="invalid_token"' in hd["www-authenticate"], bad
        # Publishing: without a token only from this host, not through a
        # proxy (test_mercure_rules has the rest of that rule).
        mpublish(h.port, [("topic", "https://example.com/a")], headers={"X-Forwarded-For": "203.0.113.1"},
                 expect=403)
        mpublish(h.port, [("topic", "https://example.com/a"), ("topic", "https://example.com/b")], pub, expect=403)
        for fields in ([("data", "no topic")], [("topic", "*")],
                       [("topic", "https://hub.example/.well-known/mercure/subscriptions/x")],
                       [("topic", "/.well-known/%6Dercure/x")], [("topic", "/a/../.well-known/mercure")],
                       [("topic", "https://example.com/a"), ("type", "mercure")],
                       [("topic", "https://example.com/a"), ("id", "#frag")],
                       [("topic", "https://example.com/a"), ("id", "earliest")],
                       [("topic", "https://example.com/a"), ("id", "12")],
                       [("topic", "https://example.com/a"), ("retry", "1s")],
                       [("topic", "https://example.com/a"), ("type", "a\nb")]):
            st, _, body = mpublish(h.port, fields, legacy(publish=["*"]), expect=None)
            assert st == 400, (fields, st, body)


def test_mercure_private_updates_live_and_on_resume_both_claim_styles():
    with start("mercure_anonymous = on\n") as h:
        pub = access(["publish"], [("*", "exact")])
        granted_legacy = legacy(subscribe=["https://example.com/books/1"])
        granted_access = access(["subscribe"], [("https://example.com/users/42/:x", "urlpattern")])
        anon = MStream(h.port, [("match_urlpattern", "https://example.com/books/:id")])
        a = MStream(h.port, [("match_urlpattern", "https://example.com/books/:id")],
                    {"Authorization": "Bearer " + granted_legacy})
        b = MStream(h.port, [("match_urlpattern", "https://example.com/books/:id")],
                    {"Authorization": "Bearer " + granted_access})
        # Private, on books/1 (a's grant) and on the alternate users/42/inbox (b's).
        _, _, p1 = mpublish(h.port, [("topic", "https://example.com/books/1"),
                                     ("topic", "https://example.com/users/42/inbox"), ("private", ""),
                                     ("data", "p1")], pub)
        _, _, p2 = mpublish(h.port, [("topic", "https://example.com/books/2"), ("private", "on"),
                                     ("data", "p2")], pub)
        _, _, u3 = mpublish(h.port, [("topic", "https://example.com/books/3"), ("data", "u3")], pub)
        assert [e["data"] for e in anon.events(1)] == ["u3"]
        assert [e["data"] for e in a.events(2)] == ["p1", "u3"]
        assert [e["data"] for e in b.events(2)] == ["p1", "u3"]
        # Resume replays under the same rule: from before p1.
        for tok, want in ((granted_legacy, ["p1", "u3"]), (None, ["u3"])):
            hdrs = {"Authorization": "Bearer " + tok} if tok else {}
            r = MStream(h.port, [("match_urlpattern", "https://example.com/books/:id"), ("lastEventID", "earliest")],
                        hdrs)
            assert [e["data"] for e in r.events(len(want))] == want
            assert r.events(1, timeout=0.3) == []
            r.close()
        # The header wins over the query; the answer names the update
        # asked for, which this token may see.
        r = MStream(h.port, [("match", "https://example.com/books/3"), ("last_event_id", p2)],
                    {"Authorization": "Bearer " + granted_legacy, "Last-Event-ID": p1})
        assert r.headers["mercure-last-event-id"] == p1
        assert [e["id"] for e in r.events(1)] == [u3]
        r.close()
        for s in (anon, a, b):
            s.close()


def test_mercure_cookie_and_its_origin():
    with start("allow_origin = https://app.example\n") as h:
        pub = legacy(publish=["*"])
        sub = legacy(subscribe=["https://example.com/c"])
        s = MStream(h.port, [("match", "https://example.com/c")], {"Cookie": "mercureAuthorization=" + sub})
        assert s.status == 200
        s2 = MStream(h.port, [("match", "https://example.com/c")],
                     {"Cookie": "other=1; mercureAuthorization=" + sub, "Origin": "https://app.example"})
        assert s2.status == 200 and s2.headers["access-control-allow-origin"] == "https://app.example"
        mpublish(h.port, [("topic", "https://example.com/c"), ("private", "on"), ("data", "c")], pub)
        assert [e["data"] for e in s.events(1)] == ["c"]
        assert [e["data"] for e in s2.events(1)] == ["c"]
        st, _, _ = request(h.port, "GET", "/.well-known/mercure?match=x",
                           headers={"Cookie": "mercureAuthorization=" + sub, "Origin": "https://evil.example"})
        assert st == 403
        # The header wins over a cookie.
        s3 = MStream(h.port, [("match", "x")], {"Cookie": "mercureAuthorization=bad", "Authorization": "Bearer " + sub})
        assert s3.status == 200
        s3.close()
        s.close()
        s2.close()


def test_mercure_ids_survive_a_restart():
    h = start("mercure_anonymous = on\n")
    pub = legacy(publish=["*"])
    try:
        _, _, a = mpublish(h.port, [("topic", "t/1"), ("data", "a"), ("id", "urn:x:a")], pub)
        _, _, b = mpublish(h.port, [("topic", "t/1"), ("data", "b")], pub)
    finally:
        h.stop()
    h2 = Herald(db=h.db, config=open(os.path.join(h.dir, "herald.conf")).read())
    try:
        s = MStream(h2.port, [("match", "t/1")], {"Last-Event-ID": a})
        assert s.headers["mercure-last-event-id"] == a
        assert [(e["id"], e["data"]) for e in s.events(1)] == [(b, "b")]
        s.close()
    finally:
        h2.stop()


def test_mercure_and_herald_api_share_the_log():
    with start("mercure_anonymous = on\npublish_token = ptok\n") as h:
        native = MStream(h.port, [("match", "chat/1")])
        odd = "https://example.com/a b?x=1"
        s_odd = MStream(h.port, [("match", odd)])
        hs = Stream(h.port, "topic=https://example.com/books/*")
        hs_odd = Stream(h.port, "topic=$mercure/*")
        hs.opening()
        hs_odd.opening()
        n = publish(h.port, topic="chat/1", data="from herald", public=True, token="ptok")
        e = native.events(1)
        # A row of herald's own: the id made from the log and its number.
        assert made_number(e[0]["id"]) == n and e[0]["data"] == "from herald" and e[0]["event"] == "message", e
        # A Mercure update reaches herald's own readers, with herald's ids;
        # without an id of its own, it has the one made from its number.
        _, _, mid = mpublish(h.port, [("topic", "https://example.com/books/9"), ("data", "m")], "ptok")
        got = hs.events(1)
        assert got[0]["data"] == "m" and got[0]["id"] == n + 1
        assert made_number(mid) == n + 1 and made_identity(mid) == made_identity(e[0]["id"]), mid
        # A topic herald's rule refuses is kept under $mercure/<sha256>.
        mpublish(h.port, [("topic", odd), ("data", "odd")], "ptok")
        assert [x["data"] for x in s_odd.events(1)] == ["odd"]
        rows = h.stored_events()
        assert rows[-1]["topic"] == "$mercure/" + hashlib.sha256(odd.encode()).hexdigest(), rows[-1]
        assert [x["data"] for x in hs_odd.events(1)] == ["odd"]
        # Resuming from herald's own number on the Mercure side, and from
        # the id made from it.
        r = MStream(h.port, [("match", "*")], {"Last-Event-ID": str(n)})
        assert [x["id"] for x in r.events(2)][0] == mid
        r2 = MStream(h.port, [("match", "*")], {"Last-Event-ID": e[0]["id"]})
        assert r2.headers["mercure-last-event-id"] == e[0]["id"]
        assert [x["id"] for x in r2.events(2)][0] == mid
        r2.close()
        for s in (native, s_odd, hs, hs_odd, r):
            s.close()


def test_mercure_discovery_metadata_challenge_and_link():
    with start() as h:
        meta_path = "/.well-known/oauth-protected-resource/.well-known/mercure"
        st, hd, body = request(h.port, "GET", meta_path)
        assert st == 200 and hd["content-type"] == "application/json"
        doc = json.loads(body)
        assert doc["resource"] == HUB
        assert doc["authorization_details_types_supported"] == [DETAIL]
        assert doc["bearer_methods_supported"] == ["header"]
        assert doc["mercure_matcher_types_supported"] == ["exact", "urlpattern"]
        assert "mercure_subscriptions" not in doc  # off by default
        assert hd["link"] == f'<{HUB}>; rel="mercure"'
        # Challenges point to it.
        st, hd, _ = request(h.port, "GET", "/.well-known/mercure?match=a")
        assert st == 401
        assert hd["www-authenticate"] == ('Bearer realm="mercure", resource_metadata='
                                          '"https://hub.example/.well-known/oauth-protected-resource/.well-known/mercure"')
        # Publish answers and streams carry the hub's Link.
        _, hd, _ = mpublish(h.port, [("topic", "a")], legacy(publish=["*"]))
        assert hd["link"] == f'<{HUB}>; rel="mercure"'
        s = MStream(h.port, [("match", "a")], {"Authorization": "Bearer " + legacy(subscribe=["a"])})
        assert s.headers["link"] == f'<{HUB}>; rel="mercure"'
        s.close()
        st, _, _ = request(h.port, "GET", "/.well-known/oauth-protected-resource/other")
        assert st == 404
        st, _, _ = request(h.port, "GET", "/.well-known/mercure/subscriptions",
                           headers={"Authorization": "Bearer " + legacy(subscribe=["*"])})
        assert st == 404


def test_mercure_active_subscriptions_events_and_api():
    with start("mercure_anonymous = on\nmercure_subscriptions = on\n") as h:
        subs_pattern = "/.well-known/mercure/subscriptions/:type/:match/:subscriber"
        watcher_token = access(["subscribe"], [(subs_pattern, "urlpattern"),
                                               ("/.well-known/mercure/subscriptions{/*}?", "urlpattern")])
        w = MStream(h.port, [("match_urlpattern", subs_pattern)], {"Authorization": "Bearer " + watcher_token})
        own = w.events(1)
        assert own[0]["event"] == "mercure" and json.loads(own[0]["data"])["match"] == subs_pattern
        s = MStream(h.port, [("match", "https://example.com/a b"), ("match_urlpattern", "https://example.com/:x")])
        got = [json.loads(e["data"]) for e in w.events(2)]
        assert {d["match_type"] for d in got} == {"exact", "urlpattern"}
        doc = next(d for d in got if d["match_type"] == "exact")
        subscriber = doc["subscriber"]
        assert subscriber.startswith("urn:uuid:") and doc["active"] is True and doc["type"] == "subscription"
        q = urllib.parse.quote
        assert doc["id"] == ("/.well-known/mercure/subscriptions/exact/" + q("https://example.com/a b", safe="")
                             + "/" + q(subscriber, safe=""))
        # The API: the collection, one matcher's, one subscription.
        auth = {"Authorization": "Bearer " + watcher_token}
        st, hd, body = request(h.port, "GET", "/.well-known/mercure/subscriptions", headers=auth)
        assert st == 200 and hd["content-type"] == "application/json", body
        coll = json.loads(body)
        assert coll["type"] == "subscriptions" and coll["id"] == "/.well-known/mercure/subscriptions"
        assert len(coll["subscriptions"]) == 3
        assert 'rel="mercure"; last-event-id="' in hd["link"]
        st, _, body = request(h.port, "GET", doc["id"], headers=auth)
        assert st == 200 and json.loads(body) == doc, body
        per = doc["id"].rsplit("/", 1)[0]
        st, _, body = request(h.port, "GET", per, headers=auth)
        assert st == 200 and [d["subscriber"] for d in json.loads(body)["subscriptions"]] == [subscriber]
        st, _, _ = request(h.port, "GET", per + "/urn%3Auuid%3Anone", headers=auth)
        assert st == 404
        st, _, _ = request(h.port, "GET", "/.well-known/mercure/subscriptions")
        assert st == 401
        st, _, _ = request(h.port, "GET", "/.well-known/mercure/subscriptions",
                           headers={"Authorization": "Bearer " + access(["subscribe"], [("x", "exact")])})
        assert st == 403
        # Closing ends both subscriptions, said by events.
        s.close()
        gone = [json.loads(e["data"]) for e in w.events(2)]
        assert [d["active"] for d in gone] == [False, False] and {d["subscriber"] for d in gone} == {subscriber}
        # Anonymous subscribers never see these private events.
        st, _, body = mpublish(h.port, [("topic", "/.well-known/mercure/subscriptions/x")], legacy(publish=["*"]),
                               expect=400)
        w.close()


def test_mercure_on_the_redis_log_publishes_and_keeps_subscription_events():
    with RedisServer() as r:
        with start("mercure_anonymous = on\nmercure_subscriptions = on\npublish_token = ptok\n", redis=r) as h:
            s = MStream(h.port, [("match", "chat/1")])
            assert s.status == 200
            st, _, made = mpublish(h.port, [("topic", "chat/1"), ("data", "x")], "ptok")
            n = publish(h.port, topic="chat/1", data="native", public=True, token="ptok")
            got = s.events(2)
            assert got[0] == {"id": made, "event": "message", "data": "x"}, got
            assert made_number(got[1]["id"]) == n and made_number(made) == n - 1, got
            assert made_identity(got[1]["id"]) == made_identity(made)
            # The subscription's opening is an event of the Redis log.
            wait_until(lambda: any(e["type"] == "mercure" for e in h.stored_events()), timeout=5,
                       what="the subscription event in the Redis stream")
            s.close()


def test_mercure_caps_before_the_token():
    with start("mercure_anonymous = on\nper_address_limit = 1\n") as h:
        s = MStream(h.port, [("match", "a")])
        assert s.status == 200
        # Past the cap: 429 whatever the token, which is never looked at.
        st, hd, _ = request(h.port, "GET", "/.well-known/mercure?match=a", headers={"Authorization": "Bearer x.y.z"})
        assert st == 429 and "retry-after" in hd
        s.close()
        # A refused token gives its place back.
        def opened():
            st, _, _ = request(h.port, "GET", "/.well-known/mercure?match=a",
                               headers={"Authorization": "Bearer x.y.z"})
            return st == 401
        wait_until(opened, what="the place given back")
        s2 = MStream(h.port, [("match", "a")])
        assert s2.status == 200
        s2.close()


def test_mercure_tokenless_publishing_only_from_this_host_not_from_a_page():
    tmp = tempfile.mkdtemp(prefix="herald-test-")
    with Herald(dir=tmp, config="mercure_anonymous = on\n") as h:
        _, _, id1 = mpublish(h.port, [("topic", "t"), ("data", "local")])
        assert id1.startswith("urn:uuid:")
        for hdrs in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"},
                     {"Host": "evil.example"}):
            st, _, body = mpublish(h.port, [("topic", "t")], headers=hdrs, expect=None)
            assert st == 403, (hdrs, st, body)
