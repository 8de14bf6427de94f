# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: presence counts Mercure readers. A subscriber of
/.well-known/mercure counts from its stream's opening to its close under its
exact matchers' topics (a topic herald's rule refuses under the name its
updates' rows carry, "$mercure/" and the topic's SHA-256) and under "*" when
it asked for every topic, with the "sub" of its token as its subject; URL
patterns are not counted. GET /api/presence asks for a Mercure topic with
mercure_topic= (any topic the protocol allows, commas included) and answers
under the topic as asked; the mapped name works through topic= too. Joins
and leaves follow herald's readers' rules. HTTP/2 streams count out when
reset or when their connection drops; with presence off subscribers are
served uncounted. With workers the group answers as one, and across two
nodes on one Redis a reader on A is counted by B."""
import hashlib
import json
import urllib.parse

from harness import Herald, RedisServer, Stream, request, wait_until
from test_mercure import MStream, legacy, mint, start
from test_workers import land_on

READ = "read-token-for-presence-mercure-0123"
PRESENCE_TOKEN = "presence-token-mercure-0123456789"
LONG = "https://example.com/books/" + "x" * 120  # over 128 bytes: not a herald topic
ODD = "https://example.com/a b,c?x=1"  # a space, a comma, a query: not a herald topic


def mapped(topic):
    return "$mercure/" + hashlib.sha256(topic.encode()).hexdigest()


def subscriber(sub, subscribe=("*",)):
    """A Mercure token in the older claim style with a subject."""
    return mint({"sub": sub, "mercure": {"publish": [], "subscribe": list(subscribe)}})


def msub(port, params, sub=None, token=None):
    headers = {"Authorization": "Bearer " + (token or subscriber(sub))} if (sub or token) else None
    s = MStream(port, params, headers=headers)
    assert s.status == 200, (s.status, s.buf)
    return s


def ask(port, topics=(), mercure_topics=(), token=None):
    """(status, parsed body) of GET /api/presence with topic= and mercure_topic=."""
    q = []
    if topics:
        q.append("topic=" + urllib.parse.quote(",".join(topics), safe=",/*"))
    q += ["mercure_topic=" + urllib.parse.quote(t, safe="") for t in mercure_topics]
    h = {"Authorization": "Bearer " + token} if token else {}
    st, _, body = request(port, "GET", "/api/presence" + ("?" + "&".join(q) if q else ""), headers=h)
    return st, json.loads(body)


def answer(port, topic=None, mercure_topic=None, **kw):
    st, body = ask(port, [topic] if topic else (), [mercure_topic] if mercure_topic else (), **kw)
    assert st == 200, (st, body)
    return body["topics"][topic or mercure_topic]


def close_all(streams):
    for s in streams:
        s.close()


def test_presence_mercure_readers_topics_subjects_and_closes():
    with start("mercure_anonymous = on\nper_address_limit = 0\n") as h:
        anon = msub(h.port, [("match", "room/1")])
        alice = msub(h.port, [("match", "room/1"), ("topic", "room/1")], sub="alice")  # counted once
        bob = msub(h.port, [("match_exact", LONG), ("match", ODD)], sub="bob")
        carol = msub(h.port, [("match", "room/1"), ("match", "*")], sub="carol")  # "*" covers room/1
        nosub = msub(h.port, [("match", LONG)], token=legacy(subscribe=["*"]))  # a token without "sub"
        pattern = msub(h.port, [("match_urlpattern", "https://example.com/books/:id")], sub="dan")
        native = Stream(h.port, query="topic=room/*")  # herald's own reader beside them
        assert native.status == 200
        r1 = answer(h.port, "room/1")
        assert r1 == {"readers": 4, "subjects": ["alice", "carol"], "subjects_total": 2}, r1
        # The same counts asked as a Mercure topic, and the long and odd
        # topics under their own text or under the mapped name.
        assert answer(h.port, mercure_topic="room/1") == r1
        long_ = answer(h.port, mercure_topic=LONG)
        assert long_ == {"readers": 3, "subjects": ["bob", "carol"], "subjects_total": 2}, long_
        assert answer(h.port, mapped(LONG)) == long_
        odd = answer(h.port, mercure_topic=ODD)
        assert odd == {"readers": 2, "subjects": ["bob", "carol"], "subjects_total": 2}, odd
        # Several at once, both parameters; each answered under what was asked.
        st, body = ask(h.port, ["room/1", "*"], [LONG, ODD, "https://example.com/books/1"])
        assert st == 200, body
        assert {k: v["readers"] for k, v in body["topics"].items()} == {
            "room/1": 4, "*": 1, LONG: 3, ODD: 2, "https://example.com/books/1": 1}, body
        # A URL pattern is counted under nothing: the list of what streams
        # read names the exact topics (mapped) and "*", never the pattern.
        st, top = ask(h.port)
        assert set(top["topics"]) == {"room/1", "*", "room/*", mapped(LONG), mapped(ODD)}, top
        # Counts drop as the streams close.
        close_all([alice, carol])
        wait_until(lambda: answer(h.port, "room/1") == {"readers": 2, "subjects": [], "subjects_total": 0},
                   what="alice's and carol's closes counted")
        assert answer(h.port, mercure_topic=LONG)["subjects"] == ["bob"]
        close_all([anon, bob, nosub, pattern, native])
        wait_until(lambda: ask(h.port)[1] == {"topics": {}}, what="every close counted")
        # Refusals name the parameter; herald's topic parameter keeps its rule.
        for target, said in (
                ("/api/presence?mercure_topic=*", 'the mercure_topic parameter: "*" is the wildcard matcher'),
                ("/api/presence?mercure_topic=", 'the mercure_topic parameter: "" is not a Mercure topic'),
                ("/api/presence?mercure_topic=a%01b", "is not a Mercure topic"),
                ("/api/presence?mercure_topic=a%zz", "the mercure_topic parameter is not valid percent-encoding"),
                ("/api/presence?topic=" + urllib.parse.quote(ODD, safe=""), "a Mercure topic goes in mercure_topic"),
                ("/api/presence?mercure_topics=a", 'unknown query parameter "mercure_topics" (did you mean '
                                                   'mercure_topic?)'),
                ("/api/presence?topic=a&" + "&".join("mercure_topic=m%d" % i for i in range(64)),
                 "more than 64 topics asked (topic and mercure_topic together)")):
            st, _, body = request(h.port, "GET", target)
            assert st == 400 and said in json.loads(body)["error"], (target, st, body)
        h.stop()


def test_presence_mercure_claim_covers_the_mapped_names():
    with start("mercure_anonymous = on\n") as h:
        s = msub(h.port, [("match", LONG), ("match", "https://example.com/books/1")], sub="erin")
        # A presence claim is in herald's patterns: $mercure/* covers the
        # mapped names, a URL-like prefix the topics herald's rule takes.
        mapped_only = mint({"presence": ["$mercure/*"]})
        assert answer(h.port, mercure_topic=LONG, token=mapped_only)["subjects"] == ["erin"]
        st, body = ask(h.port, mercure_topics=["https://example.com/books/1"], token=mapped_only)
        assert st == 403 and "presence claim" in body["error"], body
        books = mint({"presence": ["https://example.com/books/*"]})
        assert answer(h.port, mercure_topic="https://example.com/books/1", token=books)["readers"] == 1
        assert ask(h.port, mercure_topics=[LONG], token=books)[0] == 403
        # Stopped with the subscriber counted: its registration goes with
        # its stream, before the registry (a clean exit, nothing leaked).
        h.stop()
        s.close()


def test_presence_mercure_http2_streams_reset_and_dropped():
    import struct
    from test_http2 import CANCEL, RST_STREAM, H2Raw
    with start("mercure_anonymous = on\n") as h:
        c = H2Raw(h.port)
        try:
            path = "/.well-known/mercure?" + urllib.parse.urlencode([("match", LONG)])
            ivy = c.request(path, extra=[("authorization", "Bearer " + subscriber("ivy"))])
            jo = c.request(path, extra=[("authorization", "Bearer " + subscriber("jo"))])
            wait_until(lambda: answer(h.port, mercure_topic=LONG)["subjects"] == ["ivy", "jo"],
                       what="two streams of one connection counted")
            c.send(RST_STREAM, 0, ivy, struct.pack(">I", CANCEL))
            wait_until(lambda: answer(h.port, mercure_topic=LONG)["subjects"] == ["jo"], what="the reset counted out")
            assert jo not in c.resets
        finally:
            c.close()
        wait_until(lambda: answer(h.port, mercure_topic=LONG)["readers"] == 0, what="the connection's close")
        h.stop()


def test_presence_off_mercure_subscribers_still_served():
    with start("mercure_anonymous = on\npresence = off\n") as h:
        s = msub(h.port, [("match", LONG), ("match", "*")], sub="hal")
        assert request(h.port, "GET", "/api/presence")[0] == 404
        n = json.loads(request(h.port, "GET", "/api/health")[2])["readers"]
        assert n == 1, n
        s.close()
        wait_until(lambda: json.loads(request(h.port, "GET", "/api/health")[2])["readers"] == 0, what="the close")
        h.stop()


def _events(s, n, timeout=5.0):
    return [(e["event"], json.loads(e["data"])) for e in s.events(n, timeout=timeout)]


def test_presence_mercure_join_and_leave_events():
    with start("mercure_anonymous = on\npresence_events = on\npresence_grace = 1s\nread_token = %s\n" % READ) as h:
        watch = Stream(h.port, query="topic=%24presence/*", headers={"Authorization": "Bearer " + READ})
        tok = subscriber("finn")
        a = msub(h.port, [("match", LONG), ("match", "room/7")], token=tok)
        evs = sorted(_events(watch, 2), key=lambda e: e[1]["topic"])
        assert evs == [("presence.join", {"action": "join", "topic": mapped(LONG), "subject": "finn"}),
                       ("presence.join", {"action": "join", "topic": "room/7", "subject": "finn"})], evs
        # A reconnect within the grace is neither a leave nor a join, and an
        # anonymous subscriber never joins.
        b = msub(h.port, [("match", LONG)], token=tok)
        a.close()
        anon = msub(h.port, [("match", LONG)])
        evs = _events(watch, None, timeout=3.0)
        # room/7 is left (b does not read it); LONG is not.
        assert evs == [("presence.leave", {"action": "leave", "topic": "room/7", "subject": "finn"})], evs
        b.close()
        evs = _events(watch, 1)
        assert evs == [("presence.leave", {"action": "leave", "topic": mapped(LONG), "subject": "finn"})], evs
        # Read through $presence/*: a "$" inside a pattern is not herald's rule.
        alone = Stream(h.port, query="topic=%24presence/%24mercure/*", headers={"Authorization": "Bearer " + READ})
        assert alone.status == 400, alone.status
        close_all([watch, anon, alone])
        h.stop()


def _msub_on(port, worker, params, sub):
    """A Mercure subscriber on `worker` (test_workers.land_on)."""
    return land_on(port, worker, lambda: msub(port, params, sub=sub), lambda s: s.close())


def test_presence_mercure_workers_answer_as_one():
    with start("mercure_anonymous = on\nworkers = 2\nper_address_limit = 0\n") as h:
        on0 = [_msub_on(h.port, 0, [("match", LONG)], "w0-%d" % i) for i in range(2)]
        on1 = [_msub_on(h.port, 1, [("match", LONG)], "w1-%d" % i) for i in range(3)]
        for _ in range(6):  # whichever worker answers, the whole group's count
            got = answer(h.port, mercure_topic=LONG)
            assert got["readers"] == 5 and got["subjects"] == ["w0-0", "w0-1", "w1-0", "w1-1", "w1-2"], got
        close_all(on0 + on1[:1])
        wait_until(lambda: answer(h.port, mercure_topic=LONG)["subjects"] == ["w1-1", "w1-2"],
                   what="closes on both workers")
        close_all(on1[1:])
        wait_until(lambda: answer(h.port, mercure_topic=LONG)["readers"] == 0, what="the last closes")
        h.stop()


def test_presence_mercure_cluster_reader_on_a_counted_by_b():
    with RedisServer() as r:
        extra = ["--presence-token", PRESENCE_TOKEN, "--presence-ttl", "3s", "--per-address-limit", "0"]
        a = start("mercure_anonymous = on\n", redis=r, redis_stream="pmercure", args=extra)
        b = start("mercure_anonymous = on\n", redis=r, redis_stream="pmercure", args=extra)
        try:
            s = msub(a.port, [("match", LONG), ("match", "room/3")], sub="gail")
            t = msub(b.port, [("match", "room/3")])

            def on_b(topic=None, mercure_topic=None):
                st, body = ask(b.port, [topic] if topic else (), [mercure_topic] if mercure_topic else (),
                               token=PRESENCE_TOKEN)
                return body["topics"][topic or mercure_topic] if st == 200 else None

            wait_until(lambda: on_b(mercure_topic=LONG) == {"readers": 1, "subjects": ["gail"], "subjects_total": 1},
                       what="A's Mercure reader counted by B")
            wait_until(lambda: (on_b("room/3") or {}).get("readers") == 2, what="both nodes' readers of room/3")
            s.close()
            wait_until(lambda: on_b(mercure_topic=LONG) == {"readers": 0, "subjects": [], "subjects_total": 0},
                       what="its close counted on B")
            t.close()
            a.stop()
            b.stop()
        finally:
            a.kill()
            b.kill()


test_presence_mercure_cluster_reader_on_a_counted_by_b.timeout = 60


def test_presence_full_table_said_once_per_stream_and_second():
    # A subscription of 64 exact topics with a subject takes 128 keys: 8
    # fill a table of 1024. Those past it are served uncounted, and the log
    # says so in a line a second at most, not a line per key.
    with start("mercure_anonymous = on\npresence_max_keys = 1024\nper_address_limit = 0\n") as h:
        subs = [msub(h.port, [("match", "t/%d/%d" % (i, k)) for k in range(64)], sub="s%d" % i) for i in range(8)]
        assert answer(h.port, "t/7/63")["subjects"] == ["s7"]
        mark = h.log_size()
        more = [msub(h.port, [("match", "u/%d/%d" % (i, k)) for k in range(64)], sub="u%d" % i) for i in range(3)]
        assert answer(h.port, "u/0/0")["readers"] == 0
        wait_until(lambda: "the table is full" in h.log()[mark:], what="the full table said")
        lines = [ln for ln in h.log()[mark:].splitlines() if "the table is full" in ln]
        assert 1 <= len(lines) <= 3, (len(lines), lines[:3])
        close_all(subs + more)
        wait_until(lambda: ask(h.port)[1] == {"topics": {}}, what="every close counted")
        h.stop()
