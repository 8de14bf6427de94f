# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: webhooks (webhook_url). The application is a small HTTP
server on loopback run by the test (Python's http.server in a thread) that
checks each request's signature (HMAC-SHA256 of "<Herald-Timestamp>." and
the body, with webhook_secret) and records the batches. Presence joins and
leaves reach it after presence_grace, and a Mercure subscription's event;
publishes only with webhook_publishes; an application answering 500, then
stopped and started again on its port, gets every event at least once, in
id order, in batches of at most webhook_batch; rows retention removed
before they were delivered are skipped, counted and logged; a herald
restarted resumes from the stored cursor (nothing acknowledged is sent
again); webhook_url without webhook_secret is refused
at start-up and on SIGHUP, naming the key; and on the Redis log two nodes
share one lease, as do the workers of a group: one delivers, and on Redis
the other node takes over when the holder is killed, and at once when it
stops cleanly (the lease released before it exits)."""
import hashlib
import hmac
import http.server
import json
import os
import re
import signal
import tempfile
import threading
import time

from harness import Herald, RedisServer, Stream, publish, request, wait_until
from test_mercure import MStream, SECRET as MERCURE_SECRET, HUB, mint

WH_SECRET = "webhook-secret-0123456789abcdef"


class App:
    """The application's webhook endpoint on 127.0.0.1 (port 0, or the one
    given), in a thread. statuses: the answers of the next requests (then
    200). Records (events, signature ok) per request."""

    def __init__(self, port=0, statuses=()):
        self.statuses = list(statuses)
        self.batches = []  # the events list of each request answered 2xx
        self.requests = 0
        self.bad_signatures = 0
        self.lock = threading.Lock()
        self.port = port
        self.server = None
        self.start()

    def start(self):
        app = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                ts = self.headers.get("Herald-Timestamp", "")
                want = "sha256=" + hmac.new(WH_SECRET.encode(), ts.encode() + b"." + body,
                                            hashlib.sha256).hexdigest()
                ok = hmac.compare_digest(want, self.headers.get("Herald-Signature", "")) and \
                    abs(time.time() - int(ts)) < 300
                with app.lock:
                    app.requests += 1
                    status = app.statuses.pop(0) if app.statuses else 200
                    if not ok:
                        app.bad_signatures += 1
                        status = 401
                    elif status == 200:
                        app.batches.append(json.loads(body)["events"])
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        http.server.ThreadingHTTPServer.allow_reuse_address = True
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/hooks/herald"

    def events(self):
        with self.lock:
            return [e for b in self.batches for e in b]

    def ids(self):
        return [e["id"] for e in self.events()]


def conf(app, extra=""):
    return f"webhook_url = {app.url}\nwebhook_secret = {WH_SECRET}\n{extra}"


def metric(port, name):
    st, _, body = request(port, "GET", "/metrics")
    assert st == 200
    m = re.search(rf"^{re.escape(name)} (\S+)$", body.decode(), re.M)
    assert m, name
    return float(m.group(1))


def test_webhook_presence_and_subscription_events_signed_publishes_left_out():
    app = App()
    tmp = tempfile.mkdtemp(prefix="herald-test-")
    with open(os.path.join(tmp, "secret"), "w") as f:
        f.write(MERCURE_SECRET)
    c = conf(app, f"jwt_algorithm = HS256\njwt_secret_file = {tmp}/secret\nmercure_url = {HUB}\n"
                  "mercure_anonymous = on\nmercure_subscriptions = on\npresence_events = on\npresence_grace = 200ms\n")
    with Herald(dir=tmp, config=c) as h:
        publish(h.port, topic="news", data="not delivered")  # webhook_publishes is off
        tok = mint({"sub": "carol", "subscribe": ["*"]})
        s = Stream(h.port, query="topic=room/1", headers={"Authorization": "Bearer " + tok})
        wait_until(lambda: any(e["type"] == "presence.join" for e in app.events()), what="the join")
        s.close()
        wait_until(lambda: any(e["type"] == "presence.leave" for e in app.events()), what="the leave")
        m = MStream(h.port, [("topic", "https://example.com/books/1")])
        wait_until(lambda: any(e["kind"] == "subscription" for e in app.events()), what="the subscription event")
        m.close()
        evs = app.events()
        assert [e["kind"] for e in evs][:2] == ["presence", "presence"], evs
        join = evs[0]
        assert join["topic"] == "$presence/room/1" and json.loads(join["data"]) == {
            "action": "join", "topic": "room/1", "subject": "carol"}, join
        assert isinstance(join["id"], int) and join["time"] > 0
        sub = next(e for e in evs if e["kind"] == "subscription")
        doc = json.loads(sub["data"])
        assert doc["type"] == "subscription" and doc["active"] is True and sub["type"] == "mercure", sub
        assert all(e["kind"] != "publish" for e in evs), evs
        assert app.ids() == sorted(set(app.ids())), app.ids()
        assert app.bad_signatures == 0
        assert metric(h.port, "herald_webhook_deliveries_total") >= 2
        wait_until(lambda: metric(h.port, "herald_webhook_events_total") == len(app.events()), what="counted")
        h.stop()
    app.stop()


def test_webhook_publishes_through_failures_and_an_application_restart():
    app = App(statuses=[500])
    with Herald(config=conf(app, "webhook_publishes = on\nwebhook_batch = 2\n")) as h:
        ids = [publish(h.port, data=f"e{i}") for i in range(3)]
        wait_until(lambda: app.ids() == ids, timeout=8, what="delivered after the 500")
        assert app.requests >= 2
        wait_until(lambda: metric(h.port, "herald_webhook_failures_total") >= 1, what="the failure counted")
        assert [e["data"] for e in app.events()] == ["e0", "e1", "e2"]
        assert app.events()[0]["kind"] == "publish" and app.events()[0]["topic"] == "news"
        # The application goes away and comes back on its port: what was
        # published meanwhile arrives, in order, at least once.
        app.stop()
        more = [publish(h.port, data=f"m{i}") for i in range(3)]
        wait_until(lambda: metric(h.port, "herald_webhook_failures_total") >= 2, what="a refused attempt")
        assert metric(h.port, "herald_webhook_lag") >= 1
        app.start()
        wait_until(lambda: set(more) <= set(app.ids()), timeout=8, what="delivered after the restart")
        got = app.ids()
        assert got == sorted(got) and set(got) == set(ids + more), got
        assert max(len(b) for b in app.batches) <= 2, app.batches
        wait_until(lambda: metric(h.port, "herald_webhook_lag") == 0, what="no lag")
        assert "webhook http://127.0.0.1:%d/hooks/herald: answered HTTP 500" % app.port in h.log()
        h.stop()
    app.stop()


def test_webhook_restart_resumes_from_the_stored_cursor():
    app = App()
    db = os.path.join(tempfile.mkdtemp(prefix="herald-test-"), "herald.db")
    c = conf(app, "webhook_publishes = on\n")
    with Herald(db=db, config=c) as h:
        first = [publish(h.port, data=f"a{i}") for i in range(3)]
        wait_until(lambda: app.ids() == first, what="the first delivered")
        h.stop()
    with Herald(db=db, config=c) as h:
        second = [publish(h.port, data=f"b{i}") for i in range(2)]
        wait_until(lambda: len(app.ids()) >= 5, what="the second delivered")
        assert app.ids() == first + second, app.ids()
        h.stop()
    app.stop()


def test_webhook_rows_pruned_before_delivery_are_skipped_counted_and_logged():
    app = App(statuses=[500] * 1000)
    db = os.path.join(tempfile.mkdtemp(prefix="herald-test-"), "herald.db")
    c = conf(app, "webhook_publishes = on\n")
    with Herald(db=db, config=c) as h:
        ids = [publish(h.port, data=f"p{i}") for i in range(5)]
        wait_until(lambda: metric(h.port, "herald_webhook_failures_total") >= 1, what="a failure")
        h.stop()
    # Started again keeping the newest 2: the first 3 go before the
    # application answers (its first answer is one more 500).
    app.statuses = [500]
    with Herald(db=db, config=c + "retention_count = 2\n") as h:
        wait_until(lambda: app.ids() == ids[3:], timeout=8, what="what remains delivered")
        assert metric(h.port, "herald_webhook_skipped_total") == 3
        h.wait_log(rf"webhook: retention removed ids {ids[0]} to {ids[2]} before they were delivered: skipped")
        h.stop()
    app.stop()


def test_webhook_turned_on_by_sighup_starts_after_the_newest_event():
    app = App()
    with Herald(config="") as h:
        publish(h.port, data="history")
        publish(h.port, data="history")
        with open(os.path.join(h.dir, "herald.conf"), "w") as f:
            f.write(conf(app, "webhook_publishes = on\n"))
        mark = h.log_size()
        h.signal(signal.SIGHUP)
        h.wait_log(r"this process delivers to .* \(no cursor was stored yet: from when webhooks were turned on\)", since=mark)
        i = publish(h.port, data="news")
        wait_until(lambda: app.ids() == [i], what="only the new one")
        # Turned off again: the lease is let go, nothing more is sent.
        with open(os.path.join(h.dir, "herald.conf"), "w") as f:
            f.write("")
        mark = h.log_size()
        h.signal(signal.SIGHUP)
        h.wait_log(r"stops delivering \(webhook_url is off\)", since=mark)
        publish(h.port, data="unsent")
        h.stop()
    assert app.ids() == [i]
    app.stop()


def test_webhook_one_worker_of_a_group_delivers():
    app = App()
    with Herald(config=conf(app, "webhook_publishes = on\nworkers = 2\n")) as h:
        ids = [publish(h.port, data=f"w{i}") for i in range(4)]
        wait_until(lambda: app.ids() == ids, what="delivered once each, in order")
        assert h.log().count("this process delivers to") == 1, h.log()
        h.stop()
    app.stop()


def test_webhook_url_without_secret_refused_at_start_and_on_reload_secret_from_a_file():
    app = App()
    h = Herald(config=f"webhook_url = {app.url}\n", wait=False)
    assert h.proc.wait(10) == 1
    assert "webhook_url is set, but webhook_secret is not" in h.log(), h.log()
    h.logf.close()
    # The secret from a file (one line) does as well.
    d = tempfile.mkdtemp(prefix="herald-test-")
    with open(os.path.join(d, "wh.secret"), "w") as f:
        f.write(WH_SECRET + "\n")
    c = f"webhook_url = {app.url}\nwebhook_secret_file = {d}/wh.secret\nwebhook_publishes = on\n"
    with Herald(config=c) as h:
        i = publish(h.port)
        wait_until(lambda: app.ids() == [i], what="delivered")
        assert app.bad_signatures == 0
        with open(os.path.join(h.dir, "herald.conf"), "w") as f:
            f.write(f"webhook_url = {app.url}\n")
        mark = h.log_size()
        h.signal(signal.SIGHUP)
        h.wait_log(r"webhook_url is set, but webhook_secret is not", since=mark)
        h.wait_log(r"reload failed", since=mark)
        h.stop()
    app.stop()


def test_webhook_two_nodes_on_redis_one_lease_and_a_takeover():
    app = App()
    with RedisServer() as r:
        c = conf(app, "webhook_publishes = on\n")
        a = Herald(config=c, redis=r, redis_stream="webhooks")
        b = Herald(config=c, redis=r, redis_stream="webhooks")
        try:
            ids = []
            for i in range(4):
                n = a if i % 2 == 0 else b
                ids.append(publish(n.port, data=f"x{i}"))
            wait_until(lambda: set(ids) <= set(app.ids()), timeout=8, what="delivered by one node")
            # Counted once the 2xx is read, a moment after the application has the batch.
            wait_until(lambda: metric(a.port, "herald_webhook_events_total") +
                       metric(b.port, "herald_webhook_events_total") == len(ids), what="counted")
            da = metric(a.port, "herald_webhook_deliveries_total")
            db = metric(b.port, "herald_webhook_deliveries_total")
            assert (da == 0) != (db == 0), (da, db)
            holder, other = (a, b) if da else (b, a)
            holder.kill()
            more = [publish(other.port, data=f"y{i}") for i in range(2)]
            wait_until(lambda: set(more) <= set(app.ids()), timeout=10, what="delivered after the takeover")
            got = app.ids()
            assert got == sorted(got) and set(got) == set(ids + more), got
            assert "this process delivers to" in other.log()
            other.stop()
        finally:
            for n in (a, b):
                if n.proc.poll() is None:
                    n.kill()
    app.stop()


def test_webhook_clean_stop_on_redis_releases_the_lease():
    """A holder stopped by SIGTERM lets the lease go before it exits (with
    its cursor stored), so another node takes over at its next try rather
    than after the lease runs out; then the other node, stopped, does the
    same."""
    app = App()
    with RedisServer() as r:
        c = conf(app, "webhook_publishes = on\n")
        a = Herald(config=c, redis=r, redis_stream="wh-stop")
        b = Herald(config=c, redis=r, redis_stream="wh-stop")
        lease = "{wh-stop}:webhook:lease"
        try:
            first = publish(a.port, data="one")
            wait_until(lambda: first in app.ids(), timeout=8, what="delivered by one node")
            holder, other = (a, b) if "this process delivers to" in a.log() else (b, a)
            code, owner, _ = r.cli("GET", lease)
            assert code == 0 and owner.strip(), owner
            holder.stop()
            # Gone, or already the other node's (it tries each second).
            code, after, _ = r.cli("GET", lease)
            assert code == 0 and after.strip() != owner.strip(), f"the lease outlived its holder's clean stop"
            code, cursor, _ = r.cli("GET", "{wh-stop}:webhook:cursor")
            assert int(cursor) >= first, (cursor, first)
            second = publish(other.port, data="two")
            wait_until(lambda: second in app.ids(), timeout=8, what="delivered by the other node")
            other.stop()
            code, after, _ = r.cli("EXISTS", lease)
            assert after.strip() == "0", after
            assert app.ids() == [first, second], app.ids()
        finally:
            for n in (a, b):
                if n.proc.poll() is None:
                    n.kill()
    app.stop()


def test_webhook_per_namespace():
    # A namespace's own webhook_url gets its events (a join's namespace is
    # its pattern's), the defaults' URL the rest, and an empty one none;
    # every batch is signed with webhook_secret.
    main, vip = App(), App()
    tmp = tempfile.mkdtemp(prefix="herald-test-")
    with open(os.path.join(tmp, "secret"), "w") as f:
        f.write(MERCURE_SECRET)
    c = conf(main, f"jwt_algorithm = HS256\njwt_secret_file = {tmp}/secret\n"
                   "webhook_publishes = on\npresence_events = on\npresence_grace = 100ms\n"
                   f"[namespace \"vip/*\"]\nwebhook_url = {vip.url}\n"
                   "[namespace \"quiet/*\"]\nwebhook_url =\n")
    with Herald(dir=tmp, config=c) as h:
        a = publish(h.port, topic="vip/room", data="v")
        b = publish(h.port, topic="news", data="n")
        q = publish(h.port, topic="quiet/x", data="q")
        tok = mint({"sub": "carol", "subscribe": ["*"]})
        s = Stream(h.port, query="topic=vip/room", headers={"Authorization": "Bearer " + tok})
        s.opening()
        wait_until(lambda: b in main.ids() and a in vip.ids(), what="both applications told")
        s.close()
        wait_until(lambda: any(e["type"] == "presence.leave" for e in vip.events()), what="the leave, to vip")
        assert {e["topic"] for e in vip.events()} == {"vip/room", "$presence/vip/room"}, vip.events()
        assert q not in main.ids() + vip.ids()
        assert all(not e["topic"].startswith(("vip/", "$presence/vip/", "quiet/")) for e in main.events()), \
            main.events()
        assert main.bad_signatures == 0 and vip.bad_signatures == 0
        h.stop()
    main.stop()
    vip.stop()
    # A section's URL needs webhook_secret as the top-level one does.
    from test_namespaces import _check
    _, code, out = _check(f"[namespace \"vip/*\"]\nwebhook_url = {vip.url}\n")
    assert code != 0 and ':1: webhook_url is set, but webhook_secret is not' in out, out


test_webhook_per_namespace.timeout = 60
