# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: POST /api/events. The right to publish (publish_token:
401/403/201; without one, only a direct loopback or unix-socket peer), the
201 answer, how data is stored (string as is, other JSON as its text),
defaults, and the read token for non-public events."""
import json

from harness import Herald, Stream, check_refusal, publish, request, sqlite, HttpConn


def _post(h, body, headers=None, **kw):
    if isinstance(body, dict):
        body = json.dumps(body, separators=(",", ":")).encode()
    return request(h.port, "POST", "/api/events", body, headers=headers, **kw)


def test_publish_token_required():
    with Herald(args=["--publish-token", "s3cret"]) as h:
        ev = {"data": "x", "public": True}
        st, hd, body = _post(h, ev)
        check_refusal(st, hd, body, 401)
        st, hd, body = _post(h, ev, {"Authorization": "Bearer wrong"})
        check_refusal(st, hd, body, 403)
        st, hd, body = _post(h, ev, {"Authorization": "Bearer s3cret-and-more"})
        check_refusal(st, hd, body, 403)
        st, hd, body = _post(h, ev, {"Authorization": "Bearer s3cre"})
        check_refusal(st, hd, body, 403)
        st, hd, body = _post(h, ev, {"Authorization": "Bearer s3cret"})
        assert st == 201, (st, body)
        assert json.loads(body) == {"id": 1}, body
        # Nothing was stored for the refused ones.
        assert sqlite(h.db, "SELECT count(*) FROM events") == "1"


def test_loopback_publish_without_token():
    with Herald(unix=True) as h:
        ev = {"data": "x", "public": True}
        st, hd, body = _post(h, ev, {"X-Forwarded-For": "198.51.100.4"})
        check_refusal(st, hd, body, 403)
        st, hd, body = _post(h, ev, {"Forwarded": "for=198.51.100.4"})
        check_refusal(st, hd, body, 403)
        st, hd, body = _post(h, ev)
        assert st == 201, (st, body)
        assert json.loads(body) == {"id": 1}, body
        st, hd, body = _post(h, ev, path=h.sock_path)
        assert st == 201, (st, body)
        assert json.loads(body) == {"id": 2}, body
        assert sqlite(h.db, "SELECT count(*) FROM events") == "2"


def test_201_ids_increase_and_rows_stored():
    with Herald() as h:
        ids = []
        with HttpConn(h.port) as c:
            for k in range(5):
                st, hd, body = c.request("POST", "/api/events", {"type": "t.x", "topic": "a/b", "data": f"d{k}",
                                                                 "public": k % 2 == 0})
                assert st == 201, (st, body)
                assert hd.get("content-type", "").startswith("application/json"), hd
                ids.append(json.loads(body)["id"])
        assert ids == [1, 2, 3, 4, 5], ids
        rows = sqlite(h.db, "SELECT id, type, topic, data, public FROM events ORDER BY id")
        assert rows.splitlines() == [f"{k + 1}|t.x|a/b|d{k}|{1 if k % 2 == 0 else 0}" for k in range(5)], rows


def test_data_stored_as_string_or_json_text():
    cases = [
        (b'"plain text"', "plain text"),
        (b'"two\\nlines"', "two\nlines"),
        (b'"caf\\u00e9 \\"q\\""', 'caf\u00e9 "q"'),
        (b'42', "42"),
        (b'true', "true"),
        (b'{"k":[1,2,{"z":null}]}', '{"k":[1,2,{"z":null}]}'),
        (b'[1,"a"]', '[1,"a"]'),
        (b'"\\ud83d\\ude00 \\/ \\t"', "\U0001F600 / \t"),
        (b'""', ""),
    ]
    with Herald() as h:
        s = Stream(h.port)
        s.opening()
        for raw, want in cases:
            st, _, body = _post(h, b'{"public":true,"data":' + raw + b'}')
            assert st == 201, (raw, st, body)
            i = json.loads(body)["id"]
            got = s.events(1, timeout=5)
            assert got == [{"id": i, "event": "message", "data": want}], (raw, got)
            if "\n" not in want:  # the CLI prints one row per line
                stored = sqlite(h.db, f"SELECT data FROM events WHERE id={i}")
                assert stored == want, (raw, stored)
        s.close()


def test_defaults_type_topic_public():
    with Herald() as h:
        st, _, body = _post(h, {"data": "d"})
        assert st == 201, (st, body)
        i = json.loads(body)["id"]
        row = sqlite(h.db, f"SELECT type, topic, data, public FROM events WHERE id={i}")
        assert row == "message||d|0", row


def test_limits_of_type_and_topic_lengths():
    with Herald() as h:
        ok_type = "T" * 64
        ok_topic = "p/" * 64
        st, _, body = _post(h, {"type": ok_type, "topic": ok_topic, "data": "x", "public": True})
        assert st == 201, (st, body)
        st, hd, body = _post(h, {"type": "T" * 65, "data": "x"})
        check_refusal(st, hd, body, 400)
        st, hd, body = _post(h, {"topic": "p" * 129, "data": "x"})
        check_refusal(st, hd, body, 400)
        st, _, body = _post(h, {"type": "a-b_c.d:E9", "topic": "x.y:z/w-1_", "data": "x"})
        assert st == 201, (st, body)


def test_read_token_for_non_public_events():
    with Herald(args=["--read-token", "rt0k"]) as h:
        anon = Stream(h.port)
        bearer = Stream(h.port, headers={"Authorization": "Bearer rt0k"})
        query = Stream(h.port, query="token=rt0k")
        for s in (anon, bearer, query):
            assert s.status == 200, s.status
            s.opening()
        secret = publish(h.port, data="secret", public=False)
        open_ = publish(h.port, data="open", public=True)
        want_all = [{"id": secret, "event": "message", "data": "secret"},
                    {"id": open_, "event": "message", "data": "open"}]
        assert bearer.events(2, timeout=5) == want_all
        assert query.events(2, timeout=5) == want_all
        # The anonymous reader's first event must be the public one.
        assert anon.events(1, timeout=5) == [want_all[1]]
        # Resume: the anonymous reader skips the non-public one, the token
        # holder gets both.
        r_anon = Stream(h.port, headers={"Last-Event-ID": "0"})
        assert r_anon.events(1, timeout=5) == [want_all[1]]
        r_tok = Stream(h.port, headers={"Last-Event-ID": "0", "Authorization": "Bearer rt0k"})
        assert r_tok.events(2, timeout=5) == want_all
        for s in (anon, bearer, query, r_anon, r_tok):
            s.close()
