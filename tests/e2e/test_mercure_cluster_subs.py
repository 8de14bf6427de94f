# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: the Mercure endpoint's active subscriptions on a cluster
(mercure_subscriptions = on, two herald nodes on one redis-server started
here). A subscription opened on node A is listed by node B's subscriptions
API (the collection, one matcher's, the single document); its close takes
it out of both lists; its open and close events reach watchers on both
nodes once each, appended by its node; a SIGKILLed node's subscriptions
leave every list within presence_ttl and their close events come once,
from a live node; a node paused past presence_ttl is swept likewise and,
running again, lists its subscriptions again (said open again by events);
the refusals (no token, a token that does not grant the path) are as on
one node; with Redis stopped the API answers 503 with Retry-After at once,
and with Redis hung once the answer is late, while the node answers other
requests; Redis back without its data is given the node's subscriptions
again (in HSETs of a few hundred); with workers on Redis each worker is a
share and any answers for all, and with workers on SQLite the group's
shared records answer for all, a killed worker's subscriptions closed
once by the live one; turned on by a reload, the list is the cluster's
all the same."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse

from harness import Herald, RedisServer, connect, request, wait_until
from test_mercure import HUB, SECRET, MStream, access
from test_workers import land_on

SUBS = "/.well-known/mercure/subscriptions"
SUBS_PATTERN = SUBS + "/:type/:match/:subscriber"
TTL_S = 2


def node(r, stream="msubs", extra="", subs="on"):
    tmp = tempfile.mkdtemp(prefix="herald-test-")
    with open(os.path.join(tmp, "secret"), "w") as f:
        f.write(SECRET)
    conf = ("jwt_algorithm = HS256\njwt_secret_file = %s\nmercure_url = %s\nmercure_anonymous = on\n"
            "mercure_subscriptions = %s\npresence_ttl = %ds\nper_address_limit = 0\npublish_token = ptok\n%s"
            % (os.path.join(tmp, "secret"), HUB, subs, TTL_S, extra))
    return Herald(dir=tmp, config=conf, redis=r, redis_stream=stream)


WATCHER = access(["subscribe"], [(SUBS_PATTERN, "urlpattern"), (SUBS + "{/*}?", "urlpattern")])
AUTH = {"Authorization": "Bearer " + WATCHER}


def listing(port, path=SUBS):
    """(status, headers, parsed body or None)."""
    st, hd, body = request(port, "GET", path, headers=AUTH)
    return st, hd, (json.loads(body) if st == 200 else None)


def subscribers(port, path=SUBS):
    st, _, doc = listing(port, path)
    assert st == 200, (st, doc)
    return sorted(d["subscriber"] for d in doc["subscriptions"])


def open_sub(port, match):
    s = MStream(port, [("match", match)])
    assert s.status == 200
    return s


def subscriber_of(port, match):
    """The subscriber id of the one subscription to match, as port lists it."""
    q = urllib.parse.quote
    wait_until(lambda: len(subscribers(port, f"{SUBS}/exact/{q(match, safe='')}")) == 1,
               what=f"{match}'s subscription listed")
    return subscribers(port, f"{SUBS}/exact/{q(match, safe='')}")[0]


def test_mercure_cluster_subscriptions_listed_by_every_node():
    q = urllib.parse.quote
    with RedisServer() as r:
        a, b = node(r), node(r)
        try:
            s = open_sub(a.port, "https://example.com/a b")
            t = open_sub(b.port, "room/1")
            sub_a = subscriber_of(b.port, "https://example.com/a b")
            sub_b = subscriber_of(a.port, "room/1")
            # The collection, on either node, holds both nodes' subscriptions.
            for n in (a, b):
                st, hd, doc = listing(n.port)
                assert st == 200 and hd["content-type"] == "application/json"
                assert doc["type"] == "subscriptions" and doc["id"] == SUBS
                assert sorted(d["subscriber"] for d in doc["subscriptions"]) == sorted([sub_a, sub_b])
                assert 'rel="mercure"; last-event-id="' in hd["link"]
            # One matcher's, and the single document, of A's subscription on B.
            per = f"{SUBS}/exact/{q('https://example.com/a b', safe='')}"
            st, _, doc = listing(b.port, per)
            assert [d["subscriber"] for d in doc["subscriptions"]] == [sub_a] and doc["id"] == per
            one = f"{per}/{q(sub_a, safe='')}"
            st, _, doc = listing(b.port, one)
            assert st == 200 and doc == {"id": one, "type": "subscription", "match_type": "exact",
                                         "match": "https://example.com/a b", "subscriber": sub_a,
                                         "active": True}, doc
            # Over h2c too: the stream waits for Redis' answer alone.
            out = subprocess.run(["curl", "-s", "-i", "--http2-prior-knowledge", "-H",
                                  "Authorization: " + AUTH["Authorization"], f"http://127.0.0.1:{b.port}{one}"],
                                 stdout=subprocess.PIPE, timeout=10).stdout.decode()
            assert out.startswith("HTTP/2 200") and json.loads(out.split("\r\n\r\n", 1)[1]) == doc, out
            # The same id percent-encoded otherwise names the same subscription.
            st, _, doc2 = listing(b.port, one.replace("%3A", "%3a"))
            assert st == 200 and doc2 == doc
            assert listing(b.port, f"{per}/urn%3Auuid%3Anone")[0] == 404
            assert listing(b.port, f"{SUBS}/other/x")[0] == 404
            assert listing(b.port, f"{SUBS}/exact")[0] == 404
            # The refusals, unchanged on a cluster.
            assert request(b.port, "GET", SUBS)[0] == 401
            st, _, _ = request(b.port, "GET", SUBS,
                               headers={"Authorization": "Bearer " + access(["subscribe"], [("x", "exact")])})
            assert st == 403
            # A close leaves both lists.
            s.close()
            for n in (a, b):
                wait_until(lambda: subscribers(n.port) == [sub_b], what="A's close on every node's list")
            t.close()
            for n in (a, b):
                wait_until(lambda: subscribers(n.port) == [], what="B's close on every node's list")
            # A clean stop with a subscription open takes it out of the list
            # as it closes, not at the node's expiry.
            u = open_sub(a.port, "open at the stop")
            subscriber_of(b.port, "open at the stop")
            a.stop()
            assert subscribers(b.port) == []
            u.sock.close()
            b.stop()
        finally:
            a.kill()
            b.kill()


test_mercure_cluster_subscriptions_listed_by_every_node.timeout = 60


def _about(w, subscriber, n, timeout=5.0):
    """The next n events on w about subscriber's subscriptions (others
    skipped), as (active) values; fewer on timeout."""
    out, deadline = [], time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for e in w.events(1, timeout=max(0.05, deadline - time.monotonic())):
            d = json.loads(e["data"])
            if d["subscriber"] == subscriber:
                out.append(d["active"])
    return out


def test_mercure_cluster_subscription_events_once_from_the_holding_node():
    """A subscription on A: its open and its close reach watchers on both
    nodes once each (A appends them; B appends none)."""
    with RedisServer() as r:
        a, b = node(r), node(r)
        try:
            wa = MStream(a.port, [("match_urlpattern", SUBS_PATTERN)], AUTH)
            wb = MStream(b.port, [("match_urlpattern", SUBS_PATTERN)], AUTH)
            assert wa.status == wb.status == 200
            s = open_sub(a.port, "ev/1")
            sub = subscriber_of(b.port, "ev/1")
            assert _about(wa, sub, 1) == [True] and _about(wb, sub, 1) == [True]
            s.close()
            assert _about(wa, sub, 1) == [False] and _about(wb, sub, 1) == [False]
            assert _about(wa, sub, 1, timeout=1.0) == [] and _about(wb, sub, 1, timeout=0.2) == []
            ids = [e for e in r.command("XRANGE", "{msubs}:events", "-", "+")]
            mine = [e for e in ids if sub.encode() in b"".join(x for x in e[1] if isinstance(x, bytes))]
            assert len(mine) == 2, mine  # one open, one close in the log
            wa.close()
            wb.close()
            a.stop()
            b.stop()
        finally:
            a.kill()
            b.kill()


test_mercure_cluster_subscription_events_once_from_the_holding_node.timeout = 60


def test_mercure_cluster_killed_node_subscriptions_closed_once():
    with RedisServer() as r:
        a, b, c = node(r), node(r), node(r)
        try:
            w = MStream(b.port, [("match_urlpattern", SUBS_PATTERN)], AUTH)
            assert w.status == 200
            assert len(w.events(1)) == 1  # its own
            victims = [open_sub(a.port, f"doomed/{i}") for i in range(3)]
            keep = open_sub(c.port, "kept")
            kept = subscriber_of(b.port, "kept")
            doomed = sorted(subscriber_of(b.port, f"doomed/{i}") for i in range(3))
            assert len(subscribers(b.port)) == 5  # the watcher's too
            opened = [json.loads(e["data"]) for e in w.events(4)]
            assert sorted(d["subscriber"] for d in opened if d["active"]) == sorted(doomed + [kept]), opened
            a.kill()
            t0 = time.monotonic()
            # Within presence_ttl (and a sweep), A's subscriptions leave every list; C's stay.
            for n in (b, c):
                wait_until(lambda: not set(subscribers(n.port)) & set(doomed), timeout=TTL_S + 1.5,
                           what="the killed node's subscriptions gone from the list")
            assert time.monotonic() - t0 < TTL_S + 1.5
            assert kept in subscribers(c.port)
            closed = [json.loads(e["data"]) for e in w.events(3, timeout=TTL_S + 3)]
            assert sorted(d["subscriber"] for d in closed) == doomed and not any(d["active"] for d in closed), \
                closed
            # Once across the cluster: no second close comes.
            assert w.events(1, timeout=2 * TTL_S) == []
            keep.close()
            w.close()
            for v in victims:
                v.sock.close()
            b.stop()
            c.stop()
        finally:
            for n in (a, b, c):
                n.kill()


test_mercure_cluster_killed_node_subscriptions_closed_once.timeout = 60


def test_mercure_cluster_node_taken_for_dead_opens_its_subscriptions_again():
    """A node paused for longer than presence_ttl (its connection to Redis
    open) is swept: its subscriptions leave the lists, closed by events;
    running again, its heartbeat finds it was taken for dead, its
    subscriptions are listed again and said open again by events."""
    with RedisServer() as r:
        a, b = node(r), node(r)
        try:
            w = MStream(b.port, [("match_urlpattern", SUBS_PATTERN)], AUTH)
            assert len(w.events(1)) == 1  # its own
            s = open_sub(a.port, "paused")
            sub = subscriber_of(b.port, "paused")
            assert [json.loads(e["data"])["active"] for e in w.events(1)] == [True]
            os.kill(a.proc.pid, signal.SIGSTOP)
            try:
                wait_until(lambda: sub not in subscribers(b.port), timeout=TTL_S + 1.5, what="A taken for dead")
                # Swept: the closes claimed, and a mark left for A.
                wait_until(lambda: len(r.command("KEYS", "{msubs}:presence:subs:swept:*")) == 1
                           and r.command("LLEN", "{msubs}:presence:subs:closing") == 0, what="A's closes claimed")
                closed = [json.loads(e["data"]) for e in w.events(1, timeout=TTL_S + 3)]
                assert [(d["subscriber"], d["active"]) for d in closed] == [(sub, False)], closed
            finally:
                os.kill(a.proc.pid, signal.SIGCONT)
            wait_until(lambda: sub in subscribers(b.port), timeout=TTL_S + 1, what="A's subscription listed again")
            a.wait_log(r"this node was taken for dead and its subscriptions closed by another; 1 opened again")
            assert r.command("KEYS", "{msubs}:presence:subs:swept:*") == []
            again = [json.loads(e["data"]) for e in w.events(1, timeout=3)]
            assert [(d["subscriber"], d["active"]) for d in again] == [(sub, True)], again
            s.close()
            wait_until(lambda: subscribers(b.port) == sorted(subscribers(b.port, SUBS + "/urlpattern/"
                                                                            + urllib.parse.quote(SUBS_PATTERN,
                                                                                                 safe=""))),
                       what="the close listed")
            w.close()
            a.stop()
            b.stop()
        finally:
            a.kill()
            b.kill()


test_mercure_cluster_node_taken_for_dead_opens_its_subscriptions_again.timeout = 60


def test_mercure_cluster_subscriptions_redis_stopped_answers_503_at_once():
    meta = "/.well-known/oauth-protected-resource/.well-known/mercure"
    with RedisServer() as r:
        a = node(r, extra="mercure_subscription_events = 0\n")  # 321 subscriptions from one address
        try:
            s = open_sub(a.port, "x")
            subscriber_of(a.port, "x")
            # A Redis that hangs with its connection open: 503 once the
            # answer is late, and the loop answers others meanwhile.
            os.kill(r.pid, signal.SIGSTOP)
            try:
                sock = connect(a.port)
                t0 = time.monotonic()
                sock.sendall(f"GET {SUBS} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {WATCHER}\r\n\r\n".encode())
                assert request(a.port, "GET", meta)[0] == 200
                head = sock.recv(65536).decode()
                assert head.startswith("HTTP/1.1 503") and "Retry-After: 1" in head, head
                assert 1.0 < time.monotonic() - t0 < 4.0
                sock.close()
            finally:
                os.kill(r.pid, signal.SIGCONT)
            wait_until(lambda: listing(a.port)[0] == 200, what="the answer with Redis back")
            # Redis stopped: 503 at once.
            r.kill()
            wait_until(lambda: listing(a.port)[0] == 503, what="the answer without Redis")
            t0 = time.monotonic()
            st, hd, _ = request(a.port, "GET", SUBS, headers=AUTH)
            assert st == 503 and hd["retry-after"] == "1" and 'rel="mercure"' in hd["link"]
            assert time.monotonic() - t0 < 1.0
            assert request(a.port, "GET", meta)[0] == 200
            # Back without its data: the node's subscriptions are written
            # again (more than one HSET's worth: five of 64 matchers, and x).
            many = [MStream(a.port, [("match", f"m/{k}/{i}") for i in range(64)]) for k in range(5)]
            assert all(m.status == 200 for m in many)
            shutil.rmtree(os.path.join(r.dir, "appendonlydir"), ignore_errors=True)
            r.start()
            wait_until(lambda: listing(a.port)[0] == 200 and len(listing(a.port)[2]["subscriptions"]) == 321,
                       timeout=15, what="the share written again after Redis came back")
            live = r.command("ZRANGE", "{msubs}:presence:nodes", 0, 0)[0].decode()
            assert r.command("PTTL", "{msubs}:presence:subs:node:" + live) > 0  # it expires with the node
            for m in many:
                m.close()
            s.close()
            wait_until(lambda: listing(a.port)[2]["subscriptions"] == [], what="every close")
            a.stop()
        finally:
            a.kill()


test_mercure_cluster_subscriptions_redis_stopped_answers_503_at_once.timeout = 60


def test_mercure_cluster_subscriptions_workers_one_answer():
    with RedisServer() as r:
        h = node(r, extra="workers = 2\n")
        try:
            subs = [open_sub(h.port, f"w/{i}") for i in range(6)]
            # Whichever worker answers (a new connection each), all six.
            for _ in range(8):
                wait_until(lambda: len(subscribers(h.port)) == 6, what="every worker's subscriptions")
            for s in subs:
                s.close()
            for _ in range(4):
                wait_until(lambda: subscribers(h.port) == [], what="every close")
            h.stop()
        finally:
            h.kill()


test_mercure_cluster_subscriptions_workers_one_answer.timeout = 60


def test_mercure_cluster_subscriptions_answer_capped():
    """An answer read from Redis holds at most 4,096 documents (the cut
    logged); one matcher's list is a range of each node's ids, exact."""
    q = urllib.parse.quote
    with RedisServer() as r:
        a, b = (node(r, extra="mercure_subscription_events = 0\n") for _ in range(2))
        try:
            subs = [MStream(a.port if k % 2 else b.port, [("match", f"c/{k}/{i}") for i in range(64)])
                    for k in range(65)]
            assert all(m.status == 200 for m in subs)
            def kept():
                return sum(r.command("HLEN", k) for k in r.command("KEYS", "{msubs}:presence:subs:node:*"))
            wait_until(lambda: kept() == 65 * 64, timeout=20, what="every subscription in Redis")
            assert len(listing(a.port)[2]["subscriptions"]) == 4096
            a.wait_log(r"a subscriptions answer \(/.well-known/mercure/subscriptions\) holds the first 4096 "
                       r"documents only")
            # One matcher's: its one subscription, whichever node holds it;
            # a match that starts another's ("c/1/1" and "c/1/10") is not it.
            for k, i in ((1, 1), (64, 63), (2, 10)):
                st, _, doc = listing(a.port, f"{SUBS}/exact/{q(f'c/{k}/{i}', safe='')}")
                assert st == 200 and [d["match"] for d in doc["subscriptions"]] == [f"c/{k}/{i}"], doc
            for m in subs:
                m.close()
            wait_until(lambda: listing(b.port)[2]["subscriptions"] == [], timeout=20, what="every close")
            a.stop()
            b.stop()
        finally:
            a.kill()
            b.kill()


test_mercure_cluster_subscriptions_answer_capped.timeout = 90


def test_mercure_cluster_subscriptions_turned_on_by_a_reload():
    """mercure_subscriptions off at the start and on after SIGHUP: the
    cluster's list all the same."""
    with RedisServer() as r:
        a, b = node(r, subs="off"), node(r, subs="off")
        try:
            for n in (a, b):
                assert listing(n.port)[0] == 404
                conf = os.path.join(n.dir, "herald.conf")
                with open(conf) as f:
                    text = f.read()
                with open(conf, "w") as f:
                    f.write(text.replace("mercure_subscriptions = off", "mercure_subscriptions = on"))
                n.signal(signal.SIGHUP)
                wait_until(lambda: listing(n.port)[0] == 200, what="the API on after the reload")
            s = open_sub(a.port, "after/reload")
            assert subscriber_of(b.port, "after/reload")
            s.close()
            a.stop()
            b.stop()
        finally:
            a.kill()
            b.kill()


test_mercure_cluster_subscriptions_turned_on_by_a_reload.timeout = 60


def _mopen_on(port, worker, params, headers=None, tries=60):
    """A Mercure subscription on `worker` (test_workers.land_on)."""
    def open_one():
        s = MStream(port, params, headers)
        assert s.status == 200, s.status
        return s
    return land_on(port, worker, open_one, lambda s: s.sock.close(), tries)


def test_mercure_workers_on_sqlite_one_answer_and_a_killed_worker_closed():
    """workers = 2 on SQLite: any worker answers for both (the group's
    shared records); a worker killed with SIGKILL has its subscriptions
    taken out of the list and closed by events, once, from the live
    worker."""
    tmp = tempfile.mkdtemp(prefix="herald-test-")
    with open(os.path.join(tmp, "secret"), "w") as f:
        f.write(SECRET)
    conf = ("jwt_algorithm = HS256\njwt_secret_file = %s\nmercure_url = %s\nmercure_anonymous = on\n"
            "mercure_subscriptions = on\nper_address_limit = 0\nworkers = 2\n" % (os.path.join(tmp, "secret"), HUB))
    with Herald(dir=tmp, config=conf, redis=None) as h:
        on0 = _mopen_on(h.port, 0, [("match", "w/0")])
        on1 = [_mopen_on(h.port, 1, [("match", f"w/1/{i}")]) for i in range(2)]
        dead = sorted(subscriber_of(h.port, f"w/1/{i}") for i in range(2))
        # The watcher, on the worker that stays (a stray one's events may
        # still come: only the dead worker's subscribers are looked at).
        w = _mopen_on(h.port, 0, [("match_urlpattern", SUBS_PATTERN)], AUTH)
        # A stray placement's close may still be on its way out of the list.
        wait_until(lambda: len(subscribers(h.port)) == 4, what="the four subscriptions listed")
        for _ in range(8):  # a new connection each: whichever worker answers, all four
            assert len(subscribers(h.port)) == 4
        _, _, body = request(h.port, "GET", "/metrics")
        pids = {int(k): int(p) for k, p in re.findall(r'^herald_worker_pid\{worker="(\d+)"\} (\d+)$', body.decode(),
                                                      re.M)}
        mark = h.log_size()
        os.kill(pids[1], signal.SIGKILL)
        h.wait_log(r"worker 1 \(pid %d\) was killed by signal 9" % pids[1], since=mark)
        wait_until(lambda: not set(subscribers(h.port)) & set(dead), what="the killed worker's subscriptions gone")
        closed, deadline = [], time.monotonic() + 3
        while len(closed) < 2 and time.monotonic() < deadline:
            closed += [d for d in (json.loads(e["data"]) for e in w.events(1, timeout=0.5)) if d["subscriber"] in dead]
        assert sorted(d["subscriber"] for d in closed) == dead and not any(d["active"] for d in closed), closed
        again = [json.loads(e["data"]) for e in w.events(10, timeout=1.0)]
        assert not [d for d in again if d["subscriber"] in dead], again  # once
        on0.close()
        wait_until(lambda: len(subscribers(h.port)) == 1, what="the watcher alone")
        for s in on1:
            s.sock.close()
        w.close()
        h.stop()


test_mercure_workers_on_sqlite_one_answer_and_a_killed_worker_closed.timeout = 60
