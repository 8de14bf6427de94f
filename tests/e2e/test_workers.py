# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: `workers = 2`, a main process and two single-threaded worker
processes sharing the listeners. The group starts (two workers, children of
the main process); readers on both workers get every event, posted through
either worker or inserted with sqlite3, once each in order; per_address_limit
and max_readers hold for the whole group; SIGHUP reloads every worker; a
worker killed with SIGKILL is started again, the other's readers go on, and
the caps' counts drop by its readers; SIGTERM stops the group with exit 0;
under systemd-socket-activate both workers accept from systemd's socket,
READY=1 comes once, and WATCHDOG=1 only while every worker's loop lives."""
import json
import os
import re
import signal
import time

from harness import Herald, Stream, publish, request, sqlite, wait_until
from test_systemd import Notifications, _activated_tcp

GROUP = "workers = 2\n"


def _metrics(port):
    st, _, body = request(port, "GET", "/metrics")
    assert st == 200, (st, body)
    text = body.decode()
    readers = {int(w): int(n) for w, n in re.findall(r'^herald_worker_readers\{worker="(\d+)"\} (\d+)$', text, re.M)}
    pids = {int(w): int(p) for w, p in re.findall(r'^herald_worker_pid\{worker="(\d+)"\} (\d+)$', text, re.M)}
    return text, readers, pids


def _worker_readers(port):
    return _metrics(port)[1]


def _children(pid):
    """Pids whose parent is pid (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if int(fields[1]) == pid:
            out.append(int(d))
    return sorted(out)


def _steady_readers(port, still=0.6, timeout=20):
    """The workers' reader counts once they have held for `still` seconds:
    each worker's count in /metrics is its stamp (every 250 ms), so a close
    just made may not show yet."""
    last, since = _worker_readers(port), time.monotonic()
    deadline = since + timeout
    while time.monotonic() - since < still:
        if time.monotonic() > deadline:
            raise AssertionError(f"the workers' reader counts kept changing for {timeout} s: {last}")
        time.sleep(0.05)
        now = _worker_readers(port)
        if now != last:
            last, since = now, time.monotonic()
    return last


def land_on(port, worker, open_one, close_one, tries=60):
    """A reader open_one() opened that the kernel handed to `worker` (each
    new connection has a new source port, so SO_REUSEPORT's hash sends it
    to either worker); one that landed elsewhere is closed with close_one.
    Each step waits for the counts to show it (they are stamps): the new
    reader counted before its worker is read, a stray's close before the
    next try; against a stale count a stray's close could be waited for
    forever."""
    before = _steady_readers(port)
    for _ in range(tries):
        r = open_one()
        after = wait_until(lambda: (lambda a: a if sum(a.values()) == sum(before.values()) + 1 else None)(
            _worker_readers(port)), timeout=20, what="the new reader counted")
        if [w for w in after if after[w] > before.get(w, 0)] == [worker]:
            return r
        close_one(r)
        wait_until(lambda: _worker_readers(port) == before, timeout=20, what="a stray reader's close")
    raise AssertionError(f"no reader landed on worker {worker} in {tries} tries")


def _open_on(port, worker, tries=60, **kw):
    """A stream on `worker` (land_on)."""
    def open_one():
        s = Stream(port, **kw)
        assert s.status == 200, s.status
        return s
    return land_on(port, worker, open_one, lambda s: s.close(), tries)


def _spread(port, per_worker, **kw):
    """{worker: [streams]}, per_worker streams on each of the two workers."""
    return {w: [_open_on(port, w, **kw) for _ in range(per_worker)] for w in (0, 1)}


def test_workers_start_as_children_and_every_reader_gets_every_event():
    with Herald(config=GROUP) as h:
        text, readers, pids = _metrics(h.port)
        assert re.search(r"^herald_workers 2$", text, re.M), text
        wait_until(lambda: _children(h.pid) == sorted(_metrics(h.port)[2].values()), what="two workers as children")
        assert len(_children(h.pid)) == 2 and 0 not in pids.values(), (pids, _children(h.pid))
        streams = _spread(h.port, 2)
        every = [s for ss in streams.values() for s in ss]
        for s in every:
            s.opening()
        health = json.loads(request(h.port, "GET", "/api/health")[2])
        assert health["workers"] == 2 and health["readers"] == 4, health
        # Posted through whichever worker each new connection reaches, and
        # inserted by another program; the workers tail the database each.
        ids = [publish(h.port, data=f"posted {i}") for i in range(4)]
        sqlite(h.db, "INSERT INTO events(type,topic,data,public) VALUES('message','news','from sqlite3',1)")
        ids.append(ids[-1] + 1)
        ids += [publish(h.port, data="posted last")]
        for s in every:
            evs = s.events(len(ids), timeout=5)
            assert [e["id"] for e in evs] == ids, evs
            assert [e["data"] for e in evs][4] == "from sqlite3", evs
            assert s.events(timeout=0.2) == [], "an event came twice"
            s.close()
        h.stop()
        assert _children(h.pid) == [], "workers outlived the main process"


def test_workers_share_a_unix_socket():
    # One unix socket for the group, watched by both workers (one wakes per
    # connection); the main process removes it at the end, not a worker.
    with Herald(config=GROUP, unix=True) as h:
        both = _spread(h.port, 1, path=h.sock_path)
        eid = publish(None, data="through the socket", path=h.sock_path)
        for s in both[0] + both[1]:
            assert [e["id"] for e in s.events(1)] == [eid]
            s.close()
        assert os.path.exists(h.sock_path)
        h.stop()
        assert not os.path.exists(h.sock_path), "the unix socket was left behind"


def test_workers_caps_hold_across_the_group():
    with Herald(config=GROUP + "per_address_limit = 4\nmax_readers = 6\n") as h:
        mine = _spread(h.port, 2)  # 4 from 127.0.0.1, two on each worker
        st, _, body = request(h.port, "GET", "/api/events/stream")
        assert st == 429 and b"per_address_limit" in body, (st, body)
        other = [Stream(h.port, source="127.0.0.2") for _ in range(2)]
        assert [s.status for s in other] == [200, 200]
        st, _, body = request(h.port, "GET", "/api/events/stream", source="127.0.0.3")
        assert st == 503 and b"max_readers" in body, (st, body)
        assert sum(_worker_readers(h.port).values()) == 6
        # One closed stream frees a place, whichever worker held it.
        mine[1].pop().close()
        wait_until(lambda: sum(_worker_readers(h.port).values()) == 5, what="the close counted")
        s = Stream(h.port)
        assert s.status == 200
        for x in [s] + other + mine[0] + mine[1]:
            x.close()
        h.stop()


def test_workers_sighup_reloads_every_worker():
    with Herald(config=GROUP + "retry_ms = 3000\n") as h:
        before = _spread(h.port, 1)
        with open(os.path.join(h.dir, "herald.conf"), "w") as f:
            f.write(GROUP + "retry_ms = 1234\n")
        mark = h.log_size()
        h.signal(signal.SIGHUP)
        wait_until(lambda: len(re.findall(r"configuration reloaded", h.log()[mark:])) == 2,
                   what="both workers reloaded")
        after = _spread(h.port, 1)
        for w in (0, 1):
            assert b"retry: 1234" in after[w][0].opening(), f"worker {w} kept the old retry_ms"
        # Streams opened before the reload go on, on both workers.
        eid = publish(h.port, data="after reload")
        for s in before[0] + before[1]:
            assert [e["id"] for e in s.events(1)] == [eid]
        for s in before[0] + before[1] + after[0] + after[1]:
            s.close()
        h.stop()


def test_workers_killed_worker_restarts_and_its_readers_leave_the_counts():
    with Herald(config=GROUP + "per_address_limit = 5\n") as h:
        streams = _spread(h.port, 2)
        extra = _open_on(h.port, 0)  # 3 on worker 0, 2 on worker 1: the cap is reached
        assert request(h.port, "GET", "/api/events/stream")[0] == 429
        victim = _metrics(h.port)[2][1]
        mark = h.log_size()
        os.kill(victim, signal.SIGKILL)
        h.wait_log(r"worker 1 \(pid %d\) was killed by signal 9" % victim, since=mark)
        # Its readers see their streams end; the other worker's go on.
        for s in streams[1]:
            s.events(timeout=3)
            assert s.closed, "a dead worker's stream stayed open"
        wait_until(lambda: (lambda p: p.get(1, 0) not in (0, victim))(_metrics(h.port)[2]), timeout=10,
                   what="worker 1 started again")
        assert victim not in _children(h.pid) and len(_children(h.pid)) == 2
        assert _worker_readers(h.port) == {0: 3, 1: 0}
        eid = publish(h.port, data="after the restart")
        for s in streams[0] + [extra]:
            assert [e["id"] for e in s.events(1)] == [eid]
        # The per-address count dropped by the dead worker's two readers.
        again = [Stream(h.port) for _ in range(2)]
        assert [s.status for s in again] == [200, 200]
        assert request(h.port, "GET", "/api/events/stream")[0] == 429
        for s in streams[0] + streams[1] + again + [extra]:
            s.close()
        h.stop()


def test_workers_rows_from_another_program_reach_both_workers_across_the_watchers_restart():
    """Worker 0 alone watches the folder for other programs' commits and
    wakes worker 1; killed, it is started again and takes that up: rows
    inserted while it was gone, and after, reach readers on both."""
    with Herald(config=GROUP) as h:
        on1 = _open_on(h.port, 1)
        on1.opening()
        watcher = _metrics(h.port)[2][0]
        mark = h.log_size()
        os.kill(watcher, signal.SIGKILL)
        h.wait_log(r"worker 0 \(pid %d\) was killed by signal 9" % watcher, since=mark)
        sqlite(h.db, "INSERT INTO events(type,topic,data,public) VALUES('message','news','while gone',1)")
        wait_until(lambda: _metrics(h.port)[2].get(0, 0) not in (0, watcher), timeout=10, what="worker 0 started again")
        # Worker 0 wakes worker 1 as it starts: the row comes without
        # waiting for a commit after it.
        assert [e["data"] for e in on1.events(1, timeout=5)] == ["while gone"]
        on0 = _open_on(h.port, 0)
        on0.opening()
        sqlite(h.db, "INSERT INTO events(type,topic,data,public) VALUES('message','news','after',1)")
        for s, want in ((on1, ["after"]), (on0, ["after"])):
            evs = s.events(len(want), timeout=5)
            assert [e["data"] for e in evs] == want, evs
            assert s.events(timeout=0.2) == [], "an event came twice"
            s.close()
        # Posted through either worker: every commit wakes the other one.
        on = [_open_on(h.port, w) for w in (0, 1)]
        ids = [publish(h.port, data=f"posted {i}") for i in range(20)]
        for s in on:
            assert [e["id"] for e in s.events(len(ids), timeout=5)] == ids
            s.close()
        h.stop()


def test_workers_connections_to_a_dead_worker_wait_for_its_restart():
    # The main process keeps each worker's SO_REUSEPORT socket: connections
    # the kernel hands to a dead worker's socket queue there and are served
    # by the worker started again, none refused or reset.
    with Herald(config=GROUP) as h:
        victim = _metrics(h.port)[2][1]
        os.kill(victim, signal.SIGKILL)
        streams = [Stream(h.port, timeout=10) for _ in range(12)]
        assert [s.status for s in streams] == [200] * 12
        for s in streams:
            s.opening()
        pids = _metrics(h.port)[2]
        assert pids[1] not in (0, victim), pids
        readers = _worker_readers(h.port)
        assert sum(readers.values()) == 12, readers
        for s in streams:
            s.close()
        h.stop()


def test_workers_under_systemd_socket_activation_ready_once_and_watchdog():
    n = Notifications()
    watchdog_usec = 400000
    h = None
    try:
        h, (port,) = _activated_tcp(1, args=["--workers", "2"],
                                    env={"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": str(watchdog_usec)})
        first = Stream(port, timeout=15)  # starts herald; waits in systemd's socket's queue meanwhile
        assert first.status == 200
        first.close()
        h.wait_log(r"herald ready: 2 workers")
        assert "using 1 socket(s) from systemd" in h.log()
        ready = n.wait_for("READY", "1")
        # Both workers accept from the one socket systemd passed.
        both = _spread(port, 1)
        status = n.wait_for("STATUS", after=ready)
        assert re.search(r"\b2 of 2 workers\b", n.msgs[status][1]["STATUS"]), n.msgs[status]
        first_ping = n.wait_for("WATCHDOG", "1", after=ready)
        n.poll(1.0)
        pings = [t for t, kv in n.msgs[first_ping:] if kv.get("WATCHDOG") == "1"]
        assert len(pings) >= 3, f"{len(pings)} watchdog pings in about 1 s"
        # A worker whose loop stops (SIGSTOP) stops the pings, so systemd's
        # watchdog would restart the group; they resume once it runs again.
        pids = _metrics(port)[2]
        os.kill(pids[1], signal.SIGSTOP)
        try:
            n.poll(1.6)
            cut = time.monotonic() - 0.5
            assert not [t for t, kv in n.msgs if kv.get("WATCHDOG") == "1" and t > cut], "pinged for a stopped worker"
        finally:
            os.kill(pids[1], signal.SIGCONT)
        mark = len(n.msgs)
        n.wait_for("WATCHDOG", "1", after=mark, timeout=3)
        for s in both[0] + both[1]:
            s.close()
        h.stop()
        n.poll(0.2)
        assert n.states() == ["READY", "STOPPING"], n.states()
    finally:
        if h:
            h.kill()
        n.close()


test_workers_under_systemd_socket_activation_ready_once_and_watchdog.timeout = 90


def test_workers_setting_range_and_auto():
    import subprocess
    import harness
    for bad in ("0", "65", "two"):
        p = subprocess.run([harness.HERALD_BIN, "--workers", bad, "--check-config"], capture_output=True, text=True,
                           timeout=10)
        assert p.returncode == 1 and "workers" in p.stderr, (bad, p.returncode, p.stderr)
    p = subprocess.run([harness.HERALD_BIN, "--workers", "auto", "--check-config"], capture_output=True, text=True,
                       timeout=10)
    assert p.returncode == 0, p.stderr
    assert re.search(rf"^workers = {min(os.cpu_count(), 64)}$", p.stdout, re.M), p.stdout


def test_workers_bench_small():
    # load/bench-workers against real groups, small: every reader had every
    # event at W = 1 and W = 2, every POST got its 201, both clients' readers
    # were held, and each herald stopped with exit 0.
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p = subprocess.run([os.path.join(root, "load", "bench-workers"), "--latency", "30", "--hold", "20",
                        "--held", "25", "--publish", "300", "--events", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=150, cwd=root)
    assert p.returncode == 0, (p.stdout, p.stderr)
    js = json.loads(p.stdout.strip().splitlines()[-1])
    assert [r["workers"] for r in js["runs"]] == [1, 2], js
    for r in js["runs"]:
        assert r["exit"] == 0, r
        assert r["latency"]["missing_total"] == 0 and r["latency2"]["missing_total"] == 0, r
        assert r["held"] == {"opened": 50, "not_opened": 0}, r
        assert r["publish"]["ok"] == 300, r


test_workers_bench_small.timeout = 180
test_workers_bench_small.alone = True


def test_workers_on_a_fresh_tree_create_the_database_folder():
    # A database inside folders that do not exist yet (a fresh checkout's
    # var/): the group creates them as one herald does, becomes ready, and
    # serves a publish and a stream.
    import tempfile
    d = tempfile.mkdtemp(prefix="herald-test-")
    db = os.path.join(d, "var", "state", "herald.db")
    with Herald(config=GROUP, dir=d, db=db) as h:
        assert os.path.isdir(os.path.join(d, "var", "state"))
        s = Stream(h.port)
        assert s.status == 200 and s.opening() == b"retry: 3000\n: stream open\n\n"
        eid = publish(h.port, data="fresh")
        evs = s.events(n=1, timeout=10)
        assert [(e["id"], e["data"]) for e in evs] == [(eid, "fresh")], evs
        s.close()
