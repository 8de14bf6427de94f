# SPDX-License-Identifier: BSD-2-Clause
"""What a Mercure subscriber's URL patterns may cost herald's loop.

A Mercure subscriber is judged by its own rule (its matchers, run on each
update's topics), not by SQL: catch-up reads every row and the rule looks at
each, and every update is judged for each subscriber its topics may
interest. These tests send the costly cases herald must bound:

- patterns too wide to be judged cheaply (a thousand wildcards in 1 KB)
  are refused with 400 naming why;
- 31 subscribers from one address with the costliest patterns allowed do
  not hold the loop while updates are published (the same patterns are
  judged once per update for all of them: counted in /metrics), and each
  gets exactly the updates its patterns match;
- 31 different costly subscriptions under literal path prefixes cost an
  update only those whose prefix its topics have (counted);

- catch-up from `earliest` over a long log with URL patterns that match no
  row: every row is judged, and the judging must be cut into steps of about
  a millisecond of loop per pass, so health requests are answered meanwhile
  (with the log in SQLite, and on Redis);
- the same with patterns that match some rows: exactly those, in order,
  once each, however many passes the catch-up took.

The latency bound asserted (500 ms for one health request) is far above
what herald needs on a busy machine (a step of about a millisecond), and far
below what one step took when judging was not counted (0.9 s, 4.4 s under
ASan: the loop judged 1,024 rows of 300-byte topics in one piece).
"""

# The tests that time health requests run with nothing beside them (marked
# alone below); the others count work or check what is sent.

import json
import sqlite3
import threading
import time
import urllib.parse

from harness import Herald, RedisServer, check_refusal, request, wait_until
from test_mercure import MStream, made_number

HUB = "https://hub.example/.well-known/mercure"
ROWS = 20000
TOPIC_LEN = 300
# The first rows' topics are longer: judging one of them costs about a
# millisecond, so that the 1,024 rows a catch-up read used to judge in one
# piece hold the loop for a second.
LONG_ROWS = 2048
LONG_TOPIC_LEN = 4000
# Eight patterns 32 wide (the widest a subscription may have in all: 256):
# sixteen wildcards, each followed by a byte. On topics of 'a's every
# position stays live, and the last byte ('Z' or 'Y'...) is never there, so
# each pattern runs to the end of each topic.
NEVER = [("*a" * 15) + "*" + chr(ord("Z") - i) for i in range(8)]
HEALTH_BOUND = 0.5


def start(rows_sql):
    """A herald with anonymous Mercure subscribers, over a log that rows_sql
    (run on the stopped herald's database in one transaction) filled."""
    conf = "mercure_anonymous = on\nmercure_url = %s\n" % HUB
    h = Herald(config=conf)
    h.stop()
    c = sqlite3.connect(h.db, timeout=10)
    c.executescript("BEGIN;" + rows_sql + "COMMIT;")
    c.close()
    return Herald(db=h.db, config=conf)


def fill_sql(matching_every=0):
    """ROWS rows of 'a's (LONG_TOPIC_LEN of them in the first LONG_ROWS rows,
    TOPIC_LEN in the others); with matching_every, every such row's topic is
    'books/<i>' instead (a topic the matching tests' pattern takes)."""
    topic = "CASE WHEN i <= %d THEN '%s' ELSE '%s' END" % (LONG_ROWS, "a" * LONG_TOPIC_LEN, "a" * TOPIC_LEN)
    if matching_every:
        topic = "CASE WHEN i %% %d = 0 THEN 'books/' || i ELSE %s END" % (matching_every, topic)
    return ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d) "
            "INSERT INTO events(type, topic, data, public) SELECT 'x', %s, 'd' || i, 1 FROM n;" % (ROWS, topic))


def gauge(port, name):
    st, _, body = request(port, "GET", "/metrics", timeout=60)
    assert st == 200
    for ln in body.decode().splitlines():
        if ln.startswith(name + " "):
            return float(ln.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def subscribe_from_earliest(port, params):
    """A Mercure subscription resuming from earliest (MStream)."""
    s = MStream(port, params, headers={"Last-Event-ID": "earliest"}, timeout=10)
    assert s.status == 200, s.status
    return s


def id_data(events):
    """(id, data) of each event, a made id as the number it carries."""
    return [(e["id"] if made_number(e["id"]) is None else str(made_number(e["id"])), e["data"]) for e in events]


def worst_health_until_live(h, timeout):
    """Time health requests back to back until no reader is catching up;
    the slowest answer, in seconds."""
    worst = 0.0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t0 = time.monotonic()
        st, _, _ = request(h.port, "GET", "/api/health", timeout=60)
        worst = max(worst, time.monotonic() - t0)
        assert st == 200
        if gauge(h.port, "herald_readers_catching_up") == 0:
            return worst
    raise AssertionError(f"the subscriber did not reach the live edge in {timeout} s (worst health {worst:.2f} s)")


def catch_up_matching_nothing(h):
    """The catch-up of one subscriber whose patterns match no row of h's
    log, timed from another client; then a row it wants."""
    params = [("match", "done")] + [("match_urlpattern", p) for p in NEVER]
    s = subscribe_from_earliest(h.port, params)
    worst = worst_health_until_live(h, timeout=240)
    assert worst < HEALTH_BOUND, f"a health request waited {worst:.2f} s behind the Mercure catch-up"
    # The catch-up ended where the log did: the next matching row comes,
    # and nothing before it.
    new_id = h.insert(topic="done", data="after")
    assert new_id == ROWS + 1
    assert id_data(s.events(1, timeout=20)) == [(str(ROWS + 1), "after")]
    s.close()


def test_catchup_over_patterns_matching_nothing_is_cut_into_steps():
    h = start(fill_sql())
    try:
        catch_up_matching_nothing(h)
    finally:
        h.stop()


test_catchup_over_patterns_matching_nothing_is_cut_into_steps.timeout = 400
test_catchup_over_patterns_matching_nothing_is_cut_into_steps.alone = True


def test_catchup_over_patterns_on_the_redis_log_is_cut_into_steps():
    """The same with the log on Redis: rows come in pages into the window
    (store_window.c) and the same budget cuts their judging."""
    with RedisServer() as r:
        conf = "mercure_anonymous = on\nmercure_url = %s\n" % HUB
        with Herald(config=conf, redis=r) as h:
            for first in range(1, ROWS + 1, 200):
                h.insert_many([("x", "a" * (LONG_TOPIC_LEN if i <= LONG_ROWS else TOPIC_LEN), "d%d" % i, True)
                               for i in range(first, min(first + 200, ROWS + 1))])
            wait_until(lambda: json.loads(request(h.port, "GET", "/api/health")[2])["last_id"] == ROWS,
                       timeout=60, what="herald to read the entries")
            catch_up_matching_nothing(h)


test_catchup_over_patterns_on_the_redis_log_is_cut_into_steps.timeout = 400
test_catchup_over_patterns_on_the_redis_log_is_cut_into_steps.alone = True


def test_catchup_over_patterns_matching_some_rows_is_exact():
    every = 97
    h = start(fill_sql(matching_every=every))
    try:
        params = [("match_urlpattern", "books/:n")] + [("match_urlpattern", p) for p in NEVER[1:]]
        s = subscribe_from_earliest(h.port, params)
        want = [(str(i), "d%d" % i) for i in range(every, ROWS + 1, every)]
        got = id_data(s.events(len(want), timeout=240))
        assert got == want, f"got {len(got)} events, expected {len(want)}: first differences " + \
            str([(g, w) for g, w in zip(got, want) if g != w][:5])
        wait_until(lambda: gauge(h.port, "herald_readers_catching_up") == 0, timeout=60)
        new_id = h.insert(topic="books/new", data="later")
        assert id_data(s.events(1, timeout=20)) == [(str(new_id), "later")]
        assert s.events(1, timeout=0.5) == []
        s.close()
    finally:
        h.stop()


test_catchup_over_patterns_matching_some_rows_is_exact.timeout = 400


def test_patterns_too_wide_are_refused_naming_why():
    conf = "mercure_anonymous = on\nmercure_url = %s\n" % HUB
    with Herald(config=conf) as h:
        # Eight patterns of a thousand wildcards (8 KB, within the request
        # line's limit): each one alone is too wide.
        wide = "*a" * 490
        q = urllib.parse.urlencode([("match_urlpattern", wide)] * 8, safe="*:/")
        st, hd, body = request(h.port, "GET", "/.well-known/mercure?" + q)
        check_refusal(st, hd, body, 400)
        assert "wider than 64" in json.loads(body)["error"], body
        # Five allowed at the bound: together too wide.
        at_bound = "https://example.com/" + "*a" * 31 + "*b"
        q = urllib.parse.urlencode([("match_urlpattern", at_bound)] * 5, safe="*:/")
        st, hd, body = request(h.port, "GET", "/.well-known/mercure?" + q)
        check_refusal(st, hd, body, 400)
        assert "wider than 256 in all" in json.loads(body)["error"], body
        # Four are taken.
        s = MStream(h.port, [("match_urlpattern", at_bound)] * 4)
        assert s.status == 200
        s.close()


SUBSCRIBERS = 31  # one fewer than per_address_limit: all from one address
FANOUT_UPDATES = 12
TOPIC_BYTES = 2000
TOPICS_PER_UPDATE = 4


def fanout_patterns():
    """Eight patterns 32 wide (256 in all, the most one subscription may
    have), none with a literal path prefix to be found by: seven match no
    topic of 'a's, the eighth those that end in /hit."""
    never = ["https://example.com/" + "*a" * 15 + "*" + chr(ord("Z") - i) for i in range(7)]
    return never + ["https://example.com/" + "*a" * 13 + "*/hit"]


def fanout_update(i):
    """The form of update i: four topics of 2 KB of 'a's; the odd ones end
    in /hit (the eighth pattern takes them)."""
    tail = "/hit" if i % 2 else ""
    topics = ["https://example.com/%d/%s%s" % (k, "a" * (TOPIC_BYTES - 30), tail) for k in range(TOPICS_PER_UPDATE)]
    return [("topic", t) for t in topics] + [("data", "update %d" % i), ("id", "urn:u:%d" % i)]


def test_costly_patterns_of_many_subscribers_do_not_hold_the_fanout():
    conf = "mercure_anonymous = on\nmercure_url = %s\n" % HUB
    with Herald(config=conf) as h:
        params = [("match_urlpattern", p) for p in fanout_patterns()]
        subs = [MStream(h.port, params, timeout=30) for _ in range(SUBSCRIBERS)]
        assert [s.status for s in subs] == [200] * SUBSCRIBERS, [(s.status, s.buf) for s in subs if s.status != 200]
        wait_until(lambda: gauge(h.port, "herald_readers") == SUBSCRIBERS, timeout=30)
        done = threading.Event()
        failures = []

        def publisher():
            try:
                for i in range(FANOUT_UPDATES):
                    body = urllib.parse.urlencode(fanout_update(i))
                    st, _, b = request(h.port, "POST", "/.well-known/mercure", body, timeout=60,
                                       headers={"Content-Type": "application/x-www-form-urlencoded"})
                    if st != 200:
                        failures.append((st, b))
            except Exception as e:  # reported by the main thread
                failures.append(e)
            finally:
                done.set()

        judged0 = gauge(h.port, "herald_mercure_judged_total")
        steps0 = gauge(h.port, "herald_mercure_match_steps_total")
        t = threading.Thread(target=publisher)
        t.start()
        worst = 0.0
        while not done.is_set():
            t0 = time.monotonic()
            st, _, _ = request(h.port, "GET", "/api/health", timeout=60)
            worst = max(worst, time.monotonic() - t0)
            assert st == 200
        t.join()
        assert not failures, failures
        want = [("urn:u:%d" % i, "update %d" % i) for i in range(FANOUT_UPDATES) if i % 2]
        for s in subs:
            assert id_data(s.events(len(want), timeout=30)) == want
        for s in subs:
            assert s.events(1, timeout=0.2) == []
            s.close()
        # Work, counted: the subscribers' matchers are the same, so each
        # update was judged once for all 31, in at most (256 + 8) steps per
        # byte of its topics (resolved: they are absolute).
        judged = gauge(h.port, "herald_mercure_judged_total") - judged0
        steps = gauge(h.port, "herald_mercure_match_steps_total") - steps0
        assert judged == FANOUT_UPDATES, judged
        topic_bytes = sum(len(v) for k, v in fanout_update(0) if k == "topic") + 4 * TOPICS_PER_UPDATE
        assert 0 < steps <= FANOUT_UPDATES * (256 + 8) * topic_bytes, steps
        assert worst < HEALTH_BOUND, f"a health request waited {worst:.2f} s behind the fan-out"


test_costly_patterns_of_many_subscribers_do_not_hold_the_fanout.timeout = 300
test_costly_patterns_of_many_subscribers_do_not_hold_the_fanout.alone = True


def test_updates_cost_only_the_subscribers_their_paths_may_interest():
    """31 different costly subscriptions, each under its own literal path
    prefix: an update elsewhere is judged for none of them, an update under
    one prefix for that one only (counted in /metrics)."""
    conf = "mercure_anonymous = on\nmercure_url = %s\n" % HUB
    with Herald(config=conf) as h:
        def patterns(k):
            return ["https://example.com/shelf-%d/" % k + "*a" * 15 + "*" + chr(ord("Z") - i) for i in range(7)] + \
                ["https://example.com/shelf-%d/" % k + "*a" * 13 + "*/hit"]

        subs = [MStream(h.port, [("match_urlpattern", p) for p in patterns(k)], timeout=30)
                for k in range(SUBSCRIBERS)]
        assert [s.status for s in subs] == [200] * SUBSCRIBERS
        wait_until(lambda: gauge(h.port, "herald_readers") == SUBSCRIBERS, timeout=30)

        def post(topics, i):
            body = urllib.parse.urlencode([("topic", t) for t in topics] + [("data", "u%d" % i), ("id", "urn:v:%d" % i)])
            st, _, b = request(h.port, "POST", "/.well-known/mercure", body, timeout=60,
                               headers={"Content-Type": "application/x-www-form-urlencoded"})
            assert st == 200, b

        judged0 = gauge(h.port, "herald_mercure_judged_total")
        for i in range(10):
            post(["https://example.com/other/%d/%s/hit" % (k, "a" * 1900) for k in range(4)], i)
        post(["https://example.com/shelf-3/%s/hit" % ("a" * 1900)], 10)
        post(["https://example.com/shelf-7/%s" % ("a" * 1900), "https://example.com/shelf-9/%s/hit" % ("a" * 20)],
             11)
        assert id_data(subs[3].events(1, timeout=30)) == [("urn:v:10", "u10")]
        assert id_data(subs[9].events(1, timeout=30)) == [("urn:v:11", "u11")]
        judged = gauge(h.port, "herald_mercure_judged_total") - judged0
        # Update 10: shelf-3's subscriber; update 11: shelf-7's and shelf-9's.
        assert judged == 3, judged
        for k, s in enumerate(subs):
            assert s.events(1, timeout=0.2) == [], k
            s.close()


test_updates_cost_only_the_subscribers_their_paths_may_interest.timeout = 120
