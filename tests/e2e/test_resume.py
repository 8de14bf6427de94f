# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: resuming a stream. Last-Event-ID (header or query) gives
exactly the stored events after it, in order, then live ones, also across a
server restart with events written by another process while herald was down;
a resume point that fell out of retention, or lies beyond the newest id,
gets a `reset` event first."""
import json
import time

from harness import Herald, Stream, publish


def _ev(i, data, type="message"):
    return {"id": i, "event": type, "data": data}


def test_resume_after_restart_gets_exactly_the_missed_events():
    h1 = Herald()
    try:
        ids = [publish(h1.port, data=f"e{k}") for k in range(5)]
        s = Stream(h1.port, headers={"Last-Event-ID": "0"})
        assert s.status == 200
        got = s.events(5, timeout=5)
        assert got == [_ev(i, f"e{k}") for k, i in enumerate(ids)], got
        last = got[-1]["id"]
        h1.stop()
        # The server is gone: the stream must have been closed.
        assert s.wait_closed(5), "stream not closed when herald stopped"
        s.close()
    finally:
        if h1.proc.poll() is None:
            h1.kill()
    # Another program writes while herald is down.
    for k in range(3):
        h1.insert(type="down", topic="news", data=f"d{k}")
    with Herald(db=h1.db) as h2:
        s = Stream(h2.port, headers={"Last-Event-ID": str(last)})
        assert s.status == 200
        got = s.events(3, timeout=5)
        assert got == [_ev(last + 1 + k, f"d{k}", "down") for k in range(3)], got
        live = publish(h2.port, data="live")
        assert live == last + 4, (live, last)
        got = s.events(1, timeout=5)
        assert got == [_ev(live, "live")], f"after the missed events expected only the live one, got {got}"
        s.close()


test_resume_after_restart_gets_exactly_the_missed_events.timeout = 60


def test_resume_header_and_query_from_the_middle():
    with Herald() as h:
        stored = [(publish(h.port, data=f"e{k}"), f"e{k}") for k in range(6)]
        for how in ("header", "query"):
            mid = stored[2][0]
            if how == "header":
                s = Stream(h.port, headers={"Last-Event-ID": str(mid)})
            else:
                s = Stream(h.port, query=f"last_event_id={mid}")
            assert s.status == 200, (how, s.status)
            s.opening()
            want = [_ev(i, d) for i, d in stored[3:]]
            got = s.events(len(want), timeout=5)
            assert got == want, (how, got)
            # Nothing more is stored: the next event must be the new live one.
            n = publish(h.port, data=f"live-{how}")
            got = s.events(1, timeout=5)
            assert got == [_ev(n, f"live-{how}")], (how, got)
            stored.append((n, f"live-{how}"))
            s.close()
        # The header wins over the query parameter (EventSource sends the
        # newest id in the header on reconnect).
        s = Stream(h.port, query=f"last_event_id={stored[0][0]}", headers={"Last-Event-ID": str(stored[-2][0])})
        got = s.events(1, timeout=5)
        assert got == [_ev(*stored[-1])], got
        s.close()


def test_resume_with_topic_filter():
    with Herald() as h:
        pubs = [("a", "1"), ("b", "2"), ("a", "3"), ("c", "4"), ("a", "5")]
        ids = [publish(h.port, topic=t, data=d) for t, d in pubs]
        s = Stream(h.port, query=f"topic=a,c&last_event_id={ids[0]}")
        assert s.status == 200
        got = s.events(3, timeout=5)
        assert got == [_ev(ids[2], "3"), _ev(ids[3], "4"), _ev(ids[4], "5")], got
        publish(h.port, topic="b", data="not-mine")
        n = publish(h.port, topic="c", data="mine")
        assert s.events(1, timeout=5) == [_ev(n, "mine")]
        s.close()


def test_no_resume_point_gets_only_live_events():
    with Herald() as h:
        for k in range(3):
            publish(h.port, data=f"old{k}")
        s = Stream(h.port)
        s.opening()
        n = publish(h.port, data="new")
        got = s.events(1, timeout=5)
        assert got == [_ev(n, "new")], f"a fresh reader got {got}, expected only the live event"
        s.close()


def _first_event(port, last_id, timeout=2.0):
    s = Stream(port, headers={"Last-Event-ID": str(last_id)})
    try:
        assert s.status == 200, s.status
        got = s.events(1, timeout=timeout)
        return got[0] if got else None
    finally:
        s.close()


def test_too_old_resume_point_gets_reset():
    with Herald(args=["--retention-count", "5"]) as h:
        ids = [publish(h.port, data=f"e{k}") for k in range(20)]
        newest = ids[-1]
        # Pruning happens when the server decides; poll (bounded) until a
        # resume from the first id sees it.
        deadline = time.monotonic() + 20
        first = None
        while time.monotonic() < deadline:
            first = _first_event(h.port, ids[0])
            if first and first["event"] == "reset":
                break
            time.sleep(0.2)
        assert first and first["event"] == "reset", f"no reset within 20 s for a resume from {ids[0]}; got {first}"
        assert first["id"] == newest, f"reset carries id {first['id']}, expected the newest id {newest}"
        body = json.loads(first["data"])
        assert body["last_event_id"] == ids[0] and isinstance(body["reason"], str) and body["reason"], body
        # Retention keeps the newest 5: once pruning is complete, resuming
        # from the one before them is whole (no reset) ...
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            f = _first_event(h.port, ids[-7])
            if f and f["event"] == "reset":
                break
            time.sleep(0.2)
        assert f and f["event"] == "reset", f"resume from {ids[-7]} (pruned after it) got {f}"
        s = Stream(h.port, headers={"Last-Event-ID": str(ids[-6])})
        got = s.events(5, timeout=5)
        assert got == [_ev(i, f"e{k}") for k, i in enumerate(ids) if k >= 15], got
        s.close()
        # ... and after a reset, live events follow.
        s = Stream(h.port, headers={"Last-Event-ID": str(ids[0])})
        got = s.events(1, timeout=5)
        assert got[0]["event"] == "reset" and got[0]["id"] == newest, got
        n = publish(h.port, data="live")
        assert s.events(1, timeout=5) == [_ev(n, "live")]
        s.close()


test_too_old_resume_point_gets_reset.timeout = 60


def test_resume_point_beyond_newest_gets_reset():
    with Herald() as h:
        ids = [publish(h.port, data=f"e{k}") for k in range(3)]
        s = Stream(h.port, query="last_event_id=999")
        assert s.status == 200
        got = s.events(1, timeout=5)
        assert len(got) == 1 and got[0]["event"] == "reset", got
        assert got[0]["id"] == ids[-1], f"reset id {got[0]['id']}, expected the newest id {ids[-1]}"
        body = json.loads(got[0]["data"])
        assert body["last_event_id"] == 999 and isinstance(body["reason"], str), body
        n = publish(h.port, data="live")
        assert s.events(1, timeout=5) == [_ev(n, "live")]
        s.close()


def test_reconnects_during_live_flow_lose_nothing():
    import threading
    from harness import publish_many
    with Herald() as h:
        total = 600
        errors = []

        def pub():
            try:
                for b in range(0, total, 50):
                    publish_many(h.port, [{"data": f"f{k}", "public": True, "topic": "news"}
                                          for k in range(b, b + 50)], window=4)
            except BaseException as e:
                errors.append(e)

        s = Stream(h.port, headers={"Last-Event-ID": "0"})
        t = threading.Thread(target=pub)
        t.start()
        seen = []
        reconnects = 0
        deadline = time.monotonic() + 40
        while len(seen) < total and time.monotonic() < deadline:
            got = s.events(min(97, total - len(seen)), timeout=5)
            seen += got
            if len(seen) < total:
                # Drop the connection mid-flow and resume from the last id seen.
                s.close()
                reconnects += 1
                s = Stream(h.port, headers={"Last-Event-ID": str(seen[-1]["id"] if seen else 0)})
                assert s.status == 200
        s.close()
        t.join(30)
        assert not errors, errors
        assert reconnects >= 3, reconnects
        assert [e["data"] for e in seen] == [f"f{k}" for k in range(total)], \
            f"{len(seen)} events over {reconnects} reconnects; first differences: " + \
            str([(k, e["data"]) for k, e in enumerate(seen) if e["data"] != f"f{k}"][:5])
        assert [e["id"] for e in seen] == list(range(1, total + 1))


test_reconnects_during_live_flow_lose_nothing.timeout = 90


def test_stream_rotation_and_resume():
    # rotate_after ends streams after about that age (10% jitter); the
    # client resumes with its last id and nothing is lost. (herald checks
    # stream age on its heartbeat sweep, so the heartbeat interval bounds
    # how late a rotation can be; it is set to match here.)
    with Herald(args=["--rotate-after", "1s", "--heartbeat-interval", "1s"]) as h:
        s = Stream(h.port)
        t0 = time.monotonic()
        s.opening()
        a = publish(h.port, data="before")
        assert s.events(1, timeout=2) == [_ev(a, "before")]
        assert s.wait_closed(4), "stream not ended by rotate_after 1s"
        dt = time.monotonic() - t0
        assert 0.7 <= dt <= 3.0, f"stream rotated after {dt:.2f} s, rotate_after 1s"
        s.close()
        b = publish(h.port, data="between")
        s = Stream(h.port, headers={"Last-Event-ID": str(a)})
        assert s.events(1, timeout=2) == [_ev(b, "between")]
        s.close()


def test_resume_from_newest_id_is_not_a_reset():
    with Herald() as h:
        ids = [publish(h.port, data=f"e{k}") for k in range(3)]
        s = Stream(h.port, headers={"Last-Event-ID": str(ids[-1])})
        assert s.status == 200
        s.opening()
        n = publish(h.port, data="live")
        assert s.events(1, timeout=5) == [_ev(n, "live")]
        s.close()
        # An empty database: resuming from 0 is whole, not a reset.
    with Herald() as h:
        s = Stream(h.port, headers={"Last-Event-ID": "0"})
        s.opening()
        n = publish(h.port, data="first")
        assert s.events(1, timeout=5) == [_ev(n, "first")]
        s.close()
