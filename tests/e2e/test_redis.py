# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: what the Redis Streams log does that SQLite's does not.

Every test starts its own redis-server (harness.RedisServer, AOF on) and
herald with `redis_url` pointing at it: events published with FCALL
herald_publish reach readers in order under the ids the call returned, and
land as stream entries <n>-0 with their fields, in the database the URL
names; two nodes on one Redis share one id space; while Redis is away
publishes get 503 with Retry-After, streams stay open with heartbeats and
health and metrics say so, and once it is back nothing is missed or
repeated; a Redis restarted mid-flow (SIGTERM, AOF) loses no acknowledged
event; a Redis back without its data never makes an id name two events;
herald does not start without its Redis; retention trims the stream and a
resume point below it gets a reset; `herald --redis-function` is the
library Redis loads; an entry added with XADD is no event, never moves the
counter, is logged once per run and removed, while an older herald's
unmarked entries stay events; the URL forms (a database, a unix socket, a password
that is never shown) and the keys from the environment; with
redis_wait_replicas a 201 means the replica has the event."""
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time

import harness
from harness import (Herald, HttpConn, RedisServer, Stream, check_refusal, publish, publish_many, request,
                     wait_until)


def _ev(i, data, type="message"):
    return {"id": i, "event": type, "data": data}


def _health(port):
    st, hd, body = request(port, "GET", "/api/health")
    return st, hd, json.loads(body)


def _metric(port, name):
    st, _, body = request(port, "GET", "/metrics")
    assert st == 200, (st, body)
    m = re.search(rb"^%s(?:\{[^}]*\})? (\S+)$" % re.escape(name.encode()), body, re.M)
    assert m, f"no {name} in /metrics:\n{body.decode(errors='replace')}"
    return float(m.group(1))


def _events_exactly(s, want, what, timeout=10.0):
    """Read len(want) events from s and compare (ids, types, data); then
    check nothing else arrives for a moment (no duplicate after them)."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < len(want) and time.monotonic() < deadline:
        got += s.events(len(want) - len(got), timeout=max(0.05, deadline - time.monotonic()))
    assert got == want, f"{what}: got {len(got)} events {[e['id'] for e in got][:30]}, " \
                        f"expected {[e['id'] for e in want][:30]}; first difference " + \
        str(next(((k, a, b) for k, (a, b) in enumerate(zip(got, want)) if a != b), None))
    extra = s.events(timeout=0.3)
    assert extra == [], f"{what}: events after the expected ones: {extra}"


def _want(stored):
    return [{"id": e["id"], "event": e["type"], "data": e["data"]} for e in stored]


def test_redis_fcall_publish_reaches_readers_in_order():
    # A database other than 0 in the URL: herald's keys and the FCALL's
    # are there, and nothing lands in database 0.
    with RedisServer() as r, Herald(redis=r, redis_db=2, args=["--read-token", "rt"]) as h:
        public = Stream(h.port)
        private = Stream(h.port, headers={"Authorization": "Bearer rt"})
        for s in (public, private):
            assert s.status == 200, s.status
            s.opening()
        first = h.insert_many([("a.t", "x", "one", True), ("b.t", "y", "two\nlines", False),
                               ("c.t", "x", "three", True)])
        assert first >= 1, first
        _events_exactly(private, [_ev(first, "one", "a.t"), _ev(first + 1, "two\nlines", "b.t"),
                                  _ev(first + 2, "three", "c.t")], "reader with the read token")
        _events_exactly(public, [_ev(first, "one", "a.t"), _ev(first + 2, "three", "c.t")], "public reader")
        # herald's own publish takes the next id of the same counter.
        n = publish(h.port, type="d.t", topic="x", data="four")
        assert n == first + 3, (n, first)
        _events_exactly(public, [_ev(n, "four", "d.t")], "public reader after a POST")
        # As stored: entries <n>-0 with the contract's fields.
        events_key, last_key = RedisServer.keys(h.redis_stream)
        with r.client() as c:
            c.command("SELECT", 2)
            entries = c.command("XRANGE", events_key, "-", "+")
            assert [e[0] for e in entries] == [b"%d-0" % i for i in range(first, first + 4)], entries
            fields = {entries[1][1][k].decode(): entries[1][1][k + 1] for k in range(0, len(entries[1][1]), 2)}
            assert set(fields) == {"type", "topic", "data", "public", "time", "id"}, fields
            assert fields["id"] == b"%d" % (first + 1), fields
            assert (fields["type"], fields["topic"], fields["data"], fields["public"]) == \
                (b"b.t", b"y", b"two\nlines", b"0"), fields
            assert fields["time"].isdigit(), fields
            assert int(c.command("GET", last_key)) == first + 3
            c.command("SELECT", 0)
            assert c.command("EXISTS", events_key, last_key) == 0, "herald's keys are in database 0 as well"
        public.close()
        private.close()


def test_redis_unix_socket_url():
    with RedisServer(unix=True) as r, Herald(redis=r, redis_db=1) as h:
        assert r.url_for(1).startswith("unix:/") and r.url_for(1).endswith("?db=1")
        s = Stream(h.port)
        s.opening()
        a = publish(h.port, data="posted")
        b = h.insert(data="fcall")
        assert b == a + 1, (a, b)
        _events_exactly(s, [_ev(a, "posted"), _ev(b, "fcall")], "reader")
        assert [e["id"] for e in h.stored_events()] == [a, b]
        s.close()


def test_redis_keys_from_environment_and_db_ignored():
    # HERALD_REDIS_URL and the default redis_stream ("herald": the keys
    # {herald}:events and {herald}:last); the db key is then not used.
    with RedisServer() as r:
        with Herald(redis=None, env={"HERALD_REDIS_URL": r.url}) as h:
            s = Stream(h.port)
            s.opening()
            a = publish(h.port, data="via env")
            b = r.publish("herald", [("message", "news", "via fcall", True)])
            assert b == a + 1, (a, b)
            _events_exactly(s, [_ev(a, "via env"), _ev(b, "via fcall")], "reader")
            assert [e["id"] for e in r.stored_events("herald")] == [a, b]
            st, _, health = _health(h.port)
            assert st == 200 and health["log"] == "ok" and health["last_id"] == b, health
            s.close()
        assert not os.path.exists(h.db), "herald created the SQLite database although redis_url was set"


def test_redis_password_in_url_is_used_and_never_shown():
    secret = "pw-" + os.urandom(6).hex()
    with RedisServer(password=secret) as r:
        assert secret in r.url
        with Herald(redis=r) as h:
            s = Stream(h.port)
            s.opening()
            a = publish(h.port, data="authenticated")
            b = h.insert(data="fcall")
            _events_exactly(s, [_ev(a, "authenticated"), _ev(b, "fcall")], "reader")
            s.close()
        assert secret not in h.log(), "herald logged the Redis password"
        # --check-config lists the settings; the password is not among them.
        out = subprocess.run([harness.HERALD_BIN, "--redis-url", r.url, "--check-config"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=30)
        text = out.stdout.decode(errors="replace")
        assert out.returncode == 0 and "redis_url" in text and secret not in text, text


def test_redis_config_errors_name_the_key():
    for url in ("http://127.0.0.1:6379", "redis://127.0.0.1:notaport", "redis://127.0.0.1:6379/x", "unix:"):
        r = subprocess.run([harness.HERALD_BIN, "--redis-url", url, "--check-config"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30)
        out = r.stdout.decode(errors="replace")
        assert r.returncode == 1 and "redis_url" in out, f"--redis-url {url!r}: exit {r.returncode}:\n{out}"
    for bad in ("-1", "x"):
        r = subprocess.run([harness.HERALD_BIN, "--redis-url", "redis://127.0.0.1:6379", "--redis-wait-replicas", bad,
                            "--check-config"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        out = r.stdout.decode(errors="replace")
        assert r.returncode == 1 and "redis_wait_replicas" in out, f"redis_wait_replicas {bad}: {out}"


def test_redis_two_nodes_share_one_id_space():
    with RedisServer() as r, Herald(redis=r, redis_stream="shared") as a, \
            Herald(redis=r, redis_stream="shared") as b:
        readers = [Stream(n.port, timeout=10) for n in (a, b) for _ in range(3)]
        for s in readers:
            assert s.status == 200
            s.opening()
        acked = []
        errors = []
        lock = threading.Lock()

        def post(node, tag):
            try:
                ids = publish_many(node.port, [{"type": tag, "topic": "news", "data": f"{tag}-{k}", "public": True}
                                               for k in range(100)], window=4)
                with lock:
                    acked.extend(ids)
            except BaseException as e:  # reported below
                errors.append(e)

        def fcall():
            try:
                for k in range(10):
                    first = a.insert_many([("f", "news", f"f-{k}-{j}", True) for j in range(3)])
                    with lock:
                        acked.extend(range(first, first + 3))
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=post, args=(a, "a")), threading.Thread(target=post, args=(b, "b")),
                   threading.Thread(target=fcall)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        stored = a.stored_events()
        ids = [e["id"] for e in stored]
        assert len(acked) == 230 and sorted(acked) == ids, \
            f"{len(acked)} acknowledged ids, {len(ids)} stored; acknowledged twice: " \
            f"{sorted(i for i in set(acked) if acked.count(i) > 1)[:10]}"
        assert ids == list(range(ids[0], ids[0] + 230)), "stored ids are not one consecutive range"
        want = _want(stored)
        for k, s in enumerate(readers):
            _events_exactly(s, want, f"reader {k} on node {'ab'[k // 3]}", timeout=20)
            s.close()


test_redis_two_nodes_share_one_id_space.timeout = 90


def test_redis_outage_refuses_publishes_keeps_streams_then_resumes():
    with RedisServer() as r, Herald(redis=r, args=["--heartbeat-interval", "1s"]) as h:
        s = Stream(h.port)
        s.opening()
        first = publish(h.port, data="before")
        _events_exactly(s, [_ev(first, "before")], "reader before the outage")
        st, _, health = _health(h.port)
        assert st == 200 and health["status"] == "ok" and health["log"] == "ok", health
        assert _metric(h.port, "herald_log_available") == 1
        outages = _metric(h.port, "herald_log_outages_total")

        r.stop()
        wait_until(lambda: _health(h.port)[0] == 503, timeout=10, what="health to say 503 with Redis stopped")
        st, _, health = _health(h.port)
        assert health["status"] == "unavailable" and health["log"] == "unavailable", health
        st, hd, body = request(h.port, "POST", "/api/events", {"data": "during", "public": True})
        check_refusal(st, hd, body, 503)
        assert hd.get("retry-after", "").isdigit(), hd
        assert _metric(h.port, "herald_log_available") == 0
        assert _metric(h.port, "herald_log_outages_total") == outages + 1
        # The stream stays open and keeps getting heartbeats, and nothing else.
        frames = list(s.frames(timeout=2.5))
        assert not s.closed, "stream closed while Redis was away"
        assert frames and all(f == b": hb" for f in frames), frames
        assert h.proc.poll() is None, "herald exited while Redis was away"

        # Redis is back. Another program publishes before herald may have
        # reconnected; herald must pick those up as well as its own.
        r.start()
        other = h.insert_many([("o", "news", f"o{k}", True) for k in range(3)])
        assert other == first + 1, f"FCALL after the restart returned {other}, expected {first + 1}"
        wait_until(lambda: _health(h.port)[0] == 200, timeout=15, what="health to say 200 with Redis back")
        st, _, health = _health(h.port)
        assert health["status"] == "ok" and health["log"] == "ok", health
        after = publish(h.port, data="after")
        assert after == other + 3, (after, other)
        _events_exactly(s, [_ev(other + k, f"o{k}", "o") for k in range(3)] + [_ev(after, "after")],
                        "reader across the outage")
        assert _metric(h.port, "herald_log_available") == 1
        assert _metric(h.port, "herald_log_outages_total") == outages + 1
        # A reader resuming from the start sees every stored event once.
        s2 = Stream(h.port, headers={"Last-Event-ID": "0"})
        _events_exactly(s2, _want(h.stored_events()), "reader resuming from 0")
        assert [e["data"] for e in h.stored_events()] == ["before", "o0", "o1", "o2", "after"]
        s.close()
        s2.close()


test_redis_outage_refuses_publishes_keeps_streams_then_resumes.timeout = 60


def test_redis_turned_replica_is_an_outage_not_an_error():
    """The server herald writes to becomes a replica (a failover it has not
    heard of yet, or REPLICAOF by hand): Redis ends the tail's blocked XREAD
    when its role changes, so herald takes it as an outage; a publish
    meanwhile is 503 with Retry-After, not 500; herald's reconnects are
    refused READONLY (said in the log), and once the server is a primary
    again publishing goes on with the id after the last one, and a reader
    has every event."""
    with RedisServer() as r, Herald(redis=r) as h:
        s = Stream(h.port)
        s.opening()
        first = publish(h.port, data="before")
        # A replica of a primary that is not there: it keeps its data and
        # refuses writes.
        rc, out, err = r.cli("REPLICAOF", "127.0.0.1", "1")
        assert rc == 0, (out, err)
        st, hd, body = request(h.port, "POST", "/api/events", {"data": "during", "public": True})
        check_refusal(st, hd, body, 503)
        assert hd.get("retry-after", "").isdigit(), hd
        h.wait_log(r"READONLY", timeout=10)
        rc, out, err = r.cli("REPLICAOF", "NO", "ONE")
        assert rc == 0, (out, err)

        def published():
            st, _, body = request(h.port, "POST", "/api/events", {"data": "after", "public": True})
            return st == 201 and body

        body = wait_until(published, timeout=20, what="publishing again once the server is a primary")
        after = json.loads(body)["id"]
        assert after == first + 1, (first, after)
        _events_exactly(s, [_ev(first, "before"), _ev(after, "after")], "reader across the demotion")
        s.close()


test_redis_turned_replica_is_an_outage_not_an_error.timeout = 60


def test_redis_restart_mid_stream_loses_no_acknowledged_event():
    # Redis is stopped (SIGTERM: it writes its AOF out) and started again on
    # the same folder while events are being published: every event that
    # got a 201 is still there afterwards, and every reader gets every
    # stored event exactly once, in order.
    with RedisServer() as r, Herald(redis=r, args=["--heartbeat-interval", "1s"]) as h:
        live = [Stream(h.port, timeout=10) for _ in range(3)]
        for s in live:
            s.opening()
        acked, refused, errors = [], [], []
        stop = threading.Event()

        def pub():
            k = 0
            c = None
            try:
                while not stop.is_set():
                    c = c or HttpConn(h.port, timeout=10)
                    st, hd, body = c.request("POST", "/api/events",
                                             {"type": "m", "topic": "news", "data": f"m{k}", "public": True})
                    k += 1
                    if st == 201:
                        acked.append(json.loads(body)["id"])
                    elif st == 503:
                        refused.append(hd.get("retry-after"))
                        if hd.get("connection") == "close":
                            c.close()
                            c = None
                        time.sleep(0.05)
                    else:
                        raise AssertionError(f"publish got {st}: {body!r}")
            except BaseException as e:  # reported below
                errors.append(e)
            finally:
                if c:
                    c.close()

        t = threading.Thread(target=pub)
        t.start()
        try:
            wait_until(lambda: len(acked) >= 50 or errors, timeout=10, what="50 publishes before the restart")
            r.stop()
            wait_until(lambda: refused or errors, timeout=10, what="a publish refused while Redis is stopped")
            r.start()
            n = len(acked)
            wait_until(lambda: len(acked) >= n + 50 or errors, timeout=15,
                       what="50 publishes after Redis came back")
        finally:
            stop.set()
            t.join(15)
        assert not errors, errors
        assert all(v and v.isdigit() for v in refused), f"503s without Retry-After: {refused}"
        stored = h.stored_events()
        ids = [e["id"] for e in stored]
        lost = sorted(set(acked) - set(ids))
        assert not lost, f"{len(lost)} acknowledged events lost across the Redis restart: {lost[:20]}"
        assert ids == sorted(set(ids)) and ids == list(range(ids[0], ids[0] + len(ids))), "stored ids not consecutive"
        want = _want(stored)
        for k, s in enumerate(live):
            _events_exactly(s, want, f"live reader {k}", timeout=20)
            s.close()
        s = Stream(h.port, headers={"Last-Event-ID": "0"})
        _events_exactly(s, want, "reader resuming from 0", timeout=20)
        s.close()


test_redis_restart_mid_stream_loses_no_acknowledged_event.timeout = 90


def test_redis_unreachable_at_start_exits_1():
    with RedisServer() as r:
        r.stop()
        h = Herald(redis=r, wait=False)
        try:
            code = h.proc.wait(30)
        except subprocess.TimeoutExpired:
            h.kill()
            raise AssertionError(f"herald kept running without its Redis:\n{h.log()}")
        h.logf.close()
        assert code == 1, f"exit {code}:\n{h.log()}"
        assert re.search(r"redis.*127\.0\.0\.1:%d" % r.port, h.log(), re.I), h.log()
        assert "herald ready" not in h.log(), h.log()


def test_redis_back_without_its_data_never_reuses_an_id():
    # Redis loses everything (killed, its AOF removed) and comes back empty:
    # herald moves the counter past the ids it handed out, so an id never
    # names two events, and its readers go on without a duplicate.
    with RedisServer() as r, Herald(redis=r) as h:
        s = Stream(h.port)
        s.opening()
        ids = [publish(h.port, data=f"e{k}") for k in range(5)]
        _events_exactly(s, [_ev(i, f"e{k}") for k, i in enumerate(ids)], "reader before the loss")
        r.kill()
        # Health says ok until herald has noticed the loss: wait for that,
        # else the wait below could pass on the old connection.
        wait_until(lambda: not h.log_ok(), timeout=10, what="herald to notice Redis gone")
        shutil.rmtree(os.path.join(r.dir, "appendonlydir"))
        r.start()  # empty (herald may already be writing to it again)
        wait_until(h.log_ok, timeout=15, what="herald to reach the emptied Redis")
        n = publish(h.port, data="after")
        assert n > ids[-1], f"id {n} handed out again after Redis lost its data (last before: {ids[-1]})"
        m = h.insert(data="fcall after")
        assert m == n + 1, (n, m)
        _events_exactly(s, [_ev(n, "after"), _ev(m, "fcall after")], "reader after the loss")
        assert re.search(r"error: .*redis", h.log(), re.I), f"no error logged for the lost data:\n{h.log()}"
        s.close()


def _first_event(port, last_id):
    s = Stream(port, headers={"Last-Event-ID": str(last_id)})
    try:
        got = s.events(1, timeout=2)
        return got[0] if got else None
    finally:
        s.close()


def test_redis_retention_trims_and_resets():
    with RedisServer() as r, Herald(redis=r, args=["--retention-count", "5", "--log-level", "debug"]) as h:
        ids = [publish(h.port, data=f"e{k}") for k in range(20)]
        events_key = RedisServer.keys(h.redis_stream)[0]
        # Retention runs when herald decides; within 20 s the stream keeps at
        # most retention_count entries.
        wait_until(lambda: r.command("XLEN", events_key) <= 5, timeout=20, interval=0.2,
                   what="the stream to be trimmed to retention_count (5)")
        stored = h.stored_events()
        assert [e["id"] for e in stored] == ids[-len(stored):], "retention removed other than the oldest"
        oldest = stored[0]["id"]
        # The stream is trimmed once Redis has done it, but the resets below
        # need herald to know: its memory still holds the removed events
        # until the answer to its trim is read.
        h.wait_log(r"retention removed \d+ events from \S+; oldest kept id is above %d\b" % (oldest - 1), timeout=10)
        # The resume point just before the oldest kept entry is whole ...
        s = Stream(h.port, headers={"Last-Event-ID": str(oldest - 1)})
        _events_exactly(s, _want(stored), "resume from just before the oldest kept event")
        s.close()
        # ... one further back has lost an event: reset, reason retention.
        for point in (oldest - 2, ids[0]):
            e = _first_event(h.port, point)
            assert e and e["event"] == "reset" and e["id"] == ids[-1], (point, e)
            body = json.loads(e["data"])
            assert body == {"reason": "retention", "last_event_id": point, "id": ids[-1]}, body
        # Past the newest: unknown_id.
        e = _first_event(h.port, ids[-1] + 10)
        assert e and e["event"] == "reset", e
        assert json.loads(e["data"]) == {"reason": "unknown_id", "last_event_id": ids[-1] + 10, "id": ids[-1]}, e
        # And live events follow a reset.
        s = Stream(h.port, headers={"Last-Event-ID": str(ids[0])})
        got = s.events(1, timeout=5)
        assert got and got[0]["event"] == "reset", got
        n = publish(h.port, data="live")
        _events_exactly(s, [_ev(n, "live")], "reader after its reset")
        s.close()


test_redis_retention_trims_and_resets.timeout = 60


def test_redis_function_source_loads_with_redis_cli():
    r0 = subprocess.run([harness.HERALD_BIN, "--redis-function"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        timeout=30)
    assert r0.returncode == 0, r0.stderr.decode(errors="replace")
    source = r0.stdout
    assert source.startswith(b"#!lua name=herald\n"), source[:80]
    with RedisServer() as r:
        rc, out, err = r.cli("-x", "FUNCTION", "LOAD", "REPLACE", stdin=source)
        assert rc == 0 and out.strip() == "herald", (rc, out, err)
        # Loaded by hand, with no herald ever connected: it assigns ids from 1.
        assert r.publish("x", [("t", "a", "one", True)]) == 1
        assert r.publish("x", [("t", "a", "two", False), ("u", "b", "three", True)]) == 2
        assert [(e["id"], e["type"], e["topic"], e["data"], e["public"]) for e in r.stored_events("x")] == \
            [(1, "t", "a", "one", True), (2, "t", "a", "two", False), (3, "u", "b", "three", True)]
        # A herald started afterwards serves what the function stored and goes on from it.
        with Herald(redis=r, redis_stream="x") as h:
            s = Stream(h.port, headers={"Last-Event-ID": "0"})
            _events_exactly(s, [_ev(1, "one", "t"), _ev(3, "three", "u")], "reader of the hand-loaded log")
            assert publish(h.port, data="four") == 4
            s.close()


def _foreign_lines(h, since=0):
    """herald's log lines about entries herald_publish did not add."""
    return [l for l in h.log()[since:].splitlines() if "not added by herald_publish" in l]


def test_redis_entries_added_outside_the_function_are_skipped():
    # XADD '*' gives an id like 1796138787099-0: the shape of an event id.
    # Such an entry is not an event: no reader gets it, the counter never
    # follows it, herald says so once per run of them, and it is removed
    # from the stream (Redis takes no new id below a stream's newest, so
    # herald's next event could not be added while it is there).
    with RedisServer() as r, Herald(redis=r) as h:
        events_key, last_key = RedisServer.keys(h.redis_stream)
        s = Stream(h.port)
        s.opening()
        a = publish(h.port, data="a")
        _events_exactly(s, [_ev(a, "a")], "reader before the XADDs")
        foreign = [r.command("XADD", events_key, "*", "type", "x", "topic", "news", "data", f"d{k}", "public", "1")
                   for k in range(3)]
        foreign.append(r.command("XADD", events_key, foreign[-1].split(b"-")[0] + b"-7", "type", "x"))
        b = publish(h.port, data="b")
        assert b == a + 1, f"the id after {a} is {b}: the counter followed an entry added with XADD ({foreign[0]})"
        # The node's tail met the first of them (Redis woke its XREAD).
        h.wait_log(r"warning: .*%s.*not added by herald_publish" % re.escape(foreign[0].decode()), timeout=10)
        assert [x["id"] for x in h.stored_events()] == [a, b], "the entries added with XADD are still there"
        c = h.insert(data="c")  # FCALL herald_publish from another program
        assert c == b + 1, (b, c)
        _events_exactly(s, [_ev(b, "b"), _ev(c, "c")], "reader after the XADDs")
        assert len(_foreign_lines(h)) == 1, "one run of XADDs, more than one log line:\n" + h.log()

        # Another run, after an event: logged again, once.
        since = h.log_size()
        f2 = r.command("XADD", events_key, "*", "type", "x", "topic", "news", "data", "again", "public", "1")
        h.wait_log(r"warning: .*%s.*not added by herald_publish" % re.escape(f2.decode()), timeout=10, since=since)
        d = publish(h.port, data="d")
        assert d == c + 1, (c, d)
        # An entry added and deleted again leaves the stream's last id above
        # the counter (Redis keeps it): herald's next event still follows the counter.
        r.command("EVAL", "redis.call('XDEL', KEYS[1], redis.call('XADD', KEYS[1], '*', 'type', 'x'))", 1,
                  events_key)
        e = publish(h.port, data="e")
        assert e == d + 1, (d, e)
        _events_exactly(s, [_ev(d, "d"), _ev(e, "e")], "reader after the second run")
        assert len(_foreign_lines(h, since)) == 1, h.log()[since:]
        assert [x["id"] for x in h.stored_events()] == [a, b, c, d, e]
        assert int(r.command("GET", last_key)) == e
        # Resuming from the start reads the stream back with XRANGE: the same.
        s2 = Stream(h.port, headers={"Last-Event-ID": "0"})
        _events_exactly(s2, [_ev(a, "a"), _ev(b, "b"), _ev(c, "c"), _ev(d, "d"), _ev(e, "e")], "reader from 0")
        s.close()
        s2.close()


def test_redis_many_entries_not_added_by_herald_are_left_to_the_operator():
    # More than 1000 of them on top of the stream: perhaps not herald's log
    # at all, so nothing is removed; publishes fail naming the cause, and
    # once someone has removed them, ids go on from the counter.
    with RedisServer() as r, Herald(redis=r) as h:
        events_key, last_key = RedisServer.keys(h.redis_stream)
        s = Stream(h.port)
        s.opening()
        a = publish(h.port, data="a")
        r.command("EVAL", "for i = 1, 1001 do redis.call('XADD', KEYS[1], '*', 'type', 'x') end", 1, events_key)
        h.wait_log(r"error: .*more than 1000 entries above id %d that herald_publish did not add" % a, timeout=10)
        st, _, body = request(h.port, "POST", "/api/events", {"data": "refused", "public": True})
        assert st == 500, (st, body)
        assert r.command("XLEN", events_key) == 1002
        r.command("EVAL", "for _, e in ipairs(redis.call('XRANGE', KEYS[1], '(' .. ARGV[1] .. '-0', '+')) do "
                  "redis.call('XDEL', KEYS[1], e[1]) end", 1, events_key, a)
        b = publish(h.port, data="b")
        assert b == a + 1, (a, b)
        _events_exactly(s, [_ev(a, "a"), _ev(b, "b")], "reader")
        assert int(r.command("GET", last_key)) == b
        s.close()


def test_redis_function_alone_ignores_entries_it_did_not_add():
    # No herald running: the function loaded by hand, an XADD between two
    # FCALLs, then a herald reading it all back from an XRANGE page.
    source = subprocess.run([harness.HERALD_BIN, "--redis-function"], stdout=subprocess.PIPE, timeout=30).stdout
    with RedisServer() as r:
        rc, out, err = r.cli("-x", "FUNCTION", "LOAD", "REPLACE", stdin=source)
        assert rc == 0, (out, err)
        events_key, last_key = RedisServer.keys("solo")
        assert r.publish("solo", [("t", "a", "one", True)]) == 1
        r.command("XADD", events_key, "*", "type", "x", "topic", "a", "data", "foreign", "public", "1")
        assert r.publish("solo", [("t", "a", "two", True), ("t", "a", "three", True)]) == 2
        assert [e["id"] for e in r.stored_events("solo")] == [1, 2, 3]
        r.command("XADD", events_key, "*", "type", "x", "topic", "a", "data", "foreign again", "public", "1")
        with Herald(redis=r, redis_stream="solo") as h:
            s = Stream(h.port, headers={"Last-Event-ID": "0"})
            _events_exactly(s, [_ev(1, "one", "t"), _ev(2, "two", "t"), _ev(3, "three", "t")], "reader from 0")
            assert publish(h.port, data="four") == 4
            _events_exactly(s, [_ev(4, "four")], "reader after a POST")
            s.close()


def test_redis_log_of_an_older_herald_keeps_working():
    # Entries as herald wrote them before its function marked them (no
    # `id` field), and an older node's function still appending such
    # entries while this one runs: all are events, the ids go on.
    older = """
local n = tonumber(redis.call('GET', KEYS[2]) or '0') + 1
redis.call('XADD', KEYS[1], string.format('%d-0', n), 'type', ARGV[1], 'topic', 'news', 'data', ARGV[2],
  'public', '1', 'time', redis.call('TIME')[1])
redis.call('SET', KEYS[2], string.format('%d', n))
return n"""
    with RedisServer() as r:
        keys = RedisServer.keys("old")
        for k in range(1, 4):
            assert r.command("EVAL", older, 2, *keys, "old", f"e{k}") == k
            if k == 2:  # an XADD an older herald let in below its counter: passed over
                r.command("XADD", keys[0], "2-1", "type", "x", "topic", "news", "data", "odd", "public", "1")
        with Herald(redis=r, redis_stream="old") as h:
            s = Stream(h.port, headers={"Last-Event-ID": "0"})
            _events_exactly(s, [_ev(k, f"e{k}", "old") for k in range(1, 4)], "reader of the older log")
            assert publish(h.port, data="new") == 4
            assert r.command("EVAL", older, 2, *keys, "old", "e5") == 5
            assert h.insert(data="six") == 6
            _events_exactly(s, [_ev(4, "new"), _ev(5, "e5", "old"), _ev(6, "six")], "reader of the mixed log")
            assert len(_foreign_lines(h)) == 1 and "2-1" in _foreign_lines(h)[0], h.log()
            assert r.command("XLEN", keys[0]) == 7, "an entry of the older log was removed"
            s.close()


def _replica_counted(primary):
    """True once the primary counts a replica for WAIT, asked the way herald
    asks: a write, then WAIT. A replica says master_link_status:up as soon as
    it has loaded the primary's snapshot, and the primary then lists it as
    online, but it sends it new writes (and so counts it) only after the
    replica's next acknowledgement, which Redis sends once a second."""
    with primary.client() as c:
        c.command("SET", "replica-probe", "1")
        info = c.command("INFO", "replication").decode()
        if re.search(r"^master_repl_offset:0\r?$", info, re.M):
            return False  # no replica attached yet: nothing is replicated
        c.command("SET", "replica-probe", "2")  # a write with an offset to acknowledge
        return c.command("WAIT", 1, 1000) == 1


def test_redis_wait_replicas_means_on_the_replica():
    # No delay before the replica's first sync (Redis waits 5 s by default).
    with RedisServer(args=["--repl-diskless-sync-delay", "0"]) as primary, RedisServer() as replica:
        replica.command("REPLICAOF", "127.0.0.1", primary.port)
        wait_until(lambda: _replica_counted(primary), timeout=15, what="the primary to count the replica for WAIT")
        # One node waits long enough for any replica that runs (WAIT answers
        # as soon as it has acknowledged); the other gives up quickly, for
        # the replica stopped below.
        with Herald(redis=primary, redis_stream="w",
                    args=["--redis-wait-replicas", "1", "--redis-wait-timeout", "20s"]) as h, \
                Herald(redis=primary, redis_stream="w",
                       args=["--redis-wait-replicas", "1", "--redis-wait-timeout", "300ms"]) as quick:
            events_key = RedisServer.keys(h.redis_stream)[0]
            for k in range(3):
                i = publish(h.port, data=f"r{k}")
                # A 201 with redis_wait_replicas = 1: the replica has it now.
                got = replica.command("XRANGE", events_key, f"{i}-0", f"{i}-0")
                assert got and got[0][0] == b"%d-0" % i, f"event {i} acknowledged but not on the replica: {got}"
            assert "replicas within" not in h.log(), h.log()
            # The replica stops (SIGSTOP): the publish waits redis_wait_timeout
            # for it, is still answered 201 (the primary has it) and the
            # shortfall is logged; the replica gets it once it runs again.
            since = quick.log_size()
            replica.proc.send_signal(signal.SIGSTOP)
            try:
                i = publish(quick.port, data="while stopped")
                quick.wait_log(r"warning: .*reached 0 of 1 replicas within 300 ms", timeout=5, since=since)
            finally:
                replica.proc.send_signal(signal.SIGCONT)
            wait_until(lambda: replica.command("XRANGE", events_key, f"{i}-0", f"{i}-0"), timeout=10,
                       what="the replica to get the event published while it was stopped")


def test_sqlite_health_says_log_ok():
    with Herald() as h:
        st, _, health = _health(h.port)
        assert st == 200 and health["status"] == "ok" and health["log"] == "ok", health
        assert _metric(h.port, "herald_log_available") == 1
        assert _metric(h.port, "herald_log_outages_total") == 0
