# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: publishes made safe to retry with Idempotency-Key.

Within idempotency_window the same key from the same publisher is answered
as the first time (201, the same body) and stores nothing; the same key with
another body is 422 (and logged); a malformed key is 400. Keys are scoped to
the publisher (a signed token's subject, the publish token, or the local
peer), kept with the log so a retry after a SIGKILL, or to another node on
the same Redis, gets the original id; a key whose event retention removed
is stored anew. Every publish here goes to a real herald on loopback, with
real SQLite or a redis-server of the test's own."""
import json
import time

from harness import HttpConn, Herald, RedisServer, check_refusal, request, sqlite, wait_until
from test_jwt import claims, jwt_args, jwt_test, mint, signing_key


def _post(h, body, key=None, headers=None, path=None):
    hd = dict(headers or {})
    if key is not None:
        hd["Idempotency-Key"] = key
    if isinstance(body, dict):
        body = json.dumps(body, separators=(",", ":")).encode()
    return request(h.port, "POST", "/api/events", body, headers=hd, path=path)


def _count(h):
    return len(h.stored_events())


def test_replay_conflict_and_malformed_keys():
    with Herald(unix=True) as h:
        ev = {"type": "order.paid", "topic": "orders", "data": {"n": 1}, "public": True}
        st, hd, body = _post(h, ev, '"order-1"')
        assert st == 201, (st, body)
        first = body
        eid = json.loads(body)["id"]
        # A retry: the same answer, nothing stored.
        for _ in range(3):
            st, hd, body = _post(h, ev, '"order-1"')
            assert (st, body) == (201, first), (st, body)
        assert _count(h) == 1
        # The same key with another body: 422 naming the event, and a log line.
        since = h.log_size()
        st, hd, body = _post(h, dict(ev, data={"n": 2}), '"order-1"')
        check_refusal(st, hd, body, 422)
        assert f"event {eid}" in json.loads(body)["error"], body
        h.wait_log(r'Idempotency-Key "order-1" of peer:127\.0\.0\.1 was used for event \d+ with another body',
                   since=since)
        assert _count(h) == 1
        # Malformed keys are refused before anything is stored.
        for bad in ['order-1', '""', '"a"b"', '"a\tb"', '"a\\x"',
                    ':b3JkZXI=:', '"' + "k" * 256 + '"']:
            st, hd, body = _post(h, ev, bad)
            check_refusal(st, hd, body, 400)
            assert "Idempotency-Key" in json.loads(body)["error"], (bad, body)
        twice = (b"POST /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Idempotency-Key: \"a\"\r\nIdempotency-Key: \"b\"\r\nContent-Length: 11\r\n\r\n{\"data\":1}\n")
        with HttpConn(h.port) as c:
            c.send(twice)
            st, hd, body = c.read_response()
        check_refusal(st, hd, body, 400)
        assert _count(h) == 1
        # An escaped quote is part of the key, and a key is the publisher's
        # own: the unix-socket peer is another publisher.
        st, _, body = _post(h, ev, '"order-\\"1\\""')
        assert st == 201 and json.loads(body)["id"] != eid, body
        st, _, body = _post(h, ev, '"order-1"', path=h.sock_path)
        assert st == 201 and json.loads(body)["id"] not in (eid,), body
        assert _count(h) == 3
        # Publishes without a key are never deduplicated.
        ids = {json.loads(_post(h, ev)[2])["id"] for _ in range(2)}
        assert len(ids) == 2
        metrics = request(h.port, "GET", "/metrics")[2].decode()
        assert "herald_events_published_total 5" in metrics, metrics
        assert "herald_publish_replays_total 3" in metrics, metrics


def _same_key_in_one_batch(redis):
    with Herald(redis=redis) as h:
        body = json.dumps({"data": "x", "public": True}).encode()
        other = json.dumps({"data": "y", "public": True}).encode()
        conns = [HttpConn(h.port) for _ in range(12)]
        try:
            reqs = []
            for i, c in enumerate(conns):
                if i % 3 == 2:
                    reqs.append(HttpConn.format("POST", "/api/events", body, {}))
                elif i == 7:
                    reqs.append(HttpConn.format("POST", "/api/events", other, {"Idempotency-Key": '"batch"'}))
                else:
                    reqs.append(HttpConn.format("POST", "/api/events", body, {"Idempotency-Key": '"batch"'}))
            for c, r in zip(conns, reqs):
                c.send(r)
            answers = [c.read_response() for c in conns]
        finally:
            for c in conns:
                c.close()
        keyed = [json.loads(b)["id"] for i, (s, _, b) in enumerate(answers) if i % 3 != 2 and i != 7]
        assert len(set(keyed)) == 1, answers
        assert all(answers[i][0] == 201 for i in range(12) if i != 7), answers
        # The one with another body came after the first with that key
        # (422 against its id), or first (then the others would have been
        # refused: they were not, so it would hold the same id).
        if answers[7][0] == 201:
            assert json.loads(answers[7][2])["id"] == keyed[0]
        else:
            assert answers[7][0] == 422, answers[7]
        unkeyed = [json.loads(answers[i][2])["id"] for i in range(12) if i % 3 == 2]
        assert len(set(unkeyed)) == 4 and keyed[0] not in unkeyed
        assert _count(h) == 5


def test_same_key_in_one_batch_makes_one_event():
    """Publishes that arrive together are committed in one transaction (one
    FCALL with Redis): keyed ones with the same key resolve to one event,
    unkeyed ones beside them are stored, each answered."""
    _same_key_in_one_batch(None)
    r = RedisServer()
    try:
        _same_key_in_one_batch(r)
    finally:
        r.close()


def test_retry_after_sigkill_gets_the_same_id_sqlite():
    h = Herald()
    ev = {"data": "charge 42", "public": True}
    try:
        st, _, first = _post(h, ev, '"charge-42"')
        assert st == 201, first
    finally:
        h.kill()  # SIGKILL after the answer: nothing closed cleanly
    with Herald(db=h.db) as h2:
        st, _, body = _post(h2, ev, '"charge-42"')
        assert (st, body) == (201, first), (st, body)
        st, hd, body = _post(h2, dict(ev, data="charge 43"), '"charge-42"')
        check_refusal(st, hd, body, 422)
        assert sqlite(h2.db, "SELECT count(*) FROM events") == "1"
        assert sqlite(h2.db, "SELECT count(*) FROM herald_idempotency") == "1"


def test_retry_to_another_node_after_sigkill_redis():
    """Two nodes on one Redis: the key is answered on node A, A is killed,
    the retry goes to node B and gets the same id (the keys live in Redis,
    written by herald_publish with the append)."""
    r = RedisServer()
    a = b = None
    try:
        a = Herald(redis=r)
        b = Herald(redis=r, db=a.db)
        if True:
            ev = {"data": "transfer 7", "public": True}
            st, _, first = _post(a, ev, '"transfer-7"')
            assert st == 201, first
            a.kill()
            st, _, body = _post(b, ev, '"transfer-7"')
            assert (st, body) == (201, first), (st, body)
            st, hd, body = _post(b, dict(ev, data="transfer 8"), '"transfer-7"')
            check_refusal(st, hd, body, 422)
            # Mixed batches on Redis too: an unkeyed event and a new key.
            st, _, b1 = _post(b, ev)
            st2, _, b2 = _post(b, ev, '"transfer-9"')
            assert st == st2 == 201 and json.loads(b1)["id"] != json.loads(b2)["id"]
            assert _count(b) == 3
            keys = r.command("KEYS", "*idem*")
            assert len(keys) == 2, keys
            # One keyed FCALL, as a batch: the same key twice is one event,
            # another hash a conflict, an unkeyed row beside them stored.
            s = b.redis_stream
            got = r.command("FCALL", "herald_publish", "3", f"{{{s}}}:events", f"{{{s}}}:last", f"{{{s}}}:idem:t",
                            "60", "t", "x", "d", "1", "3", "h1", "t", "x", "d", "1", "3", "h1",
                            "t", "x", "d2", "1", "3", "h2", "t", "x", "u", "1", "0", "")
            n = got[1]
            assert got == [1, n, 2, n, 3, n, 1, n + 1], got
            assert _count(b) == 5
            ttl = r.command("TTL", keys[0])
            assert 86000 < ttl <= 86400, ttl
    finally:
        for n in (a, b):
            if n is not None:
                n.kill()
        r.close()


@jwt_test(60)
def test_signed_token_keys_are_scoped_to_the_subject():
    with Herald(args=jwt_args("HS256")) as h:
        def tok(subject, ttl):
            c = claims(pub=["*"], ttl=ttl)
            c["sub"] = subject
            return mint("HS256", signing_key("HS256"), c)
        ev = {"data": "x", "public": True}
        st, _, first = _post(h, ev, '"k"', {"Authorization": "Bearer " + tok("alice", 60)})
        assert st == 201, first
        # A new token of the same subject is the same publisher.
        st, _, body = _post(h, ev, '"k"', {"Authorization": "Bearer " + tok("alice", 120)})
        assert (st, body) == (201, first)
        # Another subject, or the local peer without a token, is not.
        st, _, body = _post(h, ev, '"k"', {"Authorization": "Bearer " + tok("bob", 60)})
        assert st == 201 and body != first
        st, _, body = _post(h, ev, '"k"')
        assert st == 201 and body != first
        assert _count(h) == 3


def _pruned_event_and_window(redis):
    with Herald(args=["--retention-count", "1", "--idempotency-window", "2s"], redis=redis) as h:
        ev = {"data": "x", "public": True}
        st, _, first = _post(h, ev, '"old"')
        fid = json.loads(first)["id"]
        _post(h, {"data": "newer", "public": True})
        wait_until(lambda: all(e["id"] != fid for e in h.stored_events()), timeout=20,
                   what="retention to remove the first event")
        st, _, body = _post(h, ev, '"old"')
        assert st == 201 and json.loads(body)["id"] > fid, body
        again = json.loads(body)["id"]
        # The window: the same key is answered with the same id until it
        # has passed, then stored anew.
        t0 = time.monotonic()
        seen = []

        def renewed():
            s, _, b = _post(h, ev, '"old"')
            seen.append((time.monotonic() - t0, json.loads(b)["id"]))
            return json.loads(b)["id"] != again

        wait_until(renewed, timeout=10, interval=0.2, what="the key to expire")
        assert seen[0][1] == again, seen
        assert seen[-1][0] >= 1.0, seen


def test_key_of_a_pruned_event_and_the_window():
    """Retention removes a key with its event (SQLite deletes the key; on
    Redis a key naming a trimmed event counts as absent): a retry after that
    stores the event anew. Past idempotency_window a key is forgotten too."""
    _pruned_event_and_window(None)


def test_key_of_a_pruned_event_and_the_window_redis():
    r = RedisServer()
    try:
        _pruned_event_and_window(r)
    finally:
        r.close()
