# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: a Mercure cluster behind Caddy, as deployed with
conf/Caddyfile.cluster.

Three herald nodes share one Redis log (a redis-server this test starts on
loopback) and the settings docs/mercure.md says they must share (the
secret, mercure_url set to the public hub URL, mercure_anonymous); Caddy
runs conf/Caddyfile.cluster with only the site address, the upstreams and
the site root replaced. Through Caddy: the hub's discovery (its metadata,
the Link header on answers and on refusals) names the public hub URL;
anonymous subscribers of a public topic and subscribers with a token for a
URL pattern open their streams, spread over the nodes; updates published
with the form and an Idempotency-Key land on every node in turn and reach
every subscriber once, in order, private ones only those whose token allows
them. One node is then killed with SIGKILL: its subscribers' streams end,
updates published meanwhile are stored once each (one Caddy sent to the
killed node before marking it down is a 502 with Retry-After, sent again
with its Idempotency-Key), and the subscribers come
back through Caddy with Last-Event-ID (the publisher's id of the last
update they saw), are served by the other nodes from that id, and end with
every update they may see, none twice, none missing. A tokenless publish
through Caddy is refused (it came through a proxy). The Caddyfile block
docs/mercure.md shows is the conf file's, line for line; conf/Caddyfile
serves the hub of one node the same way."""
import json
import os
import selectors
import signal
import time
import urllib.parse

from harness import RedisServer, request, wait_until
from test_caddy import Caddy, ProxiedStream
from test_cluster import CADDYFILE, ROOT, ClusterCaddy
from test_mercure import HUB, access, legacy, start
from test_mercure_cluster import node

ROOM = "https://example.com/room"
PATTERN = "https://example.com/:name"
LINK = f'<{HUB}>; rel="mercure"'


def _update(frame):
    """A Mercure frame as {id, event, data}; None for a frame without data
    (the opening frame, heartbeats)."""
    ev, data = {"event": "message"}, []
    for line in frame.decode().split("\n"):
        if not line or line.startswith(":"):
            continue
        k, _, v = line.partition(":")
        v = v[1:] if v.startswith(" ") else v
        if k == "data":
            data.append(v)
        elif k in ("id", "event"):
            ev[k] = v
    if not data:
        return None
    ev["data"] = "\n".join(data)
    return ev


class Subscriber:
    """One Mercure subscription through Caddy that keeps every update it
    was sent; reopened by the test with Last-Event-ID once its stream ends."""

    def __init__(self, port, params, token=None):
        self.port, self.token = port, token
        self.target = "/.well-known/mercure?" + urllib.parse.urlencode(params)
        self.events, self.last, self.ended = [], None, False
        self.answers = []  # (status, Link, Mercure-Last-Event-ID) of each open
        self.open({})

    def open(self, extra):
        h = {"Authorization": "Bearer " + self.token} if self.token else {}
        h.update(extra)
        self.s = ProxiedStream(self.port, headers=h, timeout=10, target=self.target)
        self.answers.append((self.s.status, self.s.headers.get("link"), self.s.headers.get("mercure-last-event-id")))
        self.s.sock.setblocking(False)
        self.ended = False

    def pump(self):
        """Read what arrived. The stream has ended once the connection
        closes or the chunked answer is complete (Caddy ends the answer
        when its node goes away, and may keep the connection)."""
        alive = self.s.pump()
        for f in self.s.frames():
            ev = _update(f)
            if ev is not None:
                self.events.append(ev)
                self.last = ev["id"]
        if not alive or (self.s.chunked and self.s.dechunk.done):
            self.ended = True

    def resume(self):
        self.s.close()
        self.open({"Last-Event-ID": self.last})

    def close(self):
        self.s.close()


def _pump(subs, done, what, timeout=10):
    """Read every open subscription until done() holds."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        sel = selectors.DefaultSelector()
        for sub in subs:
            if not sub.ended:
                sel.register(sub.s.sock, selectors.EVENT_READ, sub)
        for key, _ in sel.select(timeout=0.1):
            key.data.pump()
        sel.close()


def _readers(n):
    st, _, body = request(n.port, "GET", "/api/health")
    return json.loads(body)["readers"] if st == 200 else None


def _published(n):
    st, _, body = request(n.port, "GET", "/metrics")
    assert st == 200, body
    for line in body.decode().splitlines():
        if line.startswith("herald_events_published_total "):
            return int(float(line.split()[1]))
    raise AssertionError("no herald_events_published_total in /metrics")


def _cpublish(port, n, lost):
    """Update n published through Caddy with the form, with the publisher's
    id urn:example:n (every third one private) and an Idempotency-Key. A
    publish Caddy sent to the killed node (it cannot send a body again after
    a failed dial) is answered 502 with Retry-After; it is sent again, as a
    publisher would, and stored once."""
    fields = [("topic", ROOM), ("data", f"update {n}"), ("id", f"urn:example:{n}")]
    if n % 3 == 0:
        fields.append(("private", "on"))
    headers = {"Host": f"127.0.0.1:{port}", "Authorization": "Bearer " + legacy(publish=["*"]),
               "Content-Type": "application/x-www-form-urlencoded", "Idempotency-Key": f'"update-{n}"'}
    body = urllib.parse.urlencode(fields)
    for _ in range(3):
        st, hd, answer = request(port, "POST", "/.well-known/mercure", body, headers=headers)
        if st != 502:
            break
        assert hd.get("retry-after") == "1" and b'"upstream_lost"' in answer, (hd, answer)
        lost.append(n)
    assert st == 200 and answer.decode() == f"urn:example:{n}", (n, st, answer)
    assert LINK in hd.get("link", ""), hd


def _expected(sub_private, upto):
    return [{"id": f"urn:example:{n}", "event": "message", "data": f"update {n}"}
            for n in range(1, upto + 1) if sub_private or n % 3]


def test_mercure_cluster_behind_caddy_survives_a_node_killed():
    with RedisServer() as r:
        nodes = []
        try:
            for _ in range(3):
                nodes.append(node(r, "heartbeat_interval = 1s\n"))
            with ClusterCaddy([f"127.0.0.1:{n.port}" for n in nodes]) as c:
                _run(nodes, c)
        finally:
            for n in nodes:
                n.kill()


test_mercure_cluster_behind_caddy_survives_a_node_killed.timeout = 60


def _run(nodes, caddy):
    port, host = caddy.port, {"Host": f"127.0.0.1:{caddy.port}"}
    # Discovery through Caddy names the public hub URL, not a node's address.
    st, hd, body = request(port, "GET", "/.well-known/oauth-protected-resource/.well-known/mercure", headers=host)
    assert st == 200 and json.loads(body)["resource"] == HUB, (st, body)
    assert LINK in hd.get("link", ""), hd
    st, hd, _ = request(port, "GET", "/.well-known/mercure?match=x", headers=dict(host, Authorization="Bearer x.y.z"))
    assert st == 401 and 'error="invalid_token"' in hd["www-authenticate"], (st, hd)
    assert "resource_metadata=" in hd["www-authenticate"] and LINK in hd.get("link", ""), hd
    # The paths under the hub are herald's too, not the site's files
    # (herald's 404: active subscriptions are off here).
    st, hd, _ = request(port, "GET", "/.well-known/mercure/subscriptions", headers=host)
    assert st == 404 and LINK in hd.get("link", ""), (st, hd)
    # Without a token, a publish that came through Caddy is refused.
    st, hd, _ = request(port, "POST", "/.well-known/mercure", urllib.parse.urlencode([("topic", ROOM)]),
                        headers=dict(host, **{"Content-Type": "application/x-www-form-urlencoded"}))
    assert st == 403 and LINK in hd.get("link", ""), (st, hd)

    reader = access(["subscribe"], [(PATTERN, "urlpattern")])
    subs, private = [], []
    try:
        for _ in range(6):
            subs.append(Subscriber(port, [("match", ROOM)]))
            private.append(False)
            subs.append(Subscriber(port, [("match_urlpattern", PATTERN)], reader))
            private.append(True)
        assert all(s.answers == [(200, s.answers[0][1], None)] and LINK in s.answers[0][1] for s in subs), \
            [s.answers for s in subs]
        wait_until(lambda: sum(_readers(n) for n in nodes) == len(subs), timeout=10,
                   what="the nodes to hold every subscriber")
        per_node = [_readers(n) for n in nodes]
        assert all(k > 0 for k in per_node), f"Caddy did not spread the subscribers: {per_node}"

        lost = []
        before = [_published(n) for n in nodes]
        for n in range(1, 10):
            _cpublish(port, n, lost)
        took = [_published(n) - b for n, b in zip(nodes, before)]
        assert sum(took) == 9 and all(k > 0 for k in took), f"publishes per node: {took}"
        _pump(subs, lambda: all(len(s.events) >= len(_expected(p, 9)) for s, p in zip(subs, private)),
              "updates 1-9 at every subscriber")

        victim = nodes[1]
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        _pump(subs, lambda: sum(s.ended for s in subs) >= per_node[1], "the killed node's streams to end")
        gone = [s for s in subs if s.ended]
        assert len(gone) == per_node[1], (len(gone), per_node)
        # Both kinds were on it: the private ones resume from a private
        # update's id (urn:example:9), the anonymous ones from a public one.
        assert {s.last for s in gone} == {"urn:example:8", "urn:example:9"}, [s.last for s in gone]
        # Published while the killed node's subscribers are away.
        for n in range(10, 15):
            _cpublish(port, n, lost)
        for s in gone:
            last = s.last
            s.resume()
            assert s.answers[-1][0] == 200 and s.answers[-1][2] == last, (last, s.answers)
        for n in range(15, 19):
            _cpublish(port, n, lost)
        _pump(subs, lambda: all(len(s.events) >= len(_expected(p, 18)) for s, p in zip(subs, private)),
              "updates 1-18 at every subscriber")
        for k, (s, p) in enumerate(zip(subs, private)):
            assert s.events == _expected(p, 18), (k, p, len(s.answers), [e["id"] for e in s.events])
        assert not any(s.ended for s in subs)
        assert sum(_readers(n) for n in (nodes[0], nodes[2])) == len(subs)
        # Each update once in the log, retries included.
        stored = [e["data"] for e in nodes[0].stored_events() if e["type"] != "mercure"]
        assert stored == [f"update {n}" for n in range(1, 19)], stored
        # The passive health check marks the killed node down at its first
        # failed dial: at most one publish was sent there.
        assert len(lost) <= 1, lost
    finally:
        for s in subs:
            s.close()


def test_the_caddyfile_block_of_mercure_md_is_the_conf_file():
    with open(os.path.join(ROOT, "docs", "mercure.md")) as f:
        doc = f.read()
    section = doc[doc.index("## Mercure on several nodes"):]
    block = section[section.index("```\nexample.com {") + 4:]
    block = block[:block.index("```")]
    with open(CADDYFILE) as f:
        conf = f.read().splitlines()
    # Each line of the block, "..." (lines left out) aside, in the file's order.
    at = 0
    for line in block.splitlines():
        if line.strip() == "...":
            continue
        assert line in conf[at:], f"docs/mercure.md's Caddyfile line {line!r} is not in conf/Caddyfile.cluster"
        at = conf.index(line, at) + 1


def test_one_node_behind_conf_caddyfile_is_a_hub():
    with start("mercure_anonymous = on\n", redis=None) as h, Caddy(f"127.0.0.1:{h.port}") as c:
        host = {"Host": f"127.0.0.1:{c.port}"}
        st, hd, body = request(c.port, "GET", "/.well-known/oauth-protected-resource/.well-known/mercure",
                               headers=host)
        assert st == 200 and json.loads(body)["resource"] == HUB and LINK in hd.get("link", ""), (st, hd, body)
        sub = Subscriber(c.port, [("match", ROOM)])
        assert sub.answers[0][0] == 200 and LINK in sub.answers[0][1], sub.answers
        lost = []
        for n in (1, 2):
            _cpublish(c.port, n, lost)
        _pump([sub], lambda: len(sub.events) >= 2, "two updates through Caddy")
        assert sub.events == _expected(False, 2) and not lost, (sub.events, lost)
        sub.close()
