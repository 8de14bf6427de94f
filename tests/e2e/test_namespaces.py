# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: topic namespaces ([namespace "PATTERN"] sections). Each keeps
its own history by its own retention over the one log (a chatty namespace
never prunes a quiet one's events, and a reader of the quiet one resumes
without a reset); the longest pattern wins; /api/health lists them; a bad
section is refused at start-up and on SIGHUP, naming the section and the
line."""
import json
import os
import signal
import subprocess
import tempfile
import time

from harness import HERALD_BIN, Herald, RedisServer, Stream, request

CONF = """
retention_count = 1000
[namespace "ticker/*"]
retention_count = 10
[namespace "ticker/slow/*"]
retention_count = 50
[namespace "chat/*"]
retention_count = 100
"""


def _count(h, prefix):
    return sum(1 for e in h.stored_events() if e["topic"].startswith(prefix))


def _wait_count(h, prefix, want, timeout=20.0):
    deadline = time.monotonic() + timeout
    n = None
    while time.monotonic() < deadline:
        n = _count(h, prefix)
        if n == want:
            return
        time.sleep(0.1)
    raise AssertionError(f"{prefix}: {n} events kept, expected {want}")


def _first(port, query, last_id):
    s = Stream(port, query=query, headers={"Last-Event-ID": str(last_id)})
    try:
        assert s.status == 200, s.status
        got = s.events(1, timeout=3)
        return got[0] if got else None
    finally:
        s.close()


def _opens_again(h, query, timeout=10.0):
    """A stream of query opens once the places closed streams held are
    given back (a close reaches herald a moment after the client's)."""
    deadline = time.monotonic() + timeout
    while True:
        s = Stream(h.port, query=query)
        if s.status == 200 or time.monotonic() > deadline:
            break
        s.close()
        time.sleep(0.05)
    assert s.status == 200, f"{query}: a place freed by a close was not given again"
    s.close()


def _chatty_beside_quiet(h):
    chat = h.insert_many([("message", "chat/room", f"c{k}", True) for k in range(5)])
    news = h.insert_many([("message", "news", f"n{k}", True) for k in range(3)])
    h.insert_many([("message", "ticker/acme", f"t{k}", True) for k in range(200)])
    h.insert_many([("message", "ticker/slow/x", f"s{k}", True) for k in range(60)])
    # The chatty namespace is cut to its own 10, the nested one to its 50.
    _wait_count(h, "ticker/acme", 10)
    _wait_count(h, "ticker/slow/", 50)
    assert _count(h, "chat/") == 5 and _count(h, "news") == 3
    # The quiet namespace's reader resumes from before its first event: no
    # reset, every event of it; the same for the defaults'.
    s = Stream(h.port, query="topic=chat/room", headers={"Last-Event-ID": str(chat - 1)})
    got = s.events(5, timeout=5)
    assert [e["data"] for e in got] == [f"c{k}" for k in range(5)], got
    s.close()
    s = Stream(h.port, query="topic=news", headers={"Last-Event-ID": str(news - 1)})
    assert [e["data"] for e in s.events(3, timeout=5)] == ["n0", "n1", "n2"]
    s.close()
    # Readers of the pruned namespace, or of every topic, are told.
    for q in ("topic=ticker/acme", "topic=ticker/*", ""):
        first = _first(h.port, q, chat)
        assert first and first["event"] == "reset", (q, first)
        assert json.loads(first["data"])["reason"] == "retention", first


def test_a_chatty_namespace_never_prunes_a_quiet_ones_history():
    with Herald(config=CONF) as h:
        _chatty_beside_quiet(h)
        # Kept across a restart: the namespaces' pruned-through ids are in
        # the log, so the reset stays where it was.
        db = h.db
    with Herald(db=db, config=CONF) as h:
        first = _first(h.port, "topic=ticker/acme", 1)
        assert first and first["event"] == "reset", first
        s = Stream(h.port, query="topic=chat/room", headers={"Last-Event-ID": "0"})
        assert [e["data"] for e in s.events(5, timeout=5)] == [f"c{k}" for k in range(5)]
        s.close()


test_a_chatty_namespace_never_prunes_a_quiet_ones_history.timeout = 90


def test_namespaces_keep_their_own_history_on_redis_across_two_nodes():
    # The counts live in Redis beside the stream: two nodes pruning by the
    # same sections agree, and each node's readers are reset by their
    # namespace's losses only.
    with RedisServer() as r, Herald(redis=r, redis_stream="ns", config=CONF) as h, \
            Herald(redis=r, redis_stream="ns", config=CONF) as h2:
        _chatty_beside_quiet(h)
        s = Stream(h2.port, query="topic=chat/room", headers={"Last-Event-ID": "0"})
        got = s.events(5, timeout=5)
        assert [e["data"] for e in got] == [f"c{k}" for k in range(5)], (got, h2.log()[-3000:])
        s.close()
        first = _first(h2.port, "topic=ticker/acme", 1)
        assert first and first["event"] == "reset", first


test_namespaces_keep_their_own_history_on_redis_across_two_nodes.timeout = 90


def test_retention_age_is_per_namespace():
    conf = '[namespace "tmp/*"]\nretention_age = 1m\n'
    with Herald(config=conf) as h:
        old = int(time.time()) - 3600
        # Rows an hour old: tmp/* keeps a minute, the defaults a week.
        subprocess.run(["sqlite3", "-cmd", ".timeout 5000", h.db,
                        "INSERT INTO events(topic, data, public, created_at) VALUES"
                        f"('tmp/a', 'x', 1, {old}), ('keep', 'y', 1, {old}), ('tmp/b', 'z', 1, {old})"],
                       check=True, timeout=30)
        h.insert(topic="tmp/new", data="fresh")
        _wait_count(h, "tmp/", 1)
        assert [e["topic"] for e in h.stored_events()] == ["keep", "tmp/new"]


test_retention_age_is_per_namespace.timeout = 60


def test_health_lists_the_namespaces_with_their_rules():
    with Herald(config=CONF + "anonymous = off\nmax_readers = 7\n") as h:
        st, _, body = request(h.port, "GET", "/api/health")
        assert st == 200, st
        ns = {n["pattern"]: n for n in json.loads(body)["namespaces"]}
        assert list(ns) == ["ticker/*", "ticker/slow/*", "chat/*"], ns
        assert ns["ticker/*"]["retention_count"] == 10
        # What a section does not set is the defaults'.
        assert ns["ticker/*"]["retention_age_s"] == 7 * 86400 and ns["ticker/*"]["anonymous"] is True
        assert ns["chat/*"]["anonymous"] is False and ns["chat/*"]["max_readers"] == 7


def _check(conf):
    d = tempfile.mkdtemp(prefix="herald-test-")
    p = os.path.join(d, "herald.conf")
    with open(p, "w") as f:
        f.write(conf)
    # herald reads HERALD_* variables as keys: the test tools' own are left out.
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERALD_")}
    out = subprocess.run([HERALD_BIN, "--check-config", "--config", p, "--db", os.path.join(d, "h.db")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                         timeout=30)
    return p, out.returncode, out.stdout.decode(errors="replace")


def test_bad_sections_are_refused_naming_section_and_line():
    cases = [
        ('[namespace "chat/*"]\nretention_count = lots\n', ':2: [namespace "chat/*"] retention_count = "lots"'),
        ('[namespace "chat/*"]\nretention_cuont = 5\n', ':2: [namespace "chat/*"]: "retention_cuont" is not a namespace key'),
        ('[namespace "a/*"]\npresence = off\n[namespace "a/*"]\nmercure = off\n',
         ':3: [namespace "a/*"] again: the first section is at'),
        ('[namespace "bad topic"]\npresence = off\n', ':1: [namespace'),
        ('[namespace "*"]\npresence = off\n', 'the defaults are the top-level keys'),
        ('[namespace "chat/*"]\nanonymous = maybe\n', ':2: [namespace "chat/*"] anonymous = "maybe"'),
        ('presence = off\n[namespace "chat/*"]\npresence = on\n', 'presence is off at the top level'),
    ]
    for conf, said in cases:
        p, code, out = _check(conf)
        assert code != 0, (conf, out)
        assert said in out, (conf, said, out)
        if ":" in said[:3]:
            assert p + said.split(" ")[0] in out, (conf, out)
    p, code, out = _check(CONF)
    assert code == 0, out


def test_reload_applies_a_namespace_and_refuses_a_bad_one():
    d = tempfile.mkdtemp(prefix="herald-test-")
    with Herald(dir=d, config=CONF) as h:
        h.insert_many([("message", "chat/room", f"c{k}", True) for k in range(30)])
        cpath = os.path.join(d, "herald.conf")
        with open(cpath, "w") as f:
            f.write(CONF.replace("retention_count = 100", "retention_count = 20"))
        since = h.log_size()
        h.signal(signal.SIGHUP)
        h.wait_log(r"configuration reloaded", since=since)
        _wait_count(h, "chat/", 20)
        with open(cpath, "w") as f:
            f.write(CONF + '[namespace "chat/*"]\nretention_count = 1\n')
        since = h.log_size()
        h.signal(signal.SIGHUP)
        h.wait_log(r"reload failed", since=since)
        assert 'again: the first section is at' in h.log()[since:]
        st, _, body = request(h.port, "GET", "/api/health")
        ns = {n["pattern"]: n for n in json.loads(body)["namespaces"]}
        assert ns["chat/*"]["retention_count"] == 20, ns
        assert _count(h, "chat/") == 20


test_reload_applies_a_namespace_and_refuses_a_bad_one.timeout = 60


def _rules_conf():
    from test_jwt import KEYS
    return f"""
read_token = {READ}
jwt_algorithm = HS256
jwt_secret_file = {KEYS.secret_file()}
[namespace "private/*"]
anonymous = off
publish_needs_token = on
max_readers = 2
[namespace "quiet/*"]
presence = off
"""


READ = "namespace-read-token-0123456789"


def _publish(port, topic, token=None):
    h = {"Authorization": f"Bearer {token}"} if token else {}
    st, _, body = request(port, "POST", "/api/events", body={"topic": topic, "data": "x"}, headers=h)
    return st, body


def test_rules_for_readers_and_publishers():
    from test_jwt import KEYS, claims, mint, signing_key
    from test_presence import presence
    try:
        with Herald(config=_rules_conf()) as h:
            # anonymous = off: a reader without a token is refused for its
            # topics in the namespace, and for every topic (which reach it).
            for q in ("topic=private/a", "", "topic=*", "topic=news,private/*"):
                s = Stream(h.port, query=q)
                assert s.status == 401, (q, s.status)
                s.close()
            s = Stream(h.port, query="topic=news")
            assert s.status == 200
            s.close()
            # A token opens it: the read token, or a signed one granting it.
            tok = mint("HS256", signing_key("HS256"), claims(sub=["private/*"]))
            a = Stream(h.port, query=f"topic=private/a&token={READ}")
            b = Stream(h.port, query="topic=private/a", headers={"Authorization": f"Bearer {tok}"})
            assert a.status == 200 and b.status == 200, (a.status, b.status)
            # max_readers = 2 for one topic of it: a third is refused, another topic is not.
            c = Stream(h.port, query=f"topic=private/a&token={READ}")
            assert c.status == 503, c.status
            c.close()
            d = Stream(h.port, query=f"topic=private/b&token={READ}")
            assert d.status == 200
            d.close()
            a.close()
            _opens_again(h, f"topic=private/a&token={READ}")
            b.close()
            # publish_needs_token = on: this host's token-less publish is
            # refused there, not elsewhere; a signed token's claim opens it.
            st, body = _publish(h.port, "private/a")
            assert st == 401 and b"publish_needs_token" in body, (st, body)
            assert _publish(h.port, "news")[0] == 201
            ptok = mint("HS256", signing_key("HS256"), claims(pub=["private/*"]))
            assert _publish(h.port, "private/a", ptok)[0] == 201
            # presence = off: readers there are not counted; elsewhere they are.
            q = Stream(h.port, query="topic=quiet/x")
            n = Stream(h.port, query="topic=news")
            st, body = presence(h.port, ["quiet/x", "news"])
            assert st == 200, body
            assert body["topics"]["news"]["readers"] == 1, body
            assert body["topics"]["quiet/x"]["readers"] == 0, body
            q.close()
            n.close()
            assert "reaches namespace \"private/*\", which anonymous readers may not read" in h.log()
    finally:
        KEYS.remove()


test_rules_for_readers_and_publishers.timeout = 60


def test_mercure_off_keeps_a_namespace_out_of_the_hub():
    from test_mercure import MStream, made_number, mpublish, start
    from harness import publish
    conf = 'mercure_anonymous = on\npublish_token = ptok\n[namespace "secret/*"]\nmercure = off\n'
    with start(conf) as h:
        sub = MStream(h.port, [("match", "*")])
        st, _, body = mpublish(h.port, [("topic", "secret/1"), ("data", "m")], "ptok", expect=None)
        assert st == 403 and "mercure = off" in body, (st, body)
        hidden = publish(h.port, topic="secret/1", data="herald only", token="ptok")
        shown = publish(h.port, topic="chat/1", data="both", token="ptok")
        got = sub.events(1, timeout=5)
        assert [(made_number(e["id"]), e["data"]) for e in got] == [(shown, "both")], (hidden, got)
        sub.close()
        # herald's own stream still has both.
        s = Stream(h.port, query="topic=secret/1,chat/1", headers={"Last-Event-ID": str(hidden - 1)})
        assert [e["data"] for e in s.events(2, timeout=5)] == ["herald only", "both"]
        s.close()


def test_rows_another_program_deleted_do_not_make_retention_remove_more():
    # The counts behind retention_count are counted again all the time: rows
    # deleted by something else stop counting, and the namespace still
    # keeps its newest retention_count (it would keep fewer if they counted).
    with Herald(config='[namespace "chat/*"]\nretention_count = 10\n') as h:
        h.insert_many([("message", "chat/room", f"a{k}", True) for k in range(11)])
        _wait_count(h, "chat/", 10)  # counted, and one pruned
        subprocess.run(["sqlite3", "-cmd", ".timeout 5000", h.db,
                        "DELETE FROM events WHERE id IN (SELECT id FROM events ORDER BY id LIMIT 4)"],
                       check=True, timeout=30)
        h.insert_many([("message", "chat/room", f"b{k}", True) for k in range(8)])
        deadline = time.monotonic() + 20
        while _count(h, "chat/") > 10 and time.monotonic() < deadline:
            time.sleep(0.1)
        kept = [e["data"] for e in h.stored_events()]
        assert kept == [f"a{k}" for k in range(9, 11)] + [f"b{k}" for k in range(8)], kept


test_rows_another_program_deleted_do_not_make_retention_remove_more.timeout = 60


def test_max_readers_per_topic_is_the_groups():
    # With workers the cap is the group's: however the kernel spreads the
    # connections, two streams of the topic open, not two per worker.
    conf = 'workers = 2\nper_address_limit = 0\n[namespace "capped/*"]\nmax_readers = 2\n'
    with Herald(config=conf) as h:
        streams = [Stream(h.port, query="topic=capped/x") for _ in range(8)]
        assert sorted(s.status for s in streams) == [200, 200] + [503] * 6, [s.status for s in streams]
        for s in streams:
            s.close()
        _opens_again(h, "topic=capped/x")


test_max_readers_per_topic_is_the_groups.timeout = 60
