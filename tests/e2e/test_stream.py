# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: the stream endpoint's headers and opening frame, the event
frame format, fan-out of a POSTed event and of an event written by another
process (the sqlite3 CLI, or redis-cli FCALL with Redis) to 100 concurrent
readers in order, the topic filter, heartbeats, health and metrics; the
opening bytes sent in the io_uring batch.
test_redis_backend.py reruns most of these with the log in Redis; the idle
check (inotify, no polling) is SQLite's alone."""
import json
import time

from harness import Herald, Stream, check_refusal, publish, request, sqlite, HttpConn

OPENING = b"retry: 3000\n: stream open\n\n"


def _check_stream_headers(s):
    assert s.status == 200, f"stream got {s.status} {s.headers}"
    ct = s.headers.get("content-type", "")
    assert ct.split(";")[0].strip() == "text/event-stream", f"Content-Type {ct!r}"
    assert s.headers.get("cache-control") == "no-store", f"Cache-Control {s.headers.get('cache-control')!r}"
    assert s.headers.get("x-accel-buffering") == "no", f"X-Accel-Buffering {s.headers.get('x-accel-buffering')!r}"
    assert "content-length" not in s.headers, f"stream has Content-Length: {s.headers}"
    assert "content-encoding" not in s.headers, f"stream is encoded: {s.headers}"
    # The frames are written raw on the wire (the contract's frame format), so
    # the body cannot be chunked.
    assert "transfer-encoding" not in s.headers, f"stream has Transfer-Encoding: {s.headers}"


def test_stream_headers_and_opening_frame():
    with Herald() as h:
        # Accept-Encoding must not make the stream compressed.
        s = Stream(h.port, headers={"Accept-Encoding": "gzip, deflate, br"})
        _check_stream_headers(s)
        got = s.read_exact(len(OPENING), timeout=5)
        assert got == OPENING, f"opening frame {got!r}, expected {OPENING!r}"
        # Nothing but heartbeats/events may follow; with nothing published the
        # stream stays open and silent (heartbeat interval is 15 s by default).
        assert s.events(timeout=0.3) == []
        assert not s.closed
        s.close()


def _batched_sends(port):
    st, _, body = request(port, "GET", "/metrics")
    assert st == 200
    line = [x for x in body.decode().splitlines() if x.startswith("herald_batched_sends_total ")]
    assert line, "herald_batched_sends_total missing from /metrics"
    return float(line[0].split()[1])


def test_opening_bytes_go_in_the_io_uring_batch():
    # A stream's head and opening frame leave in the pass's io_uring
    # submission with the other new streams' (one send(2) each with
    # io_uring = off); no event is published, so no stream round sends.
    for io_uring, batched in (("on", 12), ("off", 0)):
        with Herald(args=["--io-uring", io_uring]) as h:
            readers = [Stream(h.port) for _ in range(12)]
            for s in readers:
                _check_stream_headers(s)
                assert s.read_exact(len(OPENING), timeout=5) == OPENING
            assert _batched_sends(h.port) == batched, io_uring
            for s in readers:
                s.close()


def test_stream_retry_ms_configured():
    with Herald(args=["--retry-ms", "1500"]) as h:
        s = Stream(h.port)
        assert s.status == 200
        got = s.read_exact(len(b"retry: 1500\n: stream open\n\n"))
        assert got == b"retry: 1500\n: stream open\n\n", f"opening frame {got!r}"
        s.close()


def test_event_frame_format():
    with Herald() as h:
        s = Stream(h.port)
        assert s.status == 200
        s.opening()
        i1 = publish(h.port, type="greet.v1", topic="news", data="hello world")
        i2 = publish(h.port, type="multi", topic="news", data="line1\nline2")
        i3 = publish(h.port, type="multi", topic="news", data="a\n\nb\n")
        frames = []
        for f in s.frames(timeout=5):
            if f.startswith(b":"):
                continue
            frames.append(f)
            if len(frames) == 2:
                break
        assert frames == [
            b"id: %d\nevent: greet.v1\ndata: hello world" % i1,
            b"id: %d\nevent: multi\ndata: line1\ndata: line2" % i2,
        ], f"frames {frames!r}"
        assert i2 > i1
        # Empty lines inside data (written "data:" or "data: ") survive.
        assert s.events(1, timeout=5) == [{"id": i3, "event": "multi", "data": "a\n\nb\n"}]
        s.close()


def test_default_type_is_message():
    with Herald() as h:
        s = Stream(h.port)
        s.opening()
        st, _, body = request(h.port, "POST", "/api/events", b'{"data":"x","public":true}')
        assert st == 201, (st, body)
        i = json.loads(body)["id"]
        evs = s.events(1, timeout=5)
        assert evs == [{"id": i, "event": "message", "data": "x"}], evs
        s.close()


def test_fanout_100_readers_post_and_cli_insert():
    # 100 readers from one address: lift the per-address cap (default 32).
    with Herald(args=["--per-address-limit", "0"]) as h:
        readers = []
        try:
            for _ in range(100):
                s = Stream(h.port, timeout=10)
                _check_stream_headers(s)
                readers.append(s)
            # Every reader has its opening frame before anything is published,
            # so each is registered and must get both events live.
            for s in readers:
                assert s.read_exact(len(OPENING), timeout=10) == OPENING
            i1 = publish(h.port, type="t", topic="news", data="from-post")
            i2 = h.insert(type="t", topic="news", data="from-cli")
            assert i2 > i1, (i1, i2)
            want = [{"id": i1, "event": "t", "data": "from-post"}, {"id": i2, "event": "t", "data": "from-cli"}]
            for n, s in enumerate(readers):
                got = s.events(2, timeout=10)
                assert got == want, f"reader {n} got {got}, expected {want}"
        finally:
            for s in readers:
                s.close()


test_fanout_100_readers_post_and_cli_insert.timeout = 90


def test_cli_insert_alone_is_noticed_promptly():
    # A row from another process, with nothing else happening on the server,
    # must be pushed without waiting for some slow poll (inotify, or XREAD
    # BLOCK with Redis): 2 s bound.
    with Herald() as h:
        s = Stream(h.port)
        s.opening()
        publish(h.port, data="warm")  # the table exists and the reader is live
        assert [e["data"] for e in s.events(1, timeout=5)] == ["warm"]
        for k in range(3):
            h.insert(type="cli", topic="news", data=f"cli-{k}")
            got = s.events(1, timeout=2)
            assert [e["data"] for e in got] == [f"cli-{k}"], f"cli insert {k}: got {got}"
        s.close()


def test_unknown_query_parameters_are_refused():
    """A misspelt parameter (topics=) would otherwise stream every topic."""
    with Herald() as h:
        for target, name in [("?topics=x", "topics"), ("?topic=a&lastEventId=3", "lastEventId"),
                             ("?topic=a&_=1700000000", "_"), ("?%74opic=a", "%74opic")]:
            st, hd, body = request(h.port, "GET", "/api/events/stream" + target)
            check_refusal(st, hd, body, 400)
            assert f'unknown query parameter \\"{name}\\"'.encode() in body, body
        h.wait_log(r'refused 127\.0\.0\.1 GET /api/events/stream: 400 unknown query parameter "topics"')
        # Known ones, empty parts and a trailing "&" are fine.
        s = Stream(h.port, "topic=a&&last_event_id=0&envelope=0&")
        assert s.status == 200
        s.close()


def test_topic_filter():
    with Herald() as h:
        ab = Stream(h.port, query="topic=a,b")
        only_c = Stream(h.port, query="topic=c/d")
        every = Stream(h.port)
        for s in (ab, only_c, every):
            assert s.status == 200
            s.opening()
        pubs = [("a", "1"), ("c/d", "2"), ("b", "3"), ("", "4"), ("ab", "5"), ("a", "6")]
        ids = {d: publish(h.port, topic=t, data=d) for t, d in pubs}
        last = publish(h.port, topic="zzz", data="end")
        got_all = every.events(7, timeout=5)
        assert [(e["id"], e["data"]) for e in got_all] == [(ids[d], d) for _, d in pubs] + [(last, "end")]
        # The filtered readers: publish a marker on their topic to know
        # when to stop reading, so a wrongly delivered event would be seen.
        ma = publish(h.port, topic="b", data="mark-ab")
        mc = publish(h.port, topic="c/d", data="mark-c")
        got_ab = ab.events(4, timeout=5)
        assert [(e["id"], e["data"]) for e in got_ab] == [(ids["1"], "1"), (ids["3"], "3"), (ids["6"], "6"),
                                                          (ma, "mark-ab")], got_ab
        got_c = only_c.events(2, timeout=5)
        assert [(e["id"], e["data"]) for e in got_c] == [(ids["2"], "2"), (mc, "mark-c")], got_c
        for s in (ab, only_c, every):
            s.close()


def test_heartbeat_comment():
    with Herald(args=["--heartbeat-interval", "1"]) as h:
        s = Stream(h.port)
        s.opening()
        hb = None
        for f in s.frames(timeout=3.5):
            hb = f
            break
        assert hb == b": hb", f"expected a heartbeat comment within 3.5 s, got {hb!r}"
        s.close()


def test_health_and_metrics():
    with Herald() as h:
        st, hd, body = request(h.port, "GET", "/api/health")
        assert st == 200, (st, body)
        assert hd.get("content-type", "").startswith("application/json"), hd
        assert json.loads(body)["status"] == "ok", body
        st, hd, body = request(h.port, "GET", "/metrics")
        assert st == 200, (st, body)
        assert hd.get("content-type", "").startswith("text/plain"), hd
        lines = [ln for ln in body.decode().splitlines() if ln and not ln.startswith("#")]
        assert lines, "empty metrics"
        for ln in lines:
            name, _, value = ln.rpartition(" ")
            float(value)  # every sample line ends in a number
            assert name, ln


def test_keepalive_requests_on_one_connection():
    with Herald() as h:
        with HttpConn(h.port) as c:
            for _ in range(5):
                st, hd, body = c.request("GET", "/api/health")
                assert st == 200, (st, body)
                assert json.loads(body)["status"] == "ok"
            i = [json.loads(c.request("POST", "/api/events", {"data": str(k), "public": True})[2])["id"]
                 for k in range(3)]
            assert i == [i[0], i[0] + 1, i[0] + 2], i


def test_order_with_concurrent_publishers_and_cli_writers():
    # Own inserts (several keep-alive publishers, pipelined) interleave with
    # another process's commits; every reader must still get every stored
    # row exactly once, in id order: the no-gap/no-duplicate invariant.
    import threading
    from harness import publish_many
    with Herald(args=["--per-address-limit", "0"]) as h:
        readers = [Stream(h.port, timeout=10) for _ in range(40)]
        for s in readers:
            assert s.status == 200
            s.opening()
        errors = []

        def pub(n):
            try:
                publish_many(h.port, [{"type": "p", "topic": "news", "data": f"p{n}-{k}", "public": True}
                                      for k in range(150)], window=8)
            except BaseException as e:  # reported below
                errors.append(e)

        def cli():
            try:
                for k in range(15):
                    h.insert(type="c", topic="news", data=f"c-{k}")
                # A multi-row transaction (one FCALL) from the other process, too.
                h.insert_many([("c", "news", f"tx-{k}", True) for k in range(10)])
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=pub, args=(n,)) for n in range(4)] + [threading.Thread(target=cli)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        want = [{"id": e["id"], "event": e["type"], "data": e["data"]} for e in h.stored_events()]
        assert len(want) == 4 * 150 + 15 + 10, len(want)
        for n, s in enumerate(readers):
            got = s.events(len(want), timeout=20)
            if got != want:
                ids = [e["id"] for e in got]
                missing = sorted(set(r["id"] for r in want) - set(ids))
                dups = sorted(i for i in set(ids) if ids.count(i) > 1)
                order = all(a < b for a, b in zip(ids, ids[1:]))
                raise AssertionError(f"reader {n}: {len(got)} of {len(want)} events; missing {missing[:20]}, "
                                     f"duplicated {dups[:20]}, increasing {order}")
            s.close()


test_order_with_concurrent_publishers_and_cli_writers.timeout = 120


def _sse_parse(raw):
    """Parse one frame the way an EventSource does (CR, LF and CRLF all end
    a line): {'id', 'event', 'data'}."""
    text = raw.decode()
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    ev = {"id": None, "event": "message", "data": []}
    for line in lines:
        if not line or line.startswith(":"):
            continue
        k, _, v = line.partition(":")
        v = v[1:] if v.startswith(" ") else v
        if k == "data":
            ev["data"].append(v)
        elif k == "id":
            ev["id"] = v
        elif k == "event":
            ev["event"] = v
    ev["data"] = "\n".join(ev["data"])
    return ev


def test_carriage_returns_in_data_cannot_inject_fields():
    # An EventSource ends lines at CR as well as LF: a payload with CRs must
    # not smuggle `id:` or `event:` fields, or end the frame early.
    with Herald() as h:
        s = Stream(h.port)
        s.opening()
        payload = "x\revent: evil\rid: 999\r\rdata: more\r\nlast"
        i = publish(h.port, type="safe", data=payload)
        j = publish(h.port, type="after", data="next")
        # Read the raw bytes of the two events and parse them per the spec.
        raw = b""
        deadline = time.monotonic() + 5
        while raw.count(b"\n\n") < 2 and time.monotonic() < deadline:
            raw += s.read_exact(1, timeout=max(0.01, deadline - time.monotonic()))
        text = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        frames = [f for f in text.split(b"\n\n") if f and not f.startswith(b":")]
        got = [_sse_parse(f) for f in frames[:2]]
        assert got == [{"id": str(i), "event": "safe", "data": "x\nevent: evil\nid: 999\n\ndata: more\nlast"},
                       {"id": str(j), "event": "after", "data": "next"}], f"raw {raw!r} parsed as {got}"
        s.close()


def test_large_event_intact():
    with Herald() as h:
        s = Stream(h.port)
        s.opening()
        big = "".join(chr(0x41 + k % 26) for k in range(60000))
        i = publish(h.port, data=big)
        assert s.events(1, timeout=5) == [{"id": i, "event": "message", "data": big}]
        s.close()


def test_topic_filter_percent_encoded():
    with Herald() as h:
        s = Stream(h.port, query="topic=a%2Fb,c%3Ad")
        assert s.status == 200, s.status
        s.opening()
        publish(h.port, topic="a", data="no")
        i = publish(h.port, topic="a/b", data="yes1")
        j = publish(h.port, topic="c:d", data="yes2")
        assert [(e["id"], e["data"]) for e in s.events(2, timeout=5)] == [(i, "yes1"), (j, "yes2")]
        s.close()


def _switches(pid):
    n = 0
    with open(f"/proc/{pid}/task/{pid}/status") as f:
        for line in f:
            if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                n += int(line.split()[1])
    return n


def test_idle_server_does_not_poll():
    # Other writers are noticed through inotify, not a polling timer: an idle
    # herald (a reader connected, nothing happening) sleeps. Over 4 s it may
    # wake for its own periodic chores: retention every 5 s (at most once in
    # the window) and a heartbeat turn every quarter of heartbeat_interval
    # (15 s: at most twice), so up to three times depending on where the
    # window falls. A poll of the database even once a second would add four.
    with Herald() as h:
        s = Stream(h.port)
        s.opening()
        publish(h.port, data="settle")
        assert len(s.events(1, timeout=5)) == 1
        # Let the publish's own follow-up work finish: the checkpoint 100 ms
        # after it, and the re-checks of data_version that its -wal and
        # database writes set off (up to about 3.8 s after each).
        time.sleep(4.5)
        before = _switches(h.pid)
        time.sleep(4)
        woke = _switches(h.pid) - before
        assert woke <= 3, f"idle herald woke {woke} times in 4 s"
        # And it still notices another process's insert at once.
        sqlite(h.db, "INSERT INTO events(type,topic,data,public) VALUES('t','news','after-idle',1)")
        assert [e["data"] for e in s.events(1, timeout=2)] == ["after-idle"]
        s.close()


test_idle_server_does_not_poll.alone = True
