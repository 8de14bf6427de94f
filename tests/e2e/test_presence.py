# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: presence, GET /api/presence. A stream counts for every topic
its filter matches (a reader on room/* for room/1), once; subjects come only
from signed tokens; counts stay exact under open and close storms; the list
without a topic puts the most read first. Who may ask: presence_access local
(this host, not through a proxy), token (presence_token_file), any (counts
without subjects), and a signed token's presence claim (only the topics it
covers; 401 for a bad token, 403 outside the claim). With workers = 2 the
counts cover both workers, and a worker killed with SIGKILL takes its readers
out at once. Join and leave events, when on, go through the log on $presence/
topics: a reconnect within the grace is neither (to another worker too), the
leave comes after it, and they are resumable by id. Across nodes on Redis:
three nodes behind Caddy, one SIGKILLed (its readers leave within the TTL,
the others' counts never dip, its subject leaves), the debounce across
nodes, shares written again after Redis lost its data and by a node taken
for dead while paused, and a Sentinel failover followed."""
import json
import os
import re
import shutil
import signal
import tempfile
import time
import urllib.parse

from harness import Herald, Stream, request, stop_all, wait_until
from test_jwt import KEYS, claims, jwt_args, mint, signing_key
from test_workers import _open_on

READ = "read-token-for-presence-0123456789"
PRESENCE_TOKEN = "presence-token-0123456789abcdef"


def presence(port, topics=None, token=None, headers=None):
    """(status, parsed body) of GET /api/presence[?topic=...]."""
    target = "/api/presence"
    if topics:
        target += "?topic=" + urllib.parse.quote(",".join(topics), safe=",/*")
    h = dict(headers or {})
    if token:
        h["Authorization"] = f"Bearer {token}"
    st, _, body = request(port, "GET", target, headers=h)
    return st, json.loads(body)


def readers(port, topic, **kw):
    st, body = presence(port, [topic], **kw)
    assert st == 200, (st, body)
    return body["topics"][topic]["readers"]


def signed(sub=None, presence_claim=None, subscribe=("*",)):
    c = claims(sub=list(subscribe))
    if sub is not None:
        c["sub"] = sub
    if presence_claim is not None:
        c["presence"] = presence_claim
    return mint("HS256", signing_key("HS256"), c)


def open_streams(port, query, n, **kw):
    out = [Stream(port, query=query, **kw) for _ in range(n)]
    assert all(s.status == 200 for s in out), [s.status for s in out]
    return out


def close_all(streams):
    for s in streams:
        s.close()


def test_presence_counts_topics_patterns_and_the_top_list():
    with Herald(args=["--per-address-limit", "0"]) as h:
        a = open_streams(h.port, "topic=room/1", 3)
        b = open_streams(h.port, "topic=room/*,room/2", 2)  # room/2 is within room/*: counted once
        c = open_streams(h.port, "", 1)  # every topic
        d = open_streams(h.port, "topic=news,room/1/x", 1)
        st, body = presence(h.port, ["room/1", "room/2", "room/1/x", "news", "other", "room/*"])
        assert st == 200, body
        t = body["topics"]
        assert {k: v["readers"] for k, v in t.items()} == {
            "room/1": 6, "room/2": 3, "room/1/x": 4, "news": 2, "other": 1, "room/*": 3}, t
        # Without signed tokens nobody has a subject.
        assert t["room/1"]["subjects"] == [] and t["room/1"]["subjects_total"] == 0, t
        st, top = presence(h.port)
        assert st == 200
        listed = list(top["topics"].items())
        assert listed[0] == ("room/1", {"readers": 6}), listed
        assert [n["readers"] for _, n in listed] == sorted((n["readers"] for _, n in listed), reverse=True)
        assert set(top["topics"]) == {"room/1", "room/*", "*", "news", "room/1/x"}, top
        close_all(a)
        wait_until(lambda: readers(h.port, "room/1") == 3, what="three closes counted")
        close_all(b + c + d)
        wait_until(lambda: presence(h.port)[1] == {"topics": {}}, what="every close counted")
        # Bad requests name the parameter and what is wrong with it.
        many = ",".join(f"t{i}" for i in range(65))
        for target, said in (
                ("/api/presence?topic=a%20b", 'the topic parameter: "a b" is not a topic'),
                ("/api/presence?topics=", 'unknown query parameter "topics" (did you mean topic?)'),
                ("/api/presence?topics=a", 'unknown query parameter "topics" (did you mean topic?)'),
                ("/api/presence?room=a", 'unknown query parameter "room"; presence takes only topic'),
                ("/api/presence?topic=a,,b", "the topic parameter holds an empty topic"),
                ("/api/presence?topic=a%zz", "the topic parameter is not valid percent-encoding"),
                ("/api/presence?topic=" + many, "the topic parameter names more than 64 topics")):
            st, _, body = request(h.port, "GET", target)
            assert st == 400 and said in json.loads(body)["error"], (target, st, body)
        assert request(h.port, "POST", "/api/presence", body={})[0] == 405
        h.stop()


def test_presence_exact_under_open_and_close_storms():
    with Herald(args=["--per-address-limit", "0"]) as h:
        alive = []
        for rnd in range(4):
            alive += open_streams(h.port, "topic=storm/*", 60)
            alive += open_streams(h.port, "topic=storm/a", 20)
            # Close every third.
            gone, alive = alive[::3], [s for i, s in enumerate(alive) if i % 3]
            close_all(gone)
            want_a = len(alive)
            wait_until(lambda: readers(h.port, "storm/a") == want_a, timeout=10,
                       what=f"round {rnd}: {want_a} readers of storm/a")
        # Slow readers (not reading at all) count like the others.
        slow = open_streams(h.port, "topic=storm/a", 10, rcvbuf=4096)
        assert readers(h.port, "storm/a") == len(alive) + 10
        close_all(alive + slow)
        wait_until(lambda: readers(h.port, "storm/a") == 0, what="every close counted")
        h.stop()


def test_presence_off_counts_nothing():
    with Herald(args=["--presence", "off"]) as h:
        s = Stream(h.port, query="topic=x")
        st, _, body = request(h.port, "GET", "/api/presence?topic=x")
        assert st == 404, (st, body)
        s.close()
        h.stop()


def test_presence_access_local_token_any():
    with Herald() as h:
        s = Stream(h.port, query="topic=x")
        assert presence(h.port, ["x"])[0] == 200
        # Through a proxy (X-Forwarded-For from a trusted one): not local.
        st, body = presence(h.port, ["x"], headers={"X-Forwarded-For": "203.0.113.9"})
        assert st == 403 and "presence_access = local" in body["error"], body
        st, body = presence(h.port, ["x"], token="not-a-token")
        assert st == 403, body
        s.close()
        h.stop()
    d = tempfile.mkdtemp(prefix="herald-presence-")
    tf = os.path.join(d, "presence.token")
    with open(tf, "w") as f:
        f.write(PRESENCE_TOKEN + "\n")
    with Herald(args=["--presence-access", "token", "--presence-token-file", tf]) as h:
        s = Stream(h.port, query="topic=x")
        st, body = presence(h.port, ["x"])
        assert st == 403, body
        assert presence(h.port, ["x"], token="wrong")[0] == 403
        st, body = presence(h.port, ["x"], token=PRESENCE_TOKEN)
        assert st == 200 and body["topics"]["x"]["readers"] == 1, body
        s.close()
        h.stop()
    with Herald(args=["--presence-access", "any", "--read-token", READ] + jwt_args("HS256")) as h:
        s1 = Stream(h.port, query="topic=x", headers={"Authorization": "Bearer " + signed(sub="user-1")})
        s2 = Stream(h.port, query="topic=x", headers={"Authorization": "Bearer " + READ})
        st, body = presence(h.port, ["x"], headers={"X-Forwarded-For": "203.0.113.9"})
        # Anyone may count; subjects are personal data, not shown to anyone.
        assert st == 200 and body == {"topics": {"x": {"readers": 2}}}, body
        close_all([s1, s2])
        h.stop()
    # presence_access = token without a token is a configuration error.
    h = Herald(args=["--presence-access", "token"], wait=False)
    assert h.proc.wait(timeout=10) != 0
    assert "presence_access" in h.log()


def test_presence_signed_tokens_claim_and_subjects():
    with Herald(args=["--read-token", READ, "--per-address-limit", "0"] + jwt_args("HS256")) as h:
        bob = Stream(h.port, query="topic=room/1", headers={"Authorization": "Bearer " + signed(sub="bob")})
        al1 = Stream(h.port, query="topic=room/*", headers={"Authorization": "Bearer " + signed(sub="alice")})
        al2 = Stream(h.port, query="topic=room/1", headers={"Authorization": "Bearer " + signed(sub="alice")})
        anon = Stream(h.port, query="topic=room/1")
        rt = Stream(h.port, query="topic=room/1", headers={"Authorization": "Bearer " + READ})
        nosub = Stream(h.port, query="topic=news", headers={"Authorization": "Bearer " + signed()})
        asker = signed(presence_claim=["room/*"])
        st, body = presence(h.port, ["room/1"], token=asker)
        assert st == 200, body
        assert body["topics"]["room/1"] == {"readers": 5, "subjects": ["alice", "bob"], "subjects_total": 2}, body
        # Nobody learns about topics the claim does not cover.
        st, body = presence(h.port, ["news"], token=asker)
        assert st == 403 and "presence claim" in body["error"], body
        st, body = presence(h.port, ["room/1", "news"], token=asker)
        assert st == 403, body
        st, top = presence(h.port, token=asker)
        assert st == 200 and set(top["topics"]) == {"room/1", "room/*"}, top
        # A token without a presence claim, a forged one, an expired one.
        st, body = presence(h.port, ["room/1"], token=signed())
        assert st == 403, body
        st, body = presence(h.port, ["room/1"], token=asker[:-3] + "AAA")
        assert st == 401, body
        expired = mint("HS256", signing_key("HS256"), dict(claims(ttl=-3600), presence=["*"]))
        assert presence(h.port, ["room/1"], token=expired)[0] == 401
        # Locally, everything, subjects too (no subject without a signed token's sub).
        st, body = presence(h.port, ["news"])
        assert body["topics"]["news"] == {"readers": 1, "subjects": [], "subjects_total": 0}, body
        close_all([al1, al2])
        wait_until(lambda: presence(h.port, ["room/1"], token=asker)[1]["topics"]["room/1"]["subjects"] == ["bob"],
                   what="alice's streams closed")
        close_all([bob, anon, rt, nosub])
        h.stop()


def test_presence_workers_exact_and_a_killed_worker_leaves_at_once():
    with Herald(config="workers = 2\nper_address_limit = 0\n") as h:
        on0 = [_open_on(h.port, 0, query="topic=w/1") for _ in range(3)]
        on1 = [_open_on(h.port, 1, query="topic=w/*") for _ in range(4)]
        for _ in range(6):  # whichever worker answers, the same count
            assert readers(h.port, "w/1") == 7
            assert readers(h.port, "w/2") == 4
        on0.pop().close()
        wait_until(lambda: readers(h.port, "w/1") == 6, what="a close on worker 0 counted")
        _, _, body = request(h.port, "GET", "/metrics")
        pids = {int(w): int(p) for w, p in re.findall(r'^herald_worker_pid\{worker="(\d+)"\} (\d+)$', body.decode(),
                                                      re.M)}
        mark = h.log_size()
        os.kill(pids[1], signal.SIGKILL)
        h.wait_log(r"worker 1 \(pid %d\) was killed by signal 9" % pids[1], since=mark)
        # Dropped when the main process reaped it: the first answer is exact.
        assert readers(h.port, "w/1") == 2
        assert readers(h.port, "w/2") == 0
        close_all(on0 + on1)
        wait_until(lambda: readers(h.port, "w/1") == 0, what="the last closes")
        h.stop()


def _presence_events(s, n, timeout=5.0):
    return [(e["event"], json.loads(e["data"])) for e in s.events(n, timeout=timeout)]


def test_presence_join_and_leave_events_debounced_and_resumable():
    args = ["--read-token", READ, "--presence-events", "on", "--presence-grace", "1s"] + jwt_args("HS256")
    with Herald(args=args) as h:
        watch = Stream(h.port, query="topic=%24presence/*", headers={"Authorization": "Bearer " + READ})
        # A public reader of every topic does not see them: they are private.
        public = Stream(h.port)
        tok = signed(sub="carol")
        c1 = Stream(h.port, query="topic=room/1", headers={"Authorization": "Bearer " + tok})
        evs = _presence_events(watch, 1)
        assert evs == [("presence.join", {"action": "join", "topic": "room/1", "subject": "carol"})], evs
        # A second stream, then a reconnect within the grace: nothing.
        c2 = Stream(h.port, query="topic=room/1", headers={"Authorization": "Bearer " + tok})
        c1.close()
        c2.close()
        c3 = Stream(h.port, query="topic=room/1", headers={"Authorization": "Bearer " + tok})
        assert _presence_events(watch, None, timeout=2.0) == []
        # Anonymous streams are never joins.
        anon = Stream(h.port, query="topic=room/1")
        c3.close()
        t0 = time.monotonic()
        evs = _presence_events(watch, 1, timeout=5.0)
        assert evs == [("presence.leave", {"action": "leave", "topic": "room/1", "subject": "carol"})], evs
        assert time.monotonic() - t0 >= 0.8, "the leave came before the grace"
        assert public.events(timeout=0.3) == []
        # Durable and resumable: from id 0 both are read again.
        again = Stream(h.port, query="topic=%24presence/room/1&last_event_id=0",
                       headers={"Authorization": "Bearer " + READ})
        assert [e for e, _ in _presence_events(again, 2)] == ["presence.join", "presence.leave"]
        # A token granted the namespace reads them; one without is refused.
        granted = signed(subscribe=["$presence/*"])
        g = Stream(h.port, query="topic=%24presence/*&last_event_id=0", headers={"Authorization": "Bearer " + granted})
        assert g.status == 200 and len(g.events(2)) == 2
        refused = Stream(h.port, query="topic=%24presence/*", headers={"Authorization": "Bearer " + signed(
            subscribe=["room/*"])})
        assert refused.status == 403
        # Nobody may publish there.
        st, _, body = request(h.port, "POST", "/api/events",
                              body={"type": "x", "topic": "$presence/room/1", "data": "forged"})
        assert st == 400 and b"topic" in body, (st, body)
        close_all([watch, public, anon, again, g, refused])
        h.stop()


def test_presence_events_wait_out_a_locked_database():
    import sqlite3
    args = ["--read-token", READ, "--presence-events", "on", "--presence-grace", "1s"] + jwt_args("HS256")
    with Herald(args=args) as h:
        watch = Stream(h.port, query="topic=%24presence/*", headers={"Authorization": "Bearer " + READ})
        # Another program holds the write lock while a subject opens: the
        # join waits for it and is stored once it is free, not lost.
        db = sqlite3.connect(h.db, timeout=0, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        s = Stream(h.port, query="topic=busy", headers={"Authorization": "Bearer " + signed(sub="gus")})
        assert _presence_events(watch, None, timeout=1.0) == []
        db.execute("COMMIT")
        db.close()
        evs = _presence_events(watch, 1, timeout=5)
        assert evs == [("presence.join", {"action": "join", "topic": "busy", "subject": "gus"})], evs
        wait_until(lambda: "could not be stored yet" in h.log(), what="the wait logged")
        close_all([watch, s])
        h.stop()


def test_presence_events_across_workers_and_a_killed_worker():
    args = ["--read-token", READ, "--presence-events", "on", "--presence-grace", "1s"] + jwt_args("HS256")
    with Herald(config="workers = 2\nper_address_limit = 0\n", args=args) as h:
        # On the worker that stays.
        watch = _open_on(h.port, 0, query="topic=%24presence/*", headers={"Authorization": "Bearer " + READ})
        tok = {"Authorization": "Bearer " + signed(sub="finn")}
        a = _open_on(h.port, 0, query="topic=lobby", headers=tok)
        assert _presence_events(watch, 1) == [("presence.join", {"action": "join", "topic": "lobby",
                                                                 "subject": "finn"})]
        # Moving to the other worker within the grace: neither a leave nor a join.
        b = _open_on(h.port, 1, query="topic=lobby", headers=tok)
        a.close()
        assert _presence_events(watch, None, timeout=2.0) == []
        # Its worker killed: out of the count at once, a leave after the grace.
        _, _, body = request(h.port, "GET", "/metrics")
        pids = {int(w): int(p) for w, p in re.findall(r'^herald_worker_pid\{worker="(\d+)"\} (\d+)$', body.decode(),
                                                      re.M)}
        mark = h.log_size()
        os.kill(pids[1], signal.SIGKILL)
        h.wait_log(r"worker 1 \(pid %d\) was killed by signal 9" % pids[1], since=mark)
        assert readers(h.port, "lobby") == 0
        t0 = time.monotonic()
        evs = _presence_events(watch, 1, timeout=5)
        assert evs == [("presence.leave", {"action": "leave", "topic": "lobby", "subject": "finn"})], evs
        assert time.monotonic() - t0 >= 0.5, "the leave came before the grace"
        close_all([watch, b])
        h.stop()


# ---------------------------------------------------------------- across nodes on Redis


def _cluster(r, n, extra=()):
    # A short heartbeat: a stream whose client left Caddy ends at the next write.
    args = ["--per-address-limit", "0", "--heartbeat-interval", "1s", "--presence-token", PRESENCE_TOKEN,
            "--presence-ttl", "3s",
            "--presence-events", "on", "--presence-grace", "1s", "--read-token", READ] + jwt_args("HS256")
    return [Herald(redis=r, redis_stream="presence", args=args + list(extra)) for _ in range(n)]


def _cluster_readers(node, topic):
    st, body = presence(node.port, [topic], token=PRESENCE_TOKEN)
    assert st == 200, (st, body)
    return body["topics"][topic]["readers"]


def _cluster_readers_or_none(node, topic):
    st, body = presence(node.port, [topic], token=PRESENCE_TOKEN)
    return body["topics"][topic]["readers"] if st == 200 else None


def _local_readers(node):
    return json.loads(request(node.port, "GET", "/api/health")[2])["readers"]


def test_presence_cluster_three_nodes_behind_caddy_one_killed():
    from harness import RedisServer
    from test_cluster import ClusterCaddy
    with RedisServer() as r:
        nodes = _cluster(r, 3)
        try:
            with ClusterCaddy([f"127.0.0.1:{n.port}" for n in nodes]) as c:
                streams = [Stream(c.port, query="topic=room/1", headers={"Host": f"127.0.0.1:{c.port}"})
                           for _ in range(30)]
                assert all(s.status == 200 for s in streams)
                victim, survivors = nodes[0], nodes[1:]
                # A subject on the node that will be killed, and a watcher of joins and leaves.
                watch = Stream(survivors[0].port, query="topic=%24presence/*",
                               headers={"Authorization": "Bearer " + READ})
                erin = Stream(victim.port, query="topic=room/1",
                              headers={"Authorization": "Bearer " + signed(sub="erin")})
                assert [e for e, _ in _presence_events(watch, 1)] == ["presence.join"]
                per_node = [_local_readers(n) for n in nodes]
                assert sum(per_node) == 32 and all(k > 0 for k in per_node), per_node  # the watcher too
                # Any node answers for the cluster.
                for n in nodes:
                    wait_until(lambda: _cluster_readers(n, "room/1") == 31, what="the cluster's count")
                left = 31 - per_node[0]
                victim.kill()
                t0 = time.monotonic()
                seen = []
                # Its readers leave within the TTL; the others' never dip.
                while True:
                    k = _cluster_readers(survivors[0], "room/1")
                    seen.append(k)
                    assert k >= left, f"the survivors' count dipped to {k} (theirs: {left}): {seen}"
                    if k == left:
                        break
                    assert time.monotonic() - t0 < 3.0 + 1.5, f"the killed node's readers stayed: {seen}"
                    time.sleep(0.05)
                assert _cluster_readers(survivors[1], "room/1") == left
                # Its subject leaves once its share expired and the grace passed.
                evs = _presence_events(watch, 1, timeout=6)
                assert evs == [("presence.leave", {"action": "leave", "topic": "room/1", "subject": "erin"})], evs
                close_all([watch, erin])
                for s in streams:
                    s.close()
                wait_until(lambda: _cluster_readers(survivors[1], "room/1") == 0, timeout=8,
                           what=f"every close counted (node readers {[_local_readers(n) for n in survivors]}, "
                           f"cluster {_cluster_readers(survivors[1], 'room/1')})")
        finally:
            for n in nodes:
                n.kill()


test_presence_cluster_three_nodes_behind_caddy_one_killed.timeout = 60


def test_presence_cluster_debounce_across_nodes_and_share_after_redis_restart():
    from harness import RedisServer
    with RedisServer() as r:
        a, b = _cluster(r, 2)
        try:
            watch = Stream(a.port, query="topic=%24presence/*", headers={"Authorization": "Bearer " + READ})
            tok = signed(sub="dora")
            s1 = Stream(a.port, query="topic=room/9", headers={"Authorization": "Bearer " + tok})
            assert _presence_events(watch, 1) == [
                ("presence.join", {"action": "join", "topic": "room/9", "subject": "dora"})]
            # A rolling restart: the stream moves to the other node within the grace.
            s1.close()
            s2 = Stream(b.port, query="topic=room/9", headers={"Authorization": "Bearer " + tok})
            assert _presence_events(watch, None, timeout=2.5) == [], "a reconnect to another node was a leave"
            st, body = presence(a.port, ["room/9"], token=PRESENCE_TOKEN)
            assert body["topics"]["room/9"]["subjects"] == ["dora"], body
            # Redis comes back without its data: each node writes its share again.
            r.kill()
            shutil.rmtree(os.path.join(r.dir, "appendonlydir"), ignore_errors=True)
            r.start()
            wait_until(lambda: _cluster_readers_or_none(a, "room/9") == 1, timeout=15,
                       what="the nodes' shares written again")
            s2.close()
            evs = [e for e, _ in _presence_events(watch, None, timeout=4)]
            assert "presence.leave" in evs, evs
            wait_until(lambda: _cluster_readers_or_none(b, "room/9") == 0, what="the close counted")
            close_all([watch])
        finally:
            a.kill()
            b.kill()


test_presence_cluster_debounce_across_nodes_and_share_after_redis_restart.timeout = 60


def _check_outage_said_once(log, dead_port, new_port):
    """The log of a node over a failover: the loss said once (a retry on
    the dead primary is no news), and a link said to be back only once a
    command went through on it, on the new primary, once."""
    lost = re.findall(r"presence: lost Redis at .*", log)
    back = re.findall(r"presence: Redis at .* is back.*", log)
    assert len(lost) <= 1, f"{len(lost)} 'lost' lines over one outage:\n{log[-3000:]}"
    assert len(back) == 1 and f":{new_port} " in back[0], f"'back' lines: {back}\n{log[-3000:]}"
    store_lost = re.findall(r"redis: (?:lost the event log|cannot reach the event log|connecting to).*", log)
    store_back = re.findall(r"redis: the event log at .* is back.*", log)
    assert len(store_lost) <= 1, f"the store's link: {len(store_lost)} lines of loss:\n{log[-3000:]}"
    assert len(store_back) == 1 and f":{new_port} " in store_back[0], f"{store_back}\n{log[-3000:]}"


def test_presence_redis_outage_said_once_with_backoff():
    """Redis down for a while, over TCP (a refused connection is learnt
    after the connect) and over a unix socket (refused at once): each link
    says the loss once, spaces out its tries more and more (at debug
    level), and says once that Redis is back, when it answers again."""
    from harness import RedisServer
    for unix in (False, True):
        with RedisServer(unix=unix) as r:
            h = Herald(redis=r, redis_stream="outage",
                       args=["--log-level", "debug", "--presence-token", PRESENCE_TOKEN])
            try:
                _outage_said_once(h, r)
            finally:
                h.kill()


def _outage_said_once(h, r):
    s = Stream(h.port, query="topic=a")
    wait_until(lambda: _cluster_readers_or_none(h, "a") == 1, what="the count on Redis")
    at = len(h.log())
    r.kill()
    # The store's own tries (at debug level) pace the wait: four of them
    # take 1.5 s, fifteen tries at a fixed 100 ms.
    wait_until(lambda: len(re.findall(r"redis: .*; trying again in", h.log()[at:])) >= 4, timeout=20,
               what=f"the store to try four times:\n{h.log()[at:][-2000:]}")
    r.start()
    wait_until(lambda: _cluster_readers_or_none(h, "a") == 1, timeout=20, what="the count on Redis again")
    wait_until(lambda: "redis: the event log at" in h.log()[at:], what="the store back")
    log = h.log()[at:]
    for name, lost_re, back_re, waits_re in (
            ("presence", r"warning: presence: .*", r"presence: Redis at \S+ is back.*",
             r"presence: Redis at .*; trying again in (\d+) ms"),
            ("the store", r"warning: redis: .*", r"redis: the event log at .* is back.*",
             r"redis: .*; trying again in (\d+) ms")):
        lost = re.findall(lost_re, log)
        back = re.findall(back_re, log)
        assert len(lost) == 1 and len(back) == 1, f"{name}: {len(lost)} warnings, {len(back)} backs:\n" + "\n".join(lost + back)
        assert log.index(lost[0]) < log.index(back[0]), log[-3000:]
        waits = [int(w) for w in re.findall(waits_re, log)]
        assert len(waits) >= 2 and all(b == min(2 * a, 5000) for a, b in zip(waits, waits[1:])), (name, waits)
    s.close()


test_presence_redis_outage_said_once_with_backoff.timeout = 60


def test_presence_cluster_follows_a_sentinel_failover():
    from test_sentinel import MASTER, _primary_replica_sentinels
    procs = []
    try:
        primary, replica, sentinels, listing = _primary_replica_sentinels(procs)
        nodes = []
        for _ in range(2):
            nodes.append(Herald(redis=None, redis_stream="pfailover",
                                args=["--redis-sentinels", listing, "--redis-master-name", MASTER,
                                      "--redis-stream", "pfailover", "--per-address-limit", "0",
                                      "--presence-token", PRESENCE_TOKEN, "--presence-ttl", "3s"]))
            procs.append(nodes[-1])
        for n in nodes:
            wait_until(n.log_ok, timeout=10, what="herald to reach the primary Sentinel names")
        streams = [Stream(n.port, query="topic=f/1") for n in nodes for _ in range(2)]
        for n in nodes:
            wait_until(lambda: _cluster_readers_or_none(n, "f/1") == 4, what="the cluster's count")
        since = [len(n.log()) for n in nodes]
        primary.kill()
        # The replica is promoted; the nodes follow, and count there.
        for n in nodes:
            wait_until(lambda: _cluster_readers_or_none(n, "f/1") == 4, timeout=40, interval=0.2,
                       what="the count on the new primary")
        for n, at in zip(nodes, since):
            # The event log's link says it is back on its own time, which
            # on a busy machine may come after presence's.
            wait_until(lambda: re.search(r"redis: the event log at .* is back", n.log()[at:]), timeout=20,
                       what="the event log's link back")
            _check_outage_said_once(n.log()[at:], primary.port, replica.port)
        # Closes counted on the new primary (a node still on the old one, or
        # on a demoted one, could not take them out).
        close_all(streams)
        for n in nodes:
            wait_until(lambda: _cluster_readers_or_none(n, "f/1") == 0, what="the closes counted")
    finally:
        stop_all(procs)


test_presence_cluster_follows_a_sentinel_failover.timeout = 120


def test_presence_cluster_node_taken_for_dead_writes_its_share_again():
    """A node that stops answering for longer than the TTL (paused, not
    killed: its connection to Redis stays open) is swept by the others, its
    counts gone; once it runs again its heartbeat finds it was taken for
    dead and it writes its share again, without a new connection."""
    from harness import RedisServer
    with RedisServer() as r:
        a, b = _cluster(r, 2)
        try:
            s = Stream(a.port, query="topic=room/5")
            wait_until(lambda: _cluster_readers(b, "room/5") == 1, what="A's reader counted on B")
            os.kill(a.proc.pid, signal.SIGSTOP)
            try:
                wait_until(lambda: _cluster_readers(b, "room/5") == 0, timeout=3.0 + 2, what="A taken for dead")
                # Swept: A's entry is gone, not only expired.
                wait_until(lambda: r.command("ZCARD", "{presence}:presence:nodes") == 1, what="A swept")
            finally:
                os.kill(a.proc.pid, signal.SIGCONT)
            wait_until(lambda: _cluster_readers(b, "room/5") == 1, timeout=3.0, what="A's share written again")
            s.close()
            wait_until(lambda: _cluster_readers(b, "room/5") == 0, what="the close counted")
            a.stop()
            b.stop()
        finally:
            a.kill()
            b.kill()


test_presence_cluster_node_taken_for_dead_writes_its_share_again.timeout = 60
