# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: several herald nodes on one Redis behind a real Caddy, as
deployed with conf/Caddyfile.cluster and systemd/herald@.service.

Three nodes share one Redis log; Caddy runs conf/Caddyfile.cluster with only
the site address, the upstreams and the site root replaced. 300 readers
open their streams through Caddy (spread round-robin over the nodes), events
are published through every node and by FCALL, and in the middle of the
burst one node is killed with SIGKILL: its readers' streams end, they
reconnect through Caddy with Last-Event-ID and land on the other nodes, and
every reader ends with every stored event exactly once, in order, with no
refusal on the way. The template unit passes systemd-analyze and its own
command line, run as systemd would run two instances, gives two nodes of one
log; the Caddyfile adapts without warnings, sends /api/* and the Mercure
hub's paths to one proxy, and is formatted as caddy fmt writes it
(test_mercure_caddy runs the hub through it)."""
import json
import os
import selectors
import shutil
import subprocess
import tempfile
import threading
import time

import harness
from harness import Herald, PortTaken, RedisServer, Stream, on_spare_ports, parse_frame, publish, request, wait_until
from test_caddy import CADDY, Caddy, ProxiedStream, _replace_once

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CADDYFILE = os.path.join(ROOT, "conf", "Caddyfile.cluster")
UNIT = os.path.join(ROOT, "systemd", "herald@.service")
UPSTREAMS = "reverse_proxy 127.0.0.1:8201 127.0.0.1:8202 127.0.0.1:8203 {"


class ClusterCaddy(Caddy):
    """caddy run with conf/Caddyfile.cluster's site on a spare 127.0.0.1
    port, proxying /api/* to the given upstreams ("127.0.0.1:PORT", ...)."""

    def _caddyfile(self, port):
        with open(CADDYFILE) as f:
            text = f.read()
        text = _replace_once(text, "example.com {", f"http://127.0.0.1:{port} {{\n\tbind 127.0.0.1")
        text = _replace_once(text, UPSTREAMS, "reverse_proxy " + " ".join(self.upstream) + " {")
        text = _replace_once(text, "root * /var/www/html", f"root * {self.site}")
        return "{\n\tadmin off\n\tgrace_period 1s\n}\n\n" + text


class Reader:
    """One stream through Caddy that reconnects with Last-Event-ID whenever
    its stream ends, keeping every event it was sent."""

    def __init__(self, port):
        self.port = port
        self.events = []
        self.last = 0  # the log is empty when the readers open
        self.reconnects = 0
        self.statuses = []
        self.open(headers={})

    def open(self, headers):
        self.s = ProxiedStream(self.port, headers=headers, timeout=10)
        self.statuses.append(self.s.status)
        self.s.sock.setblocking(False)

    def pump(self):
        """Read what arrived; parse whole frames. False once the stream ended:
        the connection closed, or the response complete (when its node goes
        away, Caddy ends the chunked response and keeps the connection, as
        it may; an EventSource reconnects then, as this does)."""
        alive = self.s.pump()
        for f in self.s.frames():
            ev = parse_frame(f)
            if ev is not None:
                self.events.append(ev)
                self.last = ev["id"]
        return alive and not (self.s.chunked and self.s.dechunk.done)

    def reconnect(self):
        self.s.close()
        self.reconnects += 1
        self.open(headers={"Last-Event-ID": str(self.last)})

    def close(self):
        self.s.close()


def _readers_of(node):
    st, _, body = request(node.port, "GET", "/api/health")
    return json.loads(body)["readers"] if st == 200 else None


def test_cluster_node_killed_mid_burst_readers_resume_through_caddy():
    n_readers, n_events, kill_at = 300, 240, 100
    with RedisServer() as r:
        nodes = []
        try:
            for _ in range(3):
                nodes.append(Herald(redis=r, redis_stream="cluster",
                                    args=["--per-address-limit", "0", "--heartbeat-interval", "1s"]))
            with ClusterCaddy([f"127.0.0.1:{n.port}" for n in nodes]) as c:
                _run_cluster(nodes, c, n_readers, n_events, kill_at)
        finally:
            for n in nodes:
                n.kill()


test_cluster_node_killed_mid_burst_readers_resume_through_caddy.timeout = 60


def _run_cluster(nodes, caddy, n_readers, n_events, kill_at):
    readers = []
    try:
        for _ in range(n_readers):
            readers.append(Reader(caddy.port))
        assert all(rd.statuses == [200] for rd in readers), [rd.statuses for rd in readers if rd.statuses != [200]]
        wait_until(lambda: sum(_readers_of(n) for n in nodes) == n_readers, timeout=10,
                   what=f"the nodes to hold {n_readers} readers")
        per_node = [_readers_of(n) for n in nodes]
        assert all(k > 0 for k in per_node), f"Caddy did not spread the readers: {per_node}"
        victim = nodes[1]

        acked, errors = [], []

        def burst():
            # Through every node in turn, and every fourth event by FCALL;
            # the victim is killed in the middle and skipped afterwards.
            try:
                for k in range(n_events):
                    if k == kill_at:
                        victim.proc.kill()  # SIGKILL, by pid
                    if k % 4 == 3:
                        acked.append(nodes[0].insert(type="fcall", topic="news", data=f"e{k}"))
                        continue
                    node = nodes[k % 4 % 3]
                    if node is victim and k >= kill_at:
                        node = nodes[2]
                    acked.append(publish(node.port, type="post", topic="news", data=f"e{k}"))
            except BaseException as e:  # reported below
                errors.append(e)

        sel = selectors.DefaultSelector()
        for rd in readers:
            sel.register(rd.s.sock, selectors.EVENT_READ, rd)
        t = threading.Thread(target=burst)
        t.start()
        want_n = None
        deadline = time.monotonic() + 35
        while time.monotonic() < deadline:
            if want_n is None and not t.is_alive():
                want_n = len(nodes[0].stored_events())
            if want_n is not None and all(len(rd.events) >= want_n for rd in readers):
                break
            for key, _ in sel.select(timeout=0.2):
                rd = key.data
                if not rd.pump():
                    sel.unregister(rd.s.sock)
                    rd.reconnect()
                    sel.register(rd.s.sock, selectors.EVENT_READ, rd)
        sel.close()
        t.join(10)
        assert not errors, errors
        assert victim.proc.poll() is not None, "the killed node is still running"

        stored = nodes[0].stored_events()
        ids = [e["id"] for e in stored]
        assert ids == list(range(1, len(ids) + 1)), "stored ids are not 1..n"
        assert len(acked) == n_events and sorted(acked) == ids, \
            f"{len(acked)} acknowledged, {len(ids)} stored; not stored: {sorted(set(acked) - set(ids))[:10]}"
        want = [(e["id"], e["type"], e["data"]) for e in stored]
        bad = []
        for k, rd in enumerate(readers):
            got = [(e["id"], e["event"], e["data"]) for e in rd.events]
            if got != want:
                gids = [g[0] for g in got]
                bad.append(f"reader {k} ({rd.reconnects} reconnects): {len(got)} of {len(want)} events, missing "
                           f"{sorted(set(ids) - set(gids))[:5]}, duplicated {len(gids) - len(set(gids))}")
        assert not bad, f"{len(bad)} of {n_readers} readers wrong; " + "; ".join(bad[:5])
        moved = [rd for rd in readers if rd.reconnects]
        # Exactly the killed node's readers came back, once each, and were
        # served (200) by the other nodes: no 502 from Caddy on the way.
        assert len(moved) == per_node[1] and all(rd.reconnects == 1 for rd in moved), \
            (len(moved), per_node, sorted(set(rd.reconnects for rd in moved)))
        statuses = [s for rd in readers for s in rd.statuses]
        assert statuses == [200] * len(statuses), sorted(set(statuses))
        assert sum(_readers_of(n) for n in (nodes[0], nodes[2])) == n_readers
    finally:
        for rd in readers:
            rd.close()


# --- the deployment files ------------------------------------------------

def _unit_settings():
    out = {}
    with open(UNIT) as f:
        for line in f:
            line = line.strip()
            if line and line[0] not in "#;[" and "=" in line:
                k, _, v = line.partition("=")
                out.setdefault(k.strip(), []).append(v.strip())
    return out


def test_cluster_unit_verifies_and_is_hardened():
    d = tempfile.mkdtemp(prefix="herald-units-")
    try:
        units = os.path.join(d, "units")
        man8 = os.path.join(d, "man", "man8")
        os.makedirs(units)
        os.makedirs(man8)
        with open(UNIT) as f:
            text = f.read()
        assert "ExecStart=/usr/local/bin/herald " in text
        with open(os.path.join(units, "herald@.service"), "w") as f:
            f.write(text.replace("/usr/local/bin/herald", os.path.abspath(harness.HERALD_BIN)))
        shutil.copy(os.path.join(ROOT, "docs", "herald.8"), man8)
        env = dict(os.environ, SYSTEMD_UNIT_PATH=units + ":", MANPATH=os.path.join(d, "man") + ":",
                   SYSTEMD_LOG_COLOR="0")
        man = [] if shutil.which("man") else ["--man=no"]
        r = subprocess.run(["systemd-analyze", "verify"] + man + ["herald@8201.service", "herald@8202.service"],
                           env=env, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        out = r.stdout.decode(errors="replace")
        assert r.returncode == 0 and not out.strip(), f"systemd-analyze verify herald@8201.service:\n{out}"
        r = subprocess.run(["systemd-analyze", "security", "--offline=true", "--threshold=20",
                            os.path.join(units, "herald@.service")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        out = r.stdout.decode(errors="replace")
        assert r.returncode == 0, f"exposure above 2.0:\n{out}"
    finally:
        shutil.rmtree(d, ignore_errors=True)
    s = _unit_settings()
    assert s["Type"] == ["notify"] and s["Restart"] == ["on-failure"] and "WatchdogSec" in s, s
    # A node started while Redis is down exits 1; systemd must keep trying.
    assert s["StartLimitIntervalSec"] == ["0"], s.get("StartLimitIntervalSec")
    assert s["EnvironmentFile"] == ["/etc/herald/cluster.env", "-/etc/herald/%i.env"], s["EnvironmentFile"]
    assert s["StateDirectory"] == ["herald/%i"], s["StateDirectory"]
    assert " --listen 127.0.0.1:%i " in s["ExecStart"][0] and " --db /var/lib/herald/%i/" in s["ExecStart"][0], s


def _start_instance(etc, state, port):
    """The unit's ExecStart for instance `port`, with its environment files,
    run as systemd would (paths moved into temporary folders). PortTaken
    when the port was taken."""
    cmdline = _unit_settings()["ExecStart"][0].replace("%i", str(port)).replace("/etc/herald/", etc + "/") \
        .replace("/var/lib/herald/", state + "/")
    args = cmdline.split()
    assert args[0] == "/usr/local/bin/herald", args
    os.makedirs(os.path.join(state, str(port)), exist_ok=True)  # StateDirectory=herald/%i
    env = {}
    for name in ("cluster.env", f"{port}.env"):
        p = os.path.join(etc, name)
        if os.path.exists(p):
            with open(p) as f:
                for line in f:
                    if line.strip() and not line.startswith("#"):
                        k, _, v = line.strip().partition("=")
                        env[k] = v
    db = args[args.index("--db") + 1]
    try:
        return Herald(args=args[1:], listen=False, db=db, env=env, redis=None)
    except AssertionError as e:
        if "in use" in str(e):
            raise PortTaken(str(e))
        raise


def test_cluster_unit_command_line_runs_two_nodes_of_one_log():
    with RedisServer() as r:
        top = tempfile.mkdtemp(prefix="herald-instances-")
        etc, state = os.path.join(top, "etc"), os.path.join(top, "state")
        os.makedirs(etc)
        shutil.copy(os.path.join(ROOT, "conf", "herald.conf"), os.path.join(etc, "herald.conf"))
        with open(os.path.join(etc, "cluster.env"), "w") as f:
            f.write(f"HERALD_REDIS_URL={r.url}\n")
        nodes = []
        try:
            for _ in range(2):
                nodes.append(on_spare_ports(lambda port: _start_instance(etc, state, port)))
            for n in nodes:
                # --listen from the unit replaces the listen of herald.conf.
                assert [x[:2] for x in n.listeners()] == [("tcp", f"127.0.0.1:{n.port}")], n.listeners()
            a, b = nodes
            s = Stream(b.port)
            s.opening()
            i = publish(a.port, data="through a")
            j = publish(b.port, data="through b")
            assert j == i + 1, (i, j)
            got = s.events(2, timeout=5)
            assert [(e["id"], e["data"]) for e in got] == [(i, "through a"), (j, "through b")], got
            # The default redis_stream, in the Redis of cluster.env.
            assert [e["id"] for e in r.stored_events("herald")] == [i, j]
            s.close()
        finally:
            for n in nodes:
                n.stop()
            shutil.rmtree(top, ignore_errors=True)


def test_cluster_caddyfile_adapts_cleanly():
    d = tempfile.mkdtemp(prefix="herald-caddy-")
    try:
        env = dict(os.environ, HOME=d, XDG_DATA_HOME=d, XDG_CONFIG_HOME=d)
        r = subprocess.run([CADDY, "adapt", "--config", CADDYFILE, "--adapter", "caddyfile"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        err = r.stderr.decode(errors="replace")
        assert r.returncode == 0 and "WARN" not in err, f"caddy adapt ({r.returncode}):\n{err}"
        cfg = json.loads(r.stdout)
        handlers, paths = [], []

        def walk(x):
            if isinstance(x, dict):
                if x.get("handler") == "reverse_proxy":
                    handlers.append(x)
                if isinstance(x.get("path"), list):
                    paths.append(x["path"])
                for v in x.values():
                    walk(v)
            elif isinstance(x, list):
                for v in x:
                    walk(v)
        walk(cfg)
        assert len(handlers) == 1, handlers
        # One proxy for herald's API and the Mercure hub's paths alike.
        assert ["/api/*", "/.well-known/mercure", "/.well-known/mercure/*",
                "/.well-known/oauth-protected-resource/*"] in paths, paths
        h = handlers[0]
        assert [u["dial"] for u in h["upstreams"]] == ["127.0.0.1:8201", "127.0.0.1:8202", "127.0.0.1:8203"], h
        assert h["flush_interval"] == -1, h
        assert h["load_balancing"]["selection_policy"]["policy"] == "round_robin", h
        assert h["load_balancing"]["try_duration"] > 0, h
        assert h["health_checks"]["active"]["uri"] == "/api/health", h
        assert h["health_checks"]["passive"]["fail_duration"] > 0, h
        r = subprocess.run([CADDY, "validate", "--config", CADDYFILE, "--adapter", "caddyfile"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        assert r.returncode == 0, r.stdout.decode(errors="replace")
        r = subprocess.run([CADDY, "fmt", CADDYFILE], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=60)
        with open(CADDYFILE, "rb") as f:
            assert r.stdout == f.read(), "conf/Caddyfile.cluster is not as caddy fmt writes it"
    finally:
        shutil.rmtree(d, ignore_errors=True)
