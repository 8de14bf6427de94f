"""End-to-end: capacity refusals an EventSource survives. A browser gives
up for good on any status but 200, so a stream request that says
Accept: text/event-stream and meets the per-address or global cap gets a
200 event stream that ends at once, with a jittered retry:, the id to
resume from, and the cause in a comment; other clients keep 429/503 with
Retry-After. The caps are checked before the token, and authorization
failures, once there is room, stay 401/403."""
import json
import re

from harness import Herald, Stream, check_refusal, publish, request, wait_until

ES = {"Accept": "text/event-stream"}


def _refusal(port, headers):
    s = Stream(port, headers=headers)
    body = s.read_body()
    s.close()
    return s.status, s.headers, body.decode()


def _fields(body):
    out = {}
    for line in body.split("\n"):
        k, _, v = line.partition(": ")
        if k in ("retry", "id"):
            out[k] = int(v)
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
            assert re.search(r"^: refused: .*per_address_limit", body, re.M), body
            assert body.endswith("\n\n"), body
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
        assert st == 200 and "max_readers" in body and _fields(body)["id"] == 0, body
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
