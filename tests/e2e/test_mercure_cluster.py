# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: the Mercure endpoint on herald nodes that share one Redis
log (a redis-server this test starts on loopback).

An update published on one node reaches the other node's subscribers,
public and private, with the publisher's ids; a subscriber of either node
resumes from a publisher's id (the map of Mercure ids lives in Redis,
beside the stream, trimmed with it), also after its node was killed with
SIGKILL, on a node started afterwards, and after Sentinel promoted the
replica. Idempotency-Key holds across
nodes on the Mercure publish as on POST /api/events (and on one SQLite
node too); an id given twice, on two nodes, keeps naming the earliest
update and the node that stored the later one says so. A resume lookup
while Redis is gone is refused with 503 at once, never a stream opened
without its resume point.
"""
import os
import signal
import tempfile
import time
import urllib.parse

from harness import Herald, RedisServer, connect, publish, request, stop_all, wait_until
from test_mercure import HUB, SECRET, MStream, access, legacy, made_number, mpublish

STREAM = "mercurecluster"


def node(redis, extra="", stream=STREAM):
    """A herald on redis with HS256 tokens and the hub URL set."""
    tmp = tempfile.mkdtemp(prefix="herald-test-")
    with open(os.path.join(tmp, "secret"), "w") as f:
        f.write(SECRET)
    conf = ("jwt_algorithm = HS256\njwt_secret_file = %s\nmercure_url = %s\nmercure_anonymous = on\n%s"
            % (os.path.join(tmp, "secret"), HUB, extra))
    return Herald(dir=tmp, config=conf, redis=redis, redis_stream=stream)


def test_an_update_published_on_one_node_reaches_the_other_with_its_ids():
    pub = legacy(publish=["*"])
    reader = access(["subscribe"], [("https://example.com/private/:id", "urlpattern")])
    with RedisServer() as r, node(r) as a, node(r) as b:
        public = MStream(a.port, [("match", "https://example.com/books/1")])
        private = MStream(a.port, [("match_urlpattern", "https://example.com/private/:id")],
                          {"Authorization": "Bearer " + reader})
        anonymous = MStream(a.port, [("match_urlpattern", "https://example.com/private/:id")])
        assert public.status == private.status == anonymous.status == 200
        _, _, made = mpublish(b.port, [("topic", "https://example.com/books/1"), ("data", "one"), ("type", "book"),
                                       ("retry", "700")], pub)
        assert made.startswith("urn:uuid:") and len(made) == 45, made
        _, _, given = mpublish(b.port, [("topic", "https://example.com/books/1"), ("topic", "urn:alt:1"),
                                        ("data", "two"), ("id", "urn:example:r2")], pub)
        assert given == "urn:example:r2"
        _, _, secret = mpublish(b.port, [("topic", "https://example.com/private/7"), ("data", "s"), ("private", "on"),
                                         ("id", "urn:example:s1")], pub)
        assert public.events(2) == [{"id": made, "event": "book", "retry": "700", "data": "one"},
                                    {"id": given, "event": "message", "data": "two"}]
        assert private.events(1) == [{"id": "urn:example:s1", "event": "message", "data": "s"}]
        # A row of herald's own API reaches Mercure subscribers with the id
        # made from its number and the log (the same on every node).
        n = publish(b.port, topic="https://example.com/books/1", data="native", public=True)
        native = public.events(1)
        assert made_number(native[0]["id"]) == n and native[0]["data"] == "native", native
        assert native[0]["id"][:22] == made[:22], (native, made)
        # The anonymous subscriber never sees the private update.
        assert anonymous.events(1, timeout=0.5) == []
        # Resuming on A from B's ids: after the event the id names; the
        # alternate topic matches as the canonical one does.
        again = MStream(a.port, [("match", "urn:alt:1"), ("match", "https://example.com/books/1")],
                        {"Last-Event-ID": made})
        assert again.headers["mercure-last-event-id"] == made
        assert [e["id"] for e in again.events(2)] == [given, native[0]["id"]]
        alt = MStream(a.port, [("match", "urn:alt:1"), ("lastEventID", "earliest")])
        assert [e["data"] for e in alt.events(1)] == ["two"]
        # A private update's id is told only to a subscriber that may see it.
        hidden = MStream(a.port, [("match", "*"), ("lastEventID", "urn:example:s1")])
        assert hidden.headers["mercure-last-event-id"] == "earliest"
        seen = MStream(a.port, [("match_urlpattern", "https://example.com/private/:id"),
                                ("lastEventID", "urn:example:s1")], {"Authorization": "Bearer " + reader})
        assert seen.headers["mercure-last-event-id"] == "urn:example:s1"
        # An id no update carries: from now on, said as earliest.
        unknown = MStream(b.port, [("match", "*"), ("lastEventID", "urn:example:none")])
        assert unknown.headers["mercure-last-event-id"] == "earliest"
        mpublish(a.port, [("topic", "https://example.com/books/1"), ("data", "after")], pub)
        assert [e["data"] for e in unknown.events(1)] == ["after"]
        # Each update is one entry of the one log, its block beside it.
        stored = [e for e in a.stored_events() if e["type"] != "mercure"]
        assert [e["data"] for e in stored] == ["one", "two", "s", "native", "after"]
        for s in (public, private, anonymous, again, alt, hidden, seen, unknown):
            s.close()


def test_a_subscriber_resumes_from_a_publisher_id_after_its_node_is_killed():
    pub = legacy(publish=["*"])
    with RedisServer() as r, node(r) as b:
        a = node(r)
        try:
            s = MStream(a.port, [("match", "https://example.com/room")])
            for i in range(3):
                mpublish(b.port, [("topic", "https://example.com/room"), ("data", f"m{i}"), ("id", f"urn:room:{i}")],
                         pub)
            got = s.events(3)
            assert [e["id"] for e in got] == ["urn:room:0", "urn:room:1", "urn:room:2"]
            a.proc.send_signal(signal.SIGKILL)
            a.proc.wait()
        finally:
            a.kill()
        s.close()
        # Published while the subscriber's node is gone.
        for i in range(3, 5):
            mpublish(b.port, [("topic", "https://example.com/room"), ("data", f"m{i}"), ("id", f"urn:room:{i}")], pub)
        # It comes back on the other node with the last id it saw...
        back = MStream(b.port, [("match", "https://example.com/room")], {"Last-Event-ID": "urn:room:2"})
        assert back.headers["mercure-last-event-id"] == "urn:room:2"
        assert [e["data"] for e in back.events(2)] == ["m3", "m4"]
        back.close()
        # ...and on a node started afterwards, which reads the map in Redis.
        with node(r) as c:
            late = MStream(c.port, [("match", "https://example.com/room")], {"Last-Event-ID": "urn:room:3"})
            assert late.headers["mercure-last-event-id"] == "urn:room:3"
            assert [e["data"] for e in late.events(1)] == ["m4"]
            late.close()


def idempotent_publishes(first, second, log):
    """The Idempotency-Key rules on the Mercure publish: first and second
    are the ports of the nodes (the same one on SQLite); log the store's
    events."""
    pub = legacy(publish=["*"])
    s = MStream(first, [("match", "https://example.com/orders")])
    form = [("topic", "https://example.com/orders"), ("data", "order 1")]
    key = {"Idempotency-Key": '"order-1"'}
    _, _, one = mpublish(first, form, pub, headers=key)
    # The retry (on the other node) is answered with the same id, and
    # nothing is stored twice.
    _, _, retry = mpublish(second, form, pub, headers=key)
    assert one == retry and one.startswith("urn:uuid:"), (one, retry)
    # The same key with another body is a conflict.
    st, hd, body = mpublish(second, [("topic", "https://example.com/orders"), ("data", "order 2")], pub, headers=key,
                            expect=422)
    assert "with another request body" in body, body
    assert 'rel="mercure"' in hd.get("link", ""), hd
    # A publisher's own id is answered again too.
    key2 = {"Idempotency-Key": '"order-2"'}
    form2 = [("topic", "https://example.com/orders"), ("data", "order 2"), ("id", "urn:order:2")]
    assert mpublish(first, form2, pub, headers=key2)[2] == "urn:order:2"
    assert mpublish(second, form2, pub, headers=key2)[2] == "urn:order:2"
    # Another publisher's same key is its own.
    other = legacy(publish=["https://example.com/orders"])
    _, _, theirs = mpublish(second, form, other, headers=key)
    assert theirs != one
    assert [e["id"] for e in s.events(3)] == [one, "urn:order:2", theirs]
    assert s.events(1, timeout=0.3) == []
    assert [e["data"] for e in log() if e["type"] != "mercure"] == ["order 1", "order 2", "order 1"]
    # A malformed key is refused before anything else.
    st, hd, body = mpublish(first, form, pub, headers={"Idempotency-Key": "no-quotes"}, expect=400)
    assert "Idempotency-Key" in body and 'rel="mercure"' in hd.get("link", ""), (body, hd)
    s.close()


def test_idempotency_key_on_the_mercure_publish_across_nodes():
    with RedisServer() as r, node(r) as a, node(r) as b:
        idempotent_publishes(a.port, b.port, a.stored_events)


def test_idempotency_key_on_the_mercure_publish_on_sqlite():
    tmp = tempfile.mkdtemp(prefix="herald-test-")
    with open(os.path.join(tmp, "secret"), "w") as f:
        f.write(SECRET)
    conf = ("jwt_algorithm = HS256\njwt_secret_file = %s\nmercure_url = %s\nmercure_anonymous = on\n"
            % (os.path.join(tmp, "secret"), HUB))
    with Herald(dir=tmp, config=conf, redis=None) as h:
        idempotent_publishes(h.port, h.port, h.stored_events)


def test_an_id_given_on_two_nodes_names_the_earliest_and_the_later_node_says_so():
    pub = legacy(publish=["*"])
    with RedisServer() as r, node(r) as a, node(r) as b:
        mpublish(a.port, [("topic", "https://example.com/t"), ("data", "first"), ("id", "urn:twice")], pub)
        since = b.log_size()
        mpublish(b.port, [("topic", "https://example.com/t"), ("data", "second"), ("id", "urn:twice")], pub)
        b.wait_log(r"update id urn:twice already names event \d+, which keeps it", since=since)
        mpublish(b.port, [("topic", "https://example.com/t"), ("data", "third")], pub)
        s = MStream(b.port, [("match", "https://example.com/t")], {"Last-Event-ID": "urn:twice"})
        got = s.events(2)
        assert [(e["id"], e["data"]) for e in got][:1] == [("urn:twice", "second")], got
        assert [e["data"] for e in got] == ["second", "third"], got
        s.close()


def test_the_map_of_ids_is_trimmed_with_the_stream():
    pub = legacy(publish=["*"])
    with RedisServer() as r, node(r, "retention_count = 5\n") as a:
        for i in range(12):
            mpublish(a.port, [("topic", "https://example.com/t"), ("data", str(i)), ("id", f"urn:t:{i}")], pub)

        def trimmed():
            with r.client() as c:
                names = c.command("ZRANGE", "{%s}:mercure" % STREAM, "0", "-1")
            return names if len(names) <= 5 else None

        names = wait_until(trimmed, timeout=20, what="the Mercure map trimmed to the stream's retention")
        assert [n.decode() if isinstance(n, bytes) else n for n in names] == [f"urn:t:{i}" for i in range(7, 12)]
        # An id retention removed names nothing: from now on.
        s = MStream(a.port, [("match", "*"), ("lastEventID", "urn:t:1")])
        assert s.headers["mercure-last-event-id"] == "earliest"
        s.close()
        s = MStream(a.port, [("match", "*"), ("lastEventID", "urn:t:9")])
        assert s.headers["mercure-last-event-id"] == "urn:t:9"
        assert [e["data"] for e in s.events(2)] == ["10", "11"]
        s.close()


def test_a_resume_lookup_without_redis_is_refused_at_once():
    pub = legacy(publish=["*"])
    with RedisServer() as r, node(r) as a:
        mpublish(a.port, [("topic", "https://example.com/t"), ("data", "x"), ("id", "urn:t:x")], pub)
        r.stop()
        wait_until(lambda: request(a.port, "GET", "/api/health")[0] == 503, timeout=10,
                   what="herald to see Redis gone")
        t0 = time.monotonic()
        st, hd, body = request(a.port, "GET", "/.well-known/mercure?match=*&lastEventID=urn:t:x")
        assert st == 503 and hd.get("retry-after") == "1", (st, body)
        assert b"resume point" in body and time.monotonic() - t0 < 3, body
        assert "rel=\"mercure\"" in hd.get("link", "")
        a.wait_log(r"the resume point urn:t:x could not be looked up")
        # Without a resume point the subscription opens (it waits for the log).
        s = MStream(a.port, [("match", "*")])
        assert s.status == 200
        s.close()
        r.start()


def test_a_publisher_id_survives_a_sentinel_failover():
    """The map of ids is Redis data like the stream: replicated with it, so
    after Sentinel promotes the replica a subscriber still resumes from a
    publisher's id, and publishing goes on."""
    from test_sentinel import MASTER, _primary_replica_sentinels
    pub = legacy(publish=["*"])
    procs = []
    try:
        primary, replica, sentinels, listing = _primary_replica_sentinels(procs)
        tmp = tempfile.mkdtemp(prefix="herald-test-")
        with open(os.path.join(tmp, "secret"), "w") as f:
            f.write(SECRET)
        conf = ("jwt_algorithm = HS256\njwt_secret_file = %s\nmercure_url = %s\nmercure_anonymous = on\n"
                "redis_wait_replicas = 1\n" % (os.path.join(tmp, "secret"), HUB))
        h = Herald(dir=tmp, config=conf, redis=None, redis_stream="mfailover",
                   args=["--redis-sentinels", listing, "--redis-master-name", MASTER, "--redis-stream", "mfailover"])
        procs.append(h)
        wait_until(lambda: request(h.port, "GET", "/api/health")[0] == 200, timeout=10, what="herald on the primary")
        for i in range(3):
            mpublish(h.port, [("topic", "https://example.com/fo"), ("data", f"d{i}"), ("id", f"urn:fo:{i}")], pub)
        primary.kill()
        since = h.log_size()
        h.wait_log(r"moved", timeout=30, since=since)

        def published():
            st, _, body = mpublish(h.port, [("topic", "https://example.com/fo"), ("data", "d3"), ("id", "urn:fo:3")],
                                   pub, expect=None)
            return st == 200 and body == "urn:fo:3"

        wait_until(published, timeout=20, interval=0.2, what="a publish on the promoted replica")
        s = MStream(h.port, [("match", "https://example.com/fo")], {"Last-Event-ID": "urn:fo:1"})
        assert s.headers["mercure-last-event-id"] == "urn:fo:1"
        assert [e["data"] for e in s.events(2)] == ["d2", "d3"]
        s.close()
    finally:
        stop_all(procs)


test_a_publisher_id_survives_a_sentinel_failover.timeout = 90


def test_a_resume_lookup_over_http2_waits_on_its_stream_alone():
    """Over h2c the stream whose resume id is being looked up waits for the
    answer and opens with its resume point."""
    from test_http2 import CurlStream
    pub = legacy(publish=["*"])
    with RedisServer() as r, node(r) as a, node(r) as b:
        for i in range(3):
            mpublish(b.port, [("topic", "https://example.com/h2"), ("data", f"d{i}"), ("id", f"urn:h2:{i}")], pub)
        q = "match=" + urllib.parse.quote("https://example.com/h2", safe="")
        s = CurlStream(f"http://127.0.0.1:{a.port}/.well-known/mercure?{q}", "--http2-prior-knowledge", "-i",
                       "-H", "Last-Event-ID: urn:h2:0")
        try:
            wait_until(lambda: "data: d2" in s.text(), timeout=10, what="the events after urn:h2:0 over h2c")
            text = s.text()
            assert text.startswith("HTTP/2 200"), text
            assert "mercure-last-event-id: urn:h2:0" in text.lower(), text
            assert text.index("data: d1") < text.index("data: d2") and "data: d0" not in text, text
        finally:
            s.close()


def test_a_subscriber_that_leaves_during_its_lookup_gives_its_place_back():
    """Redis is paused (SIGSTOP) while a subscription's resume id is looked
    up; the client leaves. Its place among the caps is free at once (another
    subscription from the same address opens under per_address_limit = 1),
    and the answer that comes after Redis resumes is dropped cleanly."""
    pub = legacy(publish=["*"])
    with RedisServer() as r, node(r, "per_address_limit = 1\n") as a:
        mpublish(a.port, [("topic", "https://example.com/p"), ("data", "x"), ("id", "urn:p:1")], pub)
        r.proc.send_signal(signal.SIGSTOP)
        try:
            waiting = connect(a.port)
            waiting.sendall(b"GET /.well-known/mercure?match=*&lastEventID=urn:p:1 HTTP/1.1\r\nHost: x\r\n\r\n")
            # The cap counts it while it waits.
            wait_until(lambda: request(a.port, "GET", "/.well-known/mercure?match=*")[0] == 429, timeout=5,
                       what="the waiting subscription to hold the address's place")
            waiting.close()

            def admitted():
                try:
                    s = MStream(a.port, [("match", "*")], timeout=2)
                except AssertionError:
                    return None
                if s.status != 200:
                    s.close()
                    return None
                return s

            s = wait_until(admitted, timeout=5, what="the place given back")
        finally:
            r.proc.send_signal(signal.SIGCONT)
        # Redis may have been judged gone meanwhile (an answer overdue):
        # publishes are 503 until the node is back.
        wait_until(lambda: mpublish(a.port, [("topic", "https://example.com/p"), ("data", "after")], pub,
                                    expect=None)[0] == 200, timeout=15, interval=0.2, what="a publish after Redis resumed")
        assert [e["data"] for e in s.events(1)] == ["after"]
        s.close()
