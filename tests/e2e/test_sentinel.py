# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: Redis failover through Sentinel, and Redis reached over TLS
through stunnel.

A primary, a replica and three sentinels run on loopback (each on its own
port and folder, each stopped by pid at the end); three herald nodes find
the primary through the sentinels (redis_sentinels, redis_master_name) and
wait for one replica on every publish (redis_wait_replicas = 1), behind a
real Caddy running conf/Caddyfile.cluster. Readers stream through Caddy; a
burst of publishes goes through Caddy and the primary is SIGKILLed in the
middle of it. Every publish answered 201 must reach every reader exactly
once and in order; the others may only be 503 with Retry-After. The time
from the kill to the next 201 is printed, not asserted.

The TLS test puts stunnel4 as a TLS server in front of redis-server and
stunnel4 as a client tunnel on a local port (docs/cluster.md's recipe for a
Redis that only speaks TLS), with a certificate the test makes with
openssl, and checks a publish and a read through it."""
import json
import os
import re
import selectors
import shutil
import subprocess
import tempfile
import threading
import time

import harness
from harness import (Herald, PortTaken, RedisSentinel, RedisServer, Stream, on_spare_ports, publish, request,
                     stop_all, wait_until)
from test_cluster import ClusterCaddy, Reader

TOKEN = "sentinel-test-publish-token"
MASTER = "heraldlog"


def _replica_linked(replica):
    info = replica.command("INFO", "replication").decode()
    return "master_link_status:up" in info


def _primary_replica_sentinels(procs):
    """A primary, its synced replica and three sentinels that know both and
    each other, each appended to procs as it starts (the caller stops them):
    (primary, replica, sentinels, their list for --redis-sentinels)."""
    primary = RedisServer()
    procs.append(primary)
    replica = RedisServer(args=["--replicaof", "127.0.0.1", str(primary.port)])
    procs.append(replica)
    wait_until(lambda: _replica_linked(replica), timeout=15, what="the replica to sync")
    sentinels = []
    for _ in range(3):
        sentinels.append(RedisSentinel(primary.port, master=MASTER, down_after_ms=1000, failover_timeout_ms=2000))
        procs.append(sentinels[-1])
    wait_until(lambda: all(s.sees(1, 2) for s in sentinels), timeout=30, interval=0.2,
               what="the sentinels to know the replica and each other")
    return primary, replica, sentinels, ",".join(f"127.0.0.1:{s.port}" for s in sentinels)


def _publish_through(port, k):
    """One publish through Caddy with a bounded wait: (status, headers, id)."""
    st, hdrs, body = request(port, "POST", "/api/events", {"type": "burst", "topic": "news", "data": f"e{k}",
                                                          "public": True},
                             headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    return st, hdrs, (json.loads(body)["id"] if st == 201 else None)


def test_sentinel_failover_loses_no_acknowledged_event():
    n_readers, before_kill, after_kill = 30, 120, 20
    procs = []
    try:
        primary, replica, sentinels, listing = _primary_replica_sentinels(procs)
        nodes = []
        for _ in range(3):
            nodes.append(Herald(redis=None, redis_stream="failover",
                                args=["--redis-sentinels", listing, "--redis-master-name", MASTER,
                                      "--redis-stream", "failover", "--redis-wait-replicas", "1",
                                      "--publish-token", TOKEN, "--per-address-limit", "0",
                                      "--heartbeat-interval", "1s", "--redis-wait-timeout", "500ms"]))
            procs.append(nodes[-1])
        for n in nodes:
            wait_until(n.log_ok, timeout=10, what="herald to reach the primary Sentinel names")
        with ClusterCaddy([f"127.0.0.1:{n.port}" for n in nodes]) as caddy:
            _run_failover(nodes, primary, replica, sentinels, caddy, n_readers, before_kill, after_kill)
    finally:
        stop_all(procs)


test_sentinel_failover_loses_no_acknowledged_event.timeout = 120
test_sentinel_failover_loses_no_acknowledged_event.alone = True


def _run_failover(nodes, primary, replica, sentinels, caddy, n_readers, before_kill, after_kill):
    readers = []
    try:
        for _ in range(n_readers):
            readers.append(Reader(caddy.port))
        assert all(rd.statuses == [200] for rd in readers), [rd.statuses for rd in readers]

        results = []  # (k, status, id, retry_after)
        errors = []
        timing = {}

        def burst():
            try:
                k = 0
                after = 0
                deadline = time.monotonic() + 60
                while after < after_kill and time.monotonic() < deadline:
                    if k == before_kill:
                        timing["kill"] = time.monotonic()
                        primary.kill()  # SIGKILL, by pid
                    st, hdrs, eid = _publish_through(caddy.port, k)
                    results.append((k, st, eid, hdrs.get("retry-after")))
                    if st == 201 and "kill" in timing:
                        timing.setdefault("back", time.monotonic())
                        after += 1
                    elif st == 503:
                        time.sleep(0.05)  # a client's pause before it tries again (a poll, not a wait for a state)
                    k += 1
            except BaseException as e:  # reported below
                errors.append(e)

        sel = selectors.DefaultSelector()
        for rd in readers:
            sel.register(rd.s.sock, selectors.EVENT_READ, rd)
        t = threading.Thread(target=burst)
        t.start()
        want = None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if want is None and not t.is_alive():
                want = {eid for _, st, eid, _ in results if st == 201}
            if want is not None and all(want <= {e["id"] for e in rd.events} for rd in readers):
                break
            for key, _ in sel.select(timeout=0.2):
                rd = key.data
                if not rd.pump():
                    sel.unregister(rd.s.sock)
                    rd.reconnect()
                    sel.register(rd.s.sock, selectors.EVENT_READ, rd)
        sel.close()
        t.join(15)
        assert not errors, errors
        assert "kill" in timing and "back" in timing, f"publishing did not resume: {results[-5:]}"
        back = [re.search(r"is back after ([0-9.]+) s", n.log()) for n in nodes]
        print(f"failover: {timing['back'] - timing['kill']:.2f} s from SIGKILL of the primary to the next 201 "
              f"through Caddy ({sum(1 for r in results if r[1] == 503)} publishes answered 503 meanwhile); "
              f"the nodes were back on the new primary after "
              f"{', '.join(m.group(1) + ' s' if m else '?' for m in back)}")

        statuses = sorted(set(st for _, st, _, _ in results))
        assert set(statuses) <= {201, 503}, f"statuses other than 201 and 503: {statuses}"
        no_retry = [k for k, st, _, ra in results if st == 503 and not ra]
        assert not no_retry, f"503 without Retry-After for publishes {no_retry[:10]}"
        acked = {eid: k for k, st, eid, _ in results if st == 201}
        assert len(acked) == sum(1 for r in results if r[1] == 201), "one id acknowledged twice"
        assert sentinels[0].primary() == replica.port, "Sentinel did not promote the replica"

        bad = []
        for n, rd in enumerate(readers):
            ids = [e["id"] for e in rd.events]
            if any(b <= a for a, b in zip(ids, ids[1:])):
                bad.append(f"reader {n}: ids not strictly increasing")
                continue
            got = {e["id"]: e["data"] for e in rd.events}
            missing = [i for i in acked if i not in got]
            wrong = [i for i in acked if i in got and got[i] != f"e{acked[i]}"]
            if missing or wrong:
                bad.append(f"reader {n} ({rd.reconnects} reconnects): missing {sorted(missing)[:5]}, "
                           f"other data under {sorted(wrong)[:5]}")
        assert not bad, f"{len(bad)} of {len(readers)} readers wrong; " + "; ".join(bad[:5])
        # Every node heard of the move; one stops cleanly (with its
        # Sentinel connections: nothing leaks), and no sanitizer spoke.
        for node in nodes:
            assert f"moved from 127.0.0.1:{primary.port} to 127.0.0.1:{replica.port}" in node.log(), \
                node.log()[-3000:]
        nodes[0].stop()
        for node in nodes:
            assert not re.search(r"AddressSanitizer|LeakSanitizer|runtime error", node.log()), node.log()[-3000:]
            # A node that refused publishes meanwhile names what came back:
            # the event log on Redis, not a database.
            assert "publish: the database takes writes again" not in node.log(), node.log()[-3000:]
    finally:
        for rd in readers:
            rd.close()


def test_sentinel_failover_heard_once_by_the_log_and_presence():
    """The log and presence both on Redis through Sentinel: a failover is
    heard once per process (one "moved" line, not one per user of Redis),
    and both follow it: a publish reaches a reader, presence counts on the
    new primary."""
    from test_presence import PRESENCE_TOKEN, _cluster_readers_or_none
    procs = []
    try:
        primary, replica, sentinels, listing = _primary_replica_sentinels(procs)
        h = Herald(redis=None, redis_stream="once",
                   args=["--redis-sentinels", listing, "--redis-master-name", MASTER, "--redis-stream", "once",
                         "--publish-token", TOKEN, "--presence-token", PRESENCE_TOKEN, "--presence-ttl", "3s"])
        procs.append(h)
        wait_until(h.log_ok, timeout=10, what="herald to reach the primary Sentinel names")
        s = Stream(h.port, query="topic=once/1")
        wait_until(lambda: _cluster_readers_or_none(h, "once/1") == 1, what="the count on the primary")
        primary.kill()
        moved = f"moved from 127.0.0.1:{primary.port} to 127.0.0.1:{replica.port}"
        wait_until(lambda: moved in h.log(), timeout=40, interval=0.2, what="herald to hear of the failover")
        wait_until(lambda: _cluster_readers_or_none(h, "once/1") == 1 and replica.command(
            "EXISTS", "{once}:presence:nodes") == 1, timeout=20, interval=0.2, what="the count on the new primary")
        wait_until(lambda: _health_ok(h.port), timeout=20, interval=0.2, what="the log back on the new primary")
        eid = publish(h.port, topic="once/1", data="after", token=TOKEN)
        got = []
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            got = [e for e in s.events(n=1, timeout=1) if e["id"] == eid]
        assert got and got[0]["data"] == "after", f"the publish after the failover did not arrive:\n{h.log()[-3000:]}"
        s.close()
        lines = re.findall(r"the primary of \S+ moved from .*", h.log())
        assert len(lines) == 1, f"{len(lines)} lines for one failover:\n" + "\n".join(lines)
        h.stop()
        assert not re.search(r"AddressSanitizer|LeakSanitizer|runtime error", h.log()), h.log()[-3000:]
    finally:
        stop_all(procs)


test_sentinel_failover_heard_once_by_the_log_and_presence.timeout = 120


def _health_ok(port):
    return request(port, "GET", "/api/health")[0] == 200


def _check_config(*args):
    r = subprocess.run([harness.HERALD_BIN, *args, "--check-config"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=30)
    return r.returncode, r.stdout.decode(errors="replace")


def test_sentinel_config_errors_name_the_keys():
    code, out = _check_config("--redis-sentinels", "127.0.0.1:26379", "--redis-master-name", MASTER,
                              "--redis-url", "redis://127.0.0.1:6379")
    assert code == 1 and "redis_sentinels is set, and so is redis_url" in out, out
    code, out = _check_config("--redis-sentinels", "127.0.0.1:26379")
    assert code == 1 and "redis_sentinels needs redis_master_name" in out, out
    code, out = _check_config("--redis-master-name", MASTER)
    assert code == 1 and "redis_master_name is set without redis_sentinels" in out, out
    for bad in ("127.0.0.1:0", "127.0.0.1:x", "::1:26379", "[::1", ",", "a b:1"):
        code, out = _check_config("--redis-sentinels", bad, "--redis-master-name", MASTER)
        assert code == 1 and "redis_sentinels" in out, f"{bad!r}: {out}"
    code, out = _check_config("--redis-sentinels", "a:1", "--redis-master-name", "two words")
    assert code == 1 and "redis_master_name" in out, out
    code, out = _check_config("--redis-sentinels", "127.0.0.1:26379, [::1]:26380,sentinel.example",
                              "--redis-master-name", MASTER)
    assert code == 0, out
    assert "redis_sentinels = 127.0.0.1:26379, [::1]:26380,sentinel.example" in out, out


def test_sentinel_unreachable_at_start_exits_1():
    port = on_spare_ports(lambda p: p)
    h = Herald(redis=None, wait=False, args=["--redis-sentinels", f"127.0.0.1:{port}", "--redis-master-name", MASTER])
    try:
        code = h.proc.wait(30)
    except subprocess.TimeoutExpired:
        h.kill()
        raise AssertionError(f"herald kept running without a sentinel:\n{h.log()}")
    h.logf.close()
    assert code == 1, f"exit {code}:\n{h.log()}"
    assert f"no sentinel named the primary of {MASTER}: 127.0.0.1:{port}" in h.log(), h.log()


def test_sentinel_names_a_replica_refused_at_start():
    """A sentinel whose master is (now) a replica: ROLE says so, and herald
    does not write there."""
    with RedisServer() as primary, RedisServer(args=["--replicaof", "127.0.0.1", str(primary.port)]) as replica:
        with RedisSentinel(replica.port, master=MASTER, quorum=1) as s:
            h = Herald(redis=None, wait=False,
                       args=["--redis-sentinels", f"127.0.0.1:{s.port}", "--redis-master-name", MASTER])
            try:
                code = h.proc.wait(30)
            except subprocess.TimeoutExpired:
                h.kill()
                raise AssertionError(f"herald kept running on a replica:\n{h.log()}")
            h.logf.close()
            assert code == 1 and "is not a primary (ROLE)" in h.log(), f"exit {code}:\n{h.log()}"


# --- Redis over TLS through stunnel --------------------------------------

STUNNEL = shutil.which("stunnel4") or shutil.which("stunnel") or "stunnel4"


class Stunnel:
    """stunnel4 in the foreground with one service, accepting on a spare
    127.0.0.1 port and connecting to connect_to; client=True makes it the
    TLS client end. Stopped by pid."""

    def __init__(self, dir, name, connect_to, client, cert=None, key=None, ca=None):
        self.dir, self.name = dir, name
        self.connect_to, self.client = connect_to, client
        self.cert, self.key, self.ca = cert, key, ca
        self.logpath = os.path.join(dir, f"{name}.log")
        self.proc = None
        self.port = on_spare_ports(self._start)

    def _start(self, port):
        lines = ["foreground = yes", f"pid = {os.path.join(self.dir, self.name + '.pid')}",
                 f"output = {self.logpath}", "debug = notice", f"[{self.name}]",
                 f"accept = 127.0.0.1:{port}", f"connect = {self.connect_to}"]
        if self.client:
            lines += ["client = yes", f"CAfile = {self.ca}", "verifyChain = yes", "checkHost = localhost"]
        else:
            lines += [f"cert = {self.cert}", f"key = {self.key}"]
        conf = os.path.join(self.dir, f"{self.name}.conf")
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.proc = subprocess.Popen([STUNNEL, conf], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        wait_until(lambda: self.proc.poll() is not None or "Configuration successful" in self.log(),
                   timeout=15, what="stunnel to start")
        if self.proc.poll() is not None:
            if "Address already in use" in self.log():
                raise PortTaken(f"stunnel on 127.0.0.1:{port}")
            raise AssertionError(f"stunnel exited with {self.proc.returncode}:\n{self.log()}")
        return port

    def log(self):
        try:
            with open(self.logpath, "rb") as f:
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _make_cert(d):
    """A self-signed certificate for localhost: (cert path, key path)."""
    cert, key = os.path.join(d, "redis.crt"), os.path.join(d, "redis.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    return cert, key


def test_sentinel_docs_redis_over_tls_through_stunnel():
    d = tempfile.mkdtemp(prefix="herald-stunnel-")
    tunnels = []
    try:
        with RedisServer() as r:
            cert, key = _make_cert(d)
            server = Stunnel(d, "redis-tls", f"127.0.0.1:{r.port}", client=False, cert=cert, key=key)
            tunnels.append(server)
            client = Stunnel(d, "redis-client", f"127.0.0.1:{server.port}", client=True, ca=cert)
            tunnels.append(client)
            h = Herald(redis=None, redis_stream="tls",
                       args=["--redis-url", f"redis://127.0.0.1:{client.port}", "--redis-stream", "tls"])
            try:
                wait_until(h.log_ok, timeout=10, what="herald to reach Redis through the tunnel")
                s = Stream(h.port)
                s.opening()
                eid = publish(h.port, type="tls", topic="news", data="through stunnel")
                ev = s.events(1)[0]
                assert ev["id"] == eid and ev["data"] == "through stunnel", ev
                s.close()
                assert [e["data"] for e in r.stored_events("tls")] == ["through stunnel"]
                # The TLS server end really carried it.
                assert "accepted connection" in server.log(), server.log()
            finally:
                h.kill()
    finally:
        for t in tunnels:
            t.close()
        shutil.rmtree(d, ignore_errors=True)
