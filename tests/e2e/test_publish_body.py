# SPDX-License-Identifier: BSD-2-Clause
"""Publish bodies at the edges of JSON and UTF-8: what is stored is exactly
what was sent, or the body is refused with the reason; never a silent cut."""
import json

from harness import Herald, Stream, connect, read_response, request, sqlite


def _post(port, raw):
    return request(port, "POST", "/api/events", body=raw)


def test_refused_bodies_name_the_cause():
    cases = [
        (b'{"data":"a\\u0000b","public":true}', "u0000"),
        (b'{"type":"t\\u0000x","data":"d"}', "u0000"),
        (b'{"data":"\xff"}', "UTF-8"),
        (b'{"data":"\xed\xa0\x80"}', "UTF-8"),          # an encoded surrogate
        (b'{"data":"\xc0\xaf"}', "UTF-8"),              # an overlong encoding
        (b'{"data":"a\x00b"}', "NUL"),
        (b'{"data":"x","data":"y"}', "twice"),
        (b'{"data":"x","public":1}', "true or false"),
        (b'{"data":"x"} trailing', "not valid JSON"),
        (b'[{"data":"x"}]', "JSON object"),
        # An unknown field is named, with the field it is nearest to.
        (b'{"topc":"news","data":"x"}', 'unknown field "topc" (did you mean "topic"?)'),
        (b'{"Data":"x"}', 'unknown field "Data" (did you mean "data"?)'),
        (b'{"data":"x","payload":1}', 'unknown field "payload"; the fields are type, topic, data and public'),
        # A name that would break a log line is escaped there and here.
        (b'{"data":"x","a\\nb":1}', 'unknown field "a\\x0ab"'),
    ]
    with Herald() as h:
        for raw, cause in cases:
            st, _, body = _post(h.port, raw)
            assert st == 400, (raw, st, body)
            err = json.loads(body)
            assert err["status"] == 400 and cause in err["error"], (raw, err)
        # A long name is cut in the answer.
        st, _, body = _post(h.port, b'{"data":"x","' + b"k" * 5000 + b'":1}')
        assert st == 400 and len(json.loads(body)["error"]) < 200, body[:300]
        rows = sqlite(h.db, "SELECT count(*) FROM events").strip()
        assert rows == "0", f"refused bodies stored {rows} rows"
        assert "refused" in h.log() and not any(l.startswith("b") for l in h.log().splitlines()), h.log()[-2000:]


def test_stored_and_streamed_exactly():
    sent = [
        ('{"data":"caf\\u00e9 \\ud83d\\ude00","public":true}', "café 😀"),
        ('{"data":"caf\u00e9 \U0001F600","public":true}', "café 😀"),
        ('{"data":"a\\\\u0000b","public":true}', "a\\u0000b"),   # an escaped backslash, not a NUL
        ('{"data":{"k":[1,2.5,true,null]},"public":true}', '{"k":[1,2.5,true,null]}'),
        ('{"data":42,"public":true}', "42"),
        ('{"data":false,"public":true}', "false"),
        ('{"data":"","public":true}', ""),
    ]
    with Herald() as h:
        s = Stream(h.port)
        s.opening()
        ids = []
        for raw, _ in sent:
            st, _, body = _post(h.port, raw.encode())
            assert st == 201, (raw, st, body)
            ids.append(json.loads(body)["id"])
        got = s.events(len(sent))
        assert [e["id"] for e in got] == ids, got
        for (raw, want), e in zip(sent, got):
            assert e["data"] == want, (raw, e["data"], want)
        s.close()


def test_expect_100_continue():
    # A client that waits for 100 Continue before its body is told at once,
    # then answered as usual; one that sends the body anyway gets no 100.
    body = json.dumps({"data": "after continue", "public": True}).encode()
    head = (b"POST /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    with Herald() as h:
        s = connect(h.port)
        s.sendall(head)
        got = b""
        while b"\r\n\r\n" not in got:
            d = s.recv(4096)
            assert d, got
            got += d
        assert got == b"HTTP/1.1 100 Continue\r\n\r\n", got
        s.sendall(body)
        st, _, answer = read_response(s)
        assert st == 201, (st, answer)
        s.close()
        s = connect(h.port)
        s.sendall(head + body)
        st, _, answer = read_response(s)
        assert st == 201, (st, answer)
        s.close()
