# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: ?envelope=1 sends every event unnamed, with its type, topic,
data, visibility and time as one JSON object, so a browser's EventSource
hands each one to onmessage whatever its type (the console page reads the
stream this way). Live and catch-up alike; other readers see the usual
frames of the same events."""
import json

from harness import Herald, Stream, parse_frame, publish, sqlite


def _frames(s, n, timeout=5.0):
    out = []
    for f in s.frames(timeout):
        if f.startswith(b":") or f.startswith(b"retry:"):
            continue
        out.append(f)
        if len(out) >= n:
            break
    return out


def test_envelope_live_and_catchup():
    with Herald() as h:
        a = publish(h.port, type="greeting", topic="news/eu", data='say "hi"\nline two\ttab', public=True)
        sqlite(h.db, "INSERT INTO events(type,topic,data,public) VALUES('t.x','a/b','back\\slash' || char(1),1)")
        env = Stream(h.port, query="envelope=1&last_event_id=0")  # catch-up from the store
        plain = Stream(h.port, query="last_event_id=0")
        env.opening()
        plain.opening()
        got = _frames(env, 2)
        assert [f.split(b"\n")[0] for f in got] == [b"id: %d" % a, b"id: %d" % (a + 1)], got
        for f in got:
            assert b"\nevent:" not in f and f.count(b"\ndata: ") == 1, f
        first = json.loads(got[0].split(b"\ndata: ", 1)[1])
        assert first == {"type": "greeting", "topic": "news/eu", "data": 'say "hi"\nline two\ttab', "public": True,
                         "created_at": first["created_at"]}, first
        assert isinstance(first["created_at"], int) and first["created_at"] > 1700000000
        second = json.loads(got[1].split(b"\ndata: ", 1)[1])
        assert second["type"] == "t.x" and second["topic"] == "a/b" and second["data"] == "back\\slash\x01", second
        # Live: the same event reaches both, each in its own format.
        c = publish(h.port, type="live", topic="t", data="now", public=True)
        live = json.loads(_frames(env, 1)[0].split(b"\ndata: ", 1)[1])
        assert live["type"] == "live" and live["data"] == "now", live
        pe = [e for e in plain.events(3) if e["id"] == c]
        assert pe == [{"id": c, "event": "live", "data": "now"}], pe
        env.close()
        plain.close()


def test_envelope_must_be_0_or_1():
    with Herald() as h:
        s = Stream(h.port, query="envelope=yes")
        assert s.status == 400 and b"envelope" in s.read_body(), s.status
        s.close()
        s = Stream(h.port, query="envelope=0")
        assert s.status == 200
        s.opening()
        publish(h.port, type="x", data="d", public=True)
        assert parse_frame(_frames(s, 1)[0])["event"] == "x"
        s.close()
