# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: capacity refusals an EventSource survives. A browser gives
up for good on any status but 200, so a stream request that says
Accept: text/event-stream and meets the per-address or global cap gets a
200 event stream that ends at once, with a jittered retry:, the id to
resume from, and one event named "refused" whose data is the JSON error
other clients get (named, so a page's onmessage never sees it; an event,
so clients that take an id only from an event they dispatch resume too).
Other clients keep 429/503 with Retry-After. The caps are checked before
the token, and authorization failures, once there is room, stay 401/403.
Below, an eventsource-client reader (npm, under Node) is refused,
reconnects with the id and misses nothing; and a Chromium page's onmessage
sees nothing of a refusal."""
import json
import os
import re

from harness import Herald, Stream, check_refusal, publish, request, wait_until
from test_browser import SCRIPTS, STREAM, Page

ES = {"Accept": "text/event-stream"}


def _refusal(port, headers):
    s = Stream(port, headers=headers)
    body = s.read_body()
    s.close()
    return s.status, s.headers, body.decode()


def _fields(body):
    """retry, id, event and data of a refusal body, which must be one
    event; data parsed as JSON."""
    assert body.endswith("\n\n") and body.count("\n\n") == 1, body
    out = {}
    for line in body[:-2].split("\n"):
        k, _, v = line.partition(": ")
        assert k in ("retry", "id", "event", "data") and k not in out, body
        out[k] = int(v) if k in ("retry", "id") else json.loads(v) if k == "data" else v
    assert out.get("event") == "refused" and set(out.get("data") or {}) == {"error", "status"}, body
    return out


def test_per_address_refusal_is_a_short_event_stream():
    with Herald(args=["--per-address-limit", "1"]) as h:
        for k in range(3):
            publish(h.port, data=f"e{k}")
        first = Stream(h.port, headers=ES)
        assert first.status == 200
        retries = set()
        for _ in range(8):
            st, hd, body = _refusal(h.port, ES)
            assert st == 200, (st, body)
            assert hd["content-type"] == "text/event-stream", hd
            assert hd.get("connection") == "close" and int(hd["content-length"]) == len(body), (hd, body)
            assert hd.get("x-refused-status") == "429", hd
            f = _fields(body)
            assert f["id"] == 3, body  # the newest: a first request resumes from the moment it was refused
            assert 2500 <= f["retry"] < 7500, body
            assert f["data"]["status"] == 429 and "per_address_limit" in f["data"]["error"], body
            retries.add(f["retry"])
        assert len(retries) > 1, f"retry not jittered: {retries}"
        # The client's own resume point is what it gets back.
        st, _, body = _refusal(h.port, dict(ES, **{"Last-Event-ID": "2"}))
        assert st == 200 and _fields(body)["id"] == 2, body
        # Not an EventSource: 429 with Retry-After, as before.
        s = Stream(h.port)
        assert s.status == 429 and s.headers.get("retry-after") == "5", (s.status, s.headers)
        check_refusal(s.status, s.headers, s.read_body(), 429)
        s.close()
        # Counted as the refusal it is; the log names it too.
        text = request(h.port, "GET", "/metrics")[2].decode()
        m = re.search(r'^herald_refusals_total\{code="429",cause="[^"]*per_address_limit[^"]*"\} (\d+)$', text, re.M)
        assert m and int(m.group(1)) == 10, text
        assert "refused 127.0.0.1 GET /api/events/stream: 429" in h.log()
        first.close()


def test_capacity_refusal_and_authorization_stay_apart():
    with Herald(args=["--max-readers", "1", "--read-token", "secret"]) as h:
        a = Stream(h.port, headers=ES)
        assert a.status == 200
        st, _, body = _refusal(h.port, ES)
        f = _fields(body)
        assert st == 200 and f["id"] == 0 and f["data"]["status"] == 503 and "max_readers" in f["data"]["error"], body
        assert _refusal(h.port, ES)[1].get("x-refused-status") == "503"
        s = Stream(h.port)
        assert s.status == 503 and s.headers.get("retry-after"), s.status
        s.close()
        # The caps come first: at capacity a wrong token gets the capacity
        # answer (no token is looked at), which an EventSource survives.
        st, hd, body = _refusal(h.port, dict(ES, Authorization="Bearer wrong"))
        assert st == 200 and hd.get("x-refused-status") == "503", (st, hd, body)
        a.close()
        wait_until(lambda: json.loads(request(h.port, "GET", "/api/health")[2])["readers"] == 0,
                   what="the reader's close")
        # With room, a wrong token stops a client: 403, whatever it accepts.
        for headers in (dict(ES, Authorization="Bearer wrong"), {"Authorization": "Bearer wrong"}):
            s = Stream(h.port, headers=headers)
            assert s.status == 403, s.status
            check_refusal(s.status, s.headers, s.read_body(), 403)
            s.close()


def test_refusal_carries_cors_for_an_allowed_origin():
    with Herald(args=["--per-address-limit", "1", "--allow-origin", "https://app.example"]) as h:
        a = Stream(h.port, headers=ES)
        st, hd, body = _refusal(h.port, dict(ES, Origin="https://app.example"))
        assert st == 200 and hd.get("access-control-allow-origin") == "https://app.example", hd
        st, hd, body = _refusal(h.port, dict(ES, Origin="https://evil.example"))
        assert st == 200 and "access-control-allow-origin" not in hd, hd
        a.close()


def test_eventsource_client_resumes_after_a_refusal():
    # eventsource-client (npm) takes an id only from an event it dispatches:
    # the refusal must be one, or the reader comes back without
    # Last-Event-ID and misses what was published while it was refused.
    assert os.path.isdir(os.path.join(SCRIPTS, "node_modules", "eventsource-client")), \
        "eventsource-client is not installed: run make browser-deps"
    with Herald(args=["--max-readers", "1"]) as h:
        before = [publish(h.port, data=f"before-{i}") for i in range(2)]
        holder = Stream(h.port)
        assert holder.status == 200
        with Page("esclient.mjs", url=h.url + STREAM, seconds=50) as p:
            p.ready()
            st = p.do(until="r.ends >= 1", ms=10000)
            assert st["requests"][0] == {"lastEventId": None, "status": 200, "refused": "503"}, st
            missed = [publish(h.port, data=f"while-refused-{i}") for i in range(3)]
            holder.close()
            # The refused reader comes back by itself (after its retry: of
            # 2.5-7.5 s) and takes the freed place; once its answer is a
            # stream, it is a reader and gets whatever is published next.
            p.do(until="r.requests.some((q) => q.status === 200 && q.refused === null)", ms=20000)
            live = publish(h.port, data="live")
            st = p.do(until=f"r.events.some((e) => e.id === '{live}')", ms=10000)
    got = [(e["id"], e["data"]) for e in st["events"] if e["event"] == "message"]
    want = [(str(i), f"while-refused-{k}") for k, i in enumerate(missed)] + [(str(live), "live")]
    assert got == want, f"events after the refusal: {got}, want {want}; record: {st}"
    refusals = [e for e in st["events"] if e["event"] == "refused"]
    assert refusals and all(e["id"] == str(before[-1]) and json.loads(e["data"])["status"] == 503
                            for e in refusals), st
    admitted = [q for q in st["requests"] if q["status"] == 200 and q["refused"] is None]
    assert len(admitted) == 1 and admitted[0]["lastEventId"] == str(before[-1]), st["requests"]
    assert all(q["lastEventId"] == str(before[-1]) for q in st["requests"][1:]), st["requests"]
    assert all(2500 <= d < 7500 for d in st["reconnects"][:len(refusals)]), st["reconnects"]


test_eventsource_client_resumes_after_a_refusal.timeout = 60


def test_refusal_is_no_message_to_a_page():
    # A page that listens only with onmessage sees nothing of a refusal; one
    # that listens for "refused" gets the id and the JSON error.
    with Herald(args=["--max-readers", "1"]) as h:
        first = publish(h.port, data="one")
        holder = Stream(h.port)
        assert holder.status == 200
        with Page("stream.mjs", page=h.url + "/api/health", streams={}, open=0) as p:
            p.ready()
            p.value("""(() => {
                window.seen = {plain: [], plainErrors: 0, refused: [], namedErrors: 0};
                const plain = new EventSource('%s');
                plain.onmessage = (e) => seen.plain.push({id: e.lastEventId, data: e.data});
                plain.onerror = () => seen.plainErrors++;
                const named = new EventSource('%s');
                named.addEventListener('refused', (e) => seen.refused.push({id: e.lastEventId, data: e.data}));
                named.onerror = () => seen.namedErrors++;
                return true;
            })()""" % (STREAM, STREAM))
            # An error once each stream has ended: its whole body was read.
            p.do(until="seen.plainErrors >= 1 && seen.namedErrors >= 1", ms=15000)
            seen = p.value("seen")
        holder.close()
    assert seen["plain"] == [], seen
    assert seen["refused"], seen
    r = seen["refused"][0]
    assert r["id"] == str(first) and json.loads(r["data"])["status"] == 503, seen
    assert "max_readers" in json.loads(r["data"])["error"], seen


test_refusal_is_no_message_to_a_page.timeout = 45
