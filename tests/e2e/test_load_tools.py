# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: the measurement tools in load/ against a real herald, with
small N. Each tool's JSON line is checked (counts match, every event reached
every reader), open-only's counter deltas are compared with /proc/net/netstat
read here, the overflow report must find herald's own listening sockets (TCP
and unix) with their configured backlog, a copy of a tool outside the tree
finds herald the way an installed one must, refusals are reported by status
with the readers that did open, --help answers on stdout with exit 0, and bad
arguments must give a usage error (exit 2)."""

# The tools load the machine and time what they measure: nothing runs beside
# them. The tests that only read what a tool says (usage, --help, its first
# line, its port) on tiny runs say `alone = False` and run beside the rest.
ALONE = True
import concurrent.futures
import csv
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading

import harness
from harness import Herald, sqlite

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = ["readers", "open-only", "overflow-report", "publish", "fanout-floor", "backlog-experiment", "topics", "rate",
         "minimal-sse", "tls-handshakes", "presence"]
SCRIPTS = ["bench", "bench-adversary", "bench-auth", "bench-catchup", "bench-check", "bench-tokens", "bench-redis", "bench-workers",
           "bench-peer", "bench-mercure", "plot"]  # scripts beside the C tools


# The build under test (tests/run.py exports it): its load tools are tested.
BUILD = os.path.join(ROOT, os.environ.get("HERALD_BUILD", "build"))


def tool(name):
    """A C tool as the build under test made it ($HERALD_BUILD/load/NAME), or
    a script of load/ (which runs the C tools through load/NAME, the
    launcher, and so the same build's)."""
    path = os.path.join(BUILD, "load", name) if name in TOOLS else os.path.join(ROOT, "load", name)
    assert os.access(path, os.X_OK), f"{path} is not built (make; LOAD_TOOLS in the Makefile lists it?)"
    return path


def test_tree_launcher_runs_the_build_tool():
    """load/NAME in the tree runs $HERALD_BUILD/load/NAME with its arguments
    (the documented `load/readers 1000` keeps working); with no such build
    it says which files it looked for and how to build them."""
    for name in TOOLS:
        p = subprocess.run([os.path.join(ROOT, "load", name), "--help"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30, cwd="/")
        direct = subprocess.run([tool(name), "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        assert p.returncode == 0 and p.stdout == direct.stdout, (name, p.returncode, p.stderr)
    d = tempfile.mkdtemp(prefix="herald-test-")
    try:
        p = subprocess.run([os.path.join(ROOT, "load", "readers"), "5"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30, env=dict(os.environ, HERALD_BUILD=d))
        err = p.stderr.decode(errors="replace")
        assert p.returncode == 127 and f"{d}/load/readers" in err and "make" in err, (p.returncode, err)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run(name, *args, timeout=40, expect=0, env=None):
    """Run load/NAME with args (and env's variables added, a None value
    removing one); return (exit code, stdout, stderr, last JSON line or None)."""
    more, env = env or {}, dict(os.environ)
    for k, v in more.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    p = subprocess.run([tool(name)] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, cwd=ROOT, env=env)
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    assert "runtime error" not in err and "AddressSanitizer" not in err, f"{name}: sanitizer report:\n{err}"
    js = None
    for line in out.splitlines():
        if line.startswith("{"):
            js = json.loads(line)
    if expect is not None:
        assert p.returncode == expect, f"{name} {args} exited {p.returncode}, expected {expect}\n{out}\n{err}"
    return p.returncode, out, err, js


def netstat(*names):
    with open("/proc/net/netstat") as f:
        lines = f.read().splitlines()
    hdr = val = None
    for ln in lines:
        if ln.startswith("TcpExt:"):
            if hdr is None:
                hdr = ln.split()[1:]
            else:
                val = [int(x) for x in ln.split()[1:]]
    d = dict(zip(hdr, val))
    return [d[n] for n in names]


def check_readers(js, n, k):
    assert js["tool"] == "readers"
    assert js["n"] == n and js["opened"] == n, js
    assert js["open_errors"] == 0 and all(v == 0 for v in js["errors"].values()), js["errors"]
    assert js["events_published"] == k and js["events_failed"] == 0, js
    assert js["missing_total"] == 0, f"events missing: {js['events']}"
    assert len(js["events"]) == k
    for e in js["events"]:
        assert e["received"] == n and e["missing"] == 0, e
        assert e["id"] > 0
        assert 0 <= e["min_ms"] <= e["p50_ms"] <= e["p99_ms"] <= e["max_ms"] < 10000, e
    ids = [e["id"] for e in js["events"]]
    assert ids == sorted(ids) and len(set(ids)) == k
    assert js["open_ms"] is not None and js["open_ms"] >= 0
    assert js["closed_after_open"] == 0 and js["still_open"] == n


def test_readers_own_herald_insert():
    """`load/readers N` alone: starts herald, inserts into its database."""
    code, out, err, js = run("readers", 40, "--events", 3, "--interval", 0.2, "--idle", 0.5, "--backlog", 128,
                             "--run", "small")
    check_readers(js, 40, 3)
    assert js["publish"] == "insert" and js["backlog"] == 128 and js["backlog_effective"] == 128
    assert js["pid"] > 0 and js["threads_open"] >= 1 and js["rss_open_kb"] > 0
    assert js["cpu_events_pct"] is not None and js["cpu_idle_pct"] is not None
    # Time runnable without a CPU, from the scheduler's own count, at most
    # the time between two events.
    assert js["wait_ms_per_event"] is not None and 0 <= js["wait_ms_per_event"] < 1000, js
    assert "Server runnable but waiting for a CPU: " in out, out
    assert js["floor_ms"] is not None and js["floor_ms"] > 0 and js["floor_ratio"] > 0
    assert js["herald_exit"] == 0
    # The markdown table with the agreed columns, then the per-event table.
    assert "| run | listen backlog | opens (40) | not opened | threads, all open | event to all 40 " \
           "| CPU while events flow | CPU idle | RSS per reader |" in out, out
    assert "| small | 128 |" in out and "| 0 |" in out
    assert out.count("\n| 1 |") + out.count("\n| 2 |") + out.count("\n| 3 |") == 3


def test_readers_running_herald_post_and_pid():
    with Herald(args=["--per-address-limit", "0"]) as h:
        code, out, err, js = run("readers", 50, "--server", f"127.0.0.1:{h.port}", "--pid", h.pid,
                                 "--publish", f"http://127.0.0.1:{h.port}/api/events", "--events", 3,
                                 "--interval", 0.2, "--idle", 1, "--no-floor")
        check_readers(js, 50, 3)
        assert js["publish"] == "post" and js["pid"] == h.pid
        assert js["threads_open"] >= 1 and js["rss_before_kb"] > 0 and js["rss_open_kb"] >= js["rss_before_kb"]
        assert js["backlog_effective"] == 1024  # herald's default, read through sock_diag
        assert isinstance(js["listen_overflows"], int) and js["listen_overflows"] >= 0
        assert js["floor_ms"] is None


def test_readers_db_path_and_csv_over_unix(tmp=None):
    with Herald(args=["--per-address-limit", "0"], unix=True) as h:
        path = os.path.join(h.dir, "lat.csv")
        code, out, err, js = run("readers", 30, "--server", "unix:" + h.sock_path, "--pid", h.pid, "--db", h.db,
                                 "--events", 2, "--interval", 0.2, "--idle", 0.3, "--no-floor", "--csv", path)
        check_readers(js, 30, 2)
        assert js["backlog_effective"] == 1024  # the unix listener's, read through sock_diag
        with open(path) as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == 30 * 2
        assert {r["event"] for r in rows} == {"1", "2"}
        assert all(r["latency_ms"] != "" and float(r["latency_ms"]) >= 0 for r in rows)
        assert sorted({int(r["id"]) for r in rows}) == [e["id"] for e in js["events"]]


def test_readers_counts_errors_by_kind():
    # Nothing listens on a port we hold bound without listen(): every open
    # is refused, and no other socket can take the port meanwhile.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    try:
        code, out, err, js = run("readers", 5, "--server", f"127.0.0.1:{port}", "--publish",
                                 f"http://127.0.0.1:{port}/api/events", "--no-floor", expect=1)
    finally:
        s.close()
    assert js["opened"] == 0 and js["errors"]["refused"] == 5, js["errors"]
    assert "5 refused" in out
    # A wrong path: every reader gets a 404, counted with its status.
    with Herald() as h:
        code, out, err, js = run("readers", 4, "--server", f"127.0.0.1:{h.port}", "--path", "/nope",
                                 "--publish", f"http://127.0.0.1:{h.port}/api/events", "--no-floor", "--idle", 0,
                                 expect=1)
        assert js["errors"]["non200"] == 4 and js["non200_status"] == {"404": 4}, js
        # herald's default per-address cap (32) turns readers 33.. away with 429.
        code, out, err, js = run("readers", 34, "--server", f"127.0.0.1:{h.port}", "--publish",
                                 f"http://127.0.0.1:{h.port}/api/events", "--events", 1, "--idle", 0,
                                 "--no-floor", expect=1)
        assert js["opened"] == 32 and js["non200_status"] == {"429": 2}, js
        assert js["events"][0]["received"] == 32


def test_open_only_counters_from_proc():
    with Herald(args=["--backlog", "64"]) as h:
        before = netstat("ListenOverflows", "ListenDrops")
        code, out, err, js = run("open-only", 100, "--server", f"127.0.0.1:{h.port}")
        after = netstat("ListenOverflows", "ListenDrops")
    assert js["connects"] == 100 and js["errors"] == 0
    assert js["backlog_effective"] == 64
    for i, name in enumerate(("listen_overflows", "listen_drops")):
        b, a, d = js[name + "_before"], js[name + "_after"], js[name]
        assert all(isinstance(x, int) for x in (b, a, d)), js
        # The tool's window lies inside ours, so its readings lie inside ours.
        assert before[i] <= b <= a <= after[i], (name, before[i], b, a, after[i])
        assert d == a - b
    assert isinstance(js["slow_connects"], int) and js["total_ms"] > 0
    assert "| backlog | connects (100) | connect loop | connects slower than 0.5 s | ListenOverflows | ListenDrops |" in out


def test_open_only_own_herald():
    code, out, err, js = run("open-only", 30, "--backlog", 32, "--close")
    assert js["connects"] == 30 and js["errors"] == 0 and js["backlog"] == 32


def test_overflow_report_finds_herald():
    with Herald(args=["--backlog", "77"]) as h:
        code, out, err, js = run("overflow-report", "--port", h.port, "--json")
        ls = [l for l in js["listeners"] if l["port"] == h.port]
        assert len(ls) == 1, js["listeners"]
        assert ls[0]["max"] == 77 and ls[0]["queued"] == 0
        assert ls[0]["pid"] == h.pid and "herald" in ls[0]["process"]
        for c in ("ListenOverflows", "ListenDrops", "TCPBacklogDrop", "TCPReqQFullDrop", "TCPReqQFullDoCookies",
                  "SyncookiesSent"):
            assert isinstance(js["counters"][c], int), c
        for s in ("net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog", "net.ipv4.tcp_syncookies"):
            assert js["sysctl"][s] >= 0
        assert js["notes"], js
        code, out, err, _ = run("overflow-report", "--port", h.port, "--backlog", 5000)
        assert f"127.0.0.1:{h.port} | herald" in out and "| 0 | 77 |" in out, out
        assert "What this means:" in out
        somax = js["sysctl"]["net.core.somaxconn"]
        if somax < 5000:
            # herald asked 77 here, so the report says what 5000 would not be.
            assert "not the 5000 asked for" in out, out
        # --watch prints one JSON object per interval.
        code, out, err, _ = run("overflow-report", "--port", h.port, "--watch", 0.2, "--count", 2, "--json")
        lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        assert len(lines) == 2 and all("deltas" in l for l in lines)
        assert all(l["listeners"][0]["max"] == 77 for l in lines)
    # A port nobody listens on is said plainly, exit 1 (held bound, not
    # listening, so no other socket takes it meanwhile).
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    try:
        code, out, err, js = run("overflow-report", "--port", port, "--json", expect=1)
    finally:
        s.close()
    assert js["listeners"] == []


def test_publish_split():
    with Herald() as h:
        code, out, err, js = run("publish", 300, "-c", 16, "-k", 4, "--server", f"127.0.0.1:{h.port}", "--db", h.db)
    assert js["n"] == 300 and js["ok"] == 300 and js["http_errors"] == 0 and js["network_errors"] == 0, js
    assert js["rows"] == 300
    assert js["throughput_rps"] > 0 and 0 < js["p50_ms"] <= js["p99_ms"]
    assert "| requests | in flight | connections | time | throughput | p50 | p99 | ok | HTTP error | network error |" in out
    # HTTP errors by status: a wrong token against a herald that wants one.
    with Herald(args=["--publish-token", "sekrit"]) as h:
        code, out, err, js = run("publish", 20, "-c", 4, "--server", f"127.0.0.1:{h.port}", "--token", "wrong",
                                 expect=1)
    assert js["ok"] == 0 and js["http_errors"] == 20 and js["http_status"] == {"403": 20}, js
    assert "20 (403: 20)" in out


def test_publish_with_idempotency_keys():
    """--idempotency-keys sends a new key with each request: every one is
    stored, each with its key remembered; a second run uses other keys."""
    with Herald() as h:
        for _ in range(2):
            code, out, err, js = run("publish", 200, "-c", 16, "-k", 4, "--idempotency-keys", "--server",
                                     f"127.0.0.1:{h.port}", "--db", h.db)
            assert js["ok"] == 200 and js["rows"] == 200 and js["idempotency_keys"] is True, js
        assert sqlite(h.db, "SELECT count(*) FROM herald_idempotency") == "400"
    code, out, err, js = run("publish", 10)
    assert js["idempotency_keys"] is False


def test_fanout_floor():
    code, out, err, js = run("fanout-floor", 50, "--rounds", 3)
    assert js["n"] == 50 and js["rounds"] == 3 and js["transport"] == "tcp"
    assert js["loop_ms"] > 0 and js["cpu_ms"] >= 0 and js["last_reader_ms"] > 0
    assert js["last_reader_min_ms"] <= js["last_reader_ms"] <= js["last_reader_max_ms"]
    code, out, err, js = run("fanout-floor", 20, "--rounds", 2, "--unix", "--json")
    assert js["transport"] == "unix" and js["last_reader_ms"] > 0
    # Split over writers that start at one moment: the floor for a group.
    code, out, err, js = run("fanout-floor", 61, "--rounds", 2, "--procs", 3, "--json")
    assert js["n"] == 61 and js["procs"] == 3 and js["rounds"] == 2, js
    assert js["loop_ms"] > 0 and js["cpu_ms"] >= 0 and js["last_reader_ms"] > 0
    assert js["last_reader_min_ms"] <= js["last_reader_ms"] <= js["last_reader_max_ms"]


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def test_fanout_floor_processes_end_with_it():
    """A floor split over writers that is ended before its end (load/readers
    ends one after five minutes) leaves none of its processes behind: each
    writer and reader dies with the process that forked it, even one that
    is stopped or busy connecting then."""
    p = subprocess.Popen([tool("fanout-floor"), "4000", "--procs", "4", "--rounds", "1000", "--json"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    forked = []
    try:
        def connecting(pid):
            # A reader opens its sockets only after it asked to die with
            # its writer (a writer forks its reader only after it asked):
            # one stopped before then would outlive them, as the tool means.
            try:
                return len(os.listdir(f"/proc/{pid}/fd")) > 16
            except OSError:
                return False

        def all_forked():
            ws = _children(p.pid)
            return (len(ws) == 4 and all(len(_children(w)) == 1 and connecting(_children(w)[0]) for w in ws)
                    and ws)
        writers = harness.wait_until(all_forked, timeout=20, what="four writers with their readers")
        forked = writers + [c for w in writers for c in _children(w)]
        # Stopped, they cannot end on their own when the pipes close.
        for c in forked:
            os.kill(c, signal.SIGSTOP)
        p.kill()
        p.wait()
        harness.wait_until(lambda: not any(_alive(c) for c in forked), timeout=10,
                           what="the floor's writers and readers ending with it")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for c in forked:
            if _alive(c):
                os.kill(c, signal.SIGKILL)


def _smaps(pid, field):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/smaps_rollup")


def _family(pid):
    out = [pid]
    for c in _children(pid):
        out += _family(c)
    return out


def test_readers_procs_counts_a_groups_shared_pages_once():
    """Over a group of workers, memory is the processes' PSS summed: the
    region and libraries they share count once for the group, not once per
    process as their RSS would (which made a million readers over 55
    workers look 70 B a reader heavier than they were)."""
    with Herald(args=["--workers", "4", "--per-address-limit", "0"]) as h:
        harness.wait_until(lambda: len(_children(h.pid)) == 4, timeout=20, what="four workers")
        fam = _family(h.pid)
        pss = sum(_smaps(q, "Pss") for q in fam)
        rss = sum(_smaps(q, "Rss") for q in fam)
        assert rss > 1.5 * pss, (rss, pss)  # five processes mapping the same pages
        code, out, err, js = run("readers", 200, "--procs", 2, "--server", f"127.0.0.1:{h.port}", "--pid", h.pid,
                                 "--db", h.db, "--events", 1, "--interval", 0.2, "--idle", 0, "--no-floor",
                                 timeout=60)
        assert js["opened"] == 200, js
        # Before the opens the group held what the test read just before.
        assert 0.8 * pss <= js["rss_before_kb"] <= 1.25 * pss, (js["rss_before_kb"], pss, rss)
        assert "memory per reader (PSS), all processes" in out, out


def test_readers_procs_over_a_group_of_workers():
    """`load/readers N --procs P --workers W`: herald of the build under test
    as a main process and W workers, the readers spread over P client
    processes; every reader had every event once and in order, and every
    figure is there and consistent."""
    herald = os.path.abspath(harness.HERALD_BIN)
    code, out, err, js = run("readers", 600, "--procs", 3, "--workers", 2, "--events", 3, "--interval", 0.2,
                             "--idle", 0.3, timeout=50, env={"HERALD_BIN": herald})
    assert js["tool"] == "readers" and js["mode"] == "procs", js
    assert js["n"] == 600 and js["procs"] == 3 and js["workers"] == 2, js
    assert js["herald_processes"] == 3, js  # the main process and two workers
    assert js["opened"] == 600 and js["open_errors"] == 0 and js["open_ms"] > 0, js
    assert all(v == 0 for v in js["errors"].values()), js["errors"]
    assert js["events_published"] == 3 and js["events_failed"] == 0, js
    ids = [e["id"] for e in js["events"]]
    assert len(ids) == 3 and ids == sorted(set(ids)), ids
    for e in js["events"]:
        assert e["received"] == 600 and e["missing"] == 0, e
        assert 0 < e["last_ms"] < 10000, e
    assert 0 < js["event_last_median_ms"] <= js["event_last_max_ms"], js
    # The id check in the client processes: each reader read every id once, in order.
    assert js["readers_checked"] == 600 and js["readers_complete"] == 600, js
    assert js["ids_missed"] == 0 and js["ids_duplicated"] == 0 and js["ids_out_of_order"] == 0, js
    assert js["readers_with_missed"] == js["readers_with_duplicates"] == js["readers_out_of_order"] == 0, js
    assert js["still_open"] == 600, js
    # herald's memory and CPU summed over its processes, and the clients' CPU.
    assert 0 < js["rss_before_kb"] < js["rss_open_kb"], js
    assert js["rss_per_reader_bytes"] > 0, js
    assert js["server_cpu_per_event_ms"] >= 0 and js["server_cpu_idle_pct"] >= 0, js
    assert js["client_cpu_open_s"] > 0 and js["client_cpu_events_s"] >= 0, js
    # The floor split over as many writers as herald has workers.
    assert js["floor_writers"] == 2 and js["floor_ms"] > 0, js
    assert abs(js["floor_ratio"] - js["event_last_median_ms"] / js["floor_ms"]) < 0.01, js
    assert js["herald_exit"] == 0, js
    assert "| 600 | 3 | 3 |" in out, out
    assert len(re.findall(r"^\| [123] \| \d+ \| 600 \| 0 \| ", out, re.M)) == 3, out


test_readers_procs_over_a_group_of_workers.timeout = 60


def test_readers_procs_twenty_thousand_over_four_workers():
    """The million's run scaled down: 20,000 readers over four client
    processes against four workers; every reader had every event once and
    in order, the opens, the kernel's memory per reader, the heartbeats of
    the idle phase and their cost, and the floor with batched sends."""
    herald = os.path.abspath(harness.HERALD_BIN)
    code, out, err, js = run("readers", 20000, "--procs", 4, "--workers", 4, "--events", 2, "--interval", 0.5,
                             "--heartbeat", 1, "--idle", 2.5, "--open-timeout", 30, timeout=55,
                             env={"HERALD_BIN": herald})
    assert js["n"] == 20000 and js["procs"] == 4 and js["workers"] == 4 and js["herald_processes"] == 5, js
    assert js["opened"] == 20000 and js["open_errors"] == 0 and js["opens_per_s"] > 0, js
    assert js["readers_checked"] == js["readers_complete"] == 20000, js
    assert js["ids_missed"] == js["ids_duplicated"] == js["ids_out_of_order"] == 0, js
    assert all(e["received"] == 20000 for e in js["events"]), js["events"]
    # Each reader is two sockets here (the client's and herald's).
    assert js["kernel_sockets_opened"] > 30000, js
    assert js["kernel_bytes_per_reader"] > 1000, js
    # Readers idle past an interval read heartbeats, and herald's CPU for
    # them is a figure.
    assert js["heartbeat_interval_s"] == 1 and js["heartbeats_idle"] > 10000 and js["heartbeats_events"] >= 0, js
    assert js["heartbeat_cpu_us"] > 0 and js["heartbeat_cpu_per_reader_minute_us"] > 0, js
    assert js["floor_writer"] == "io_uring" and js["floor_writers"] == 4 and js["floor_ms"] > 0, js
    assert js["floor_cpu_per_send_us"] > 0, js
    assert "herald CPU per heartbeat" in out and "kernel memory per reader" in out, out


test_readers_procs_twenty_thousand_over_four_workers.timeout = 60


def test_readers_procs_says_which_limit_is_short():
    """A run the system cannot hold is refused before anything opens, with
    the setting that is short and what to set (here the open-file limit,
    lowered for the tool: 20,000 readers over two processes need about
    10,000 descriptors each)."""
    import resource

    def low():
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))

    p = subprocess.run([tool("readers"), "20000", "--procs", "2", "--workers", "2"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=20, cwd=ROOT, preexec_fn=low,
                       env=dict(os.environ, HERALD_BIN=os.path.abspath(harness.HERALD_BIN)))
    err = p.stderr.decode()
    assert p.returncode == 2, (p.returncode, err)
    assert "short: ulimit -n allows 4,096" in err and "ulimit -Hn" in err, err
    assert "nothing was opened" in err and "started herald" not in err, err


test_readers_procs_says_which_limit_is_short.alone = False


def test_backlog_experiment_small():
    code, out, err, js = run("backlog-experiment", "--readers", 20, "--opens", 20, "--backlogs", "5,64",
                             "--events", 2, "--interval", 0.1, "--idle", 0.2, "--no-floor", timeout=60)
    summary = out.split("## Summary", 1)[1]
    assert "| backlog 5 | 5 |" in summary and "| backlog 64 | 64 |" in summary, summary
    assert "| 5 | 20 |" in summary and "| 64 | 20 |" in summary, summary
    assert "What this means:" in summary


test_backlog_experiment_small.timeout = 90


def test_usage_errors():
    bad = {
        "readers": [[], ["0"], ["abc"], ["10", "--bogus"], ["10", "--events"], ["10", "--server", "nowhere"],
                    ["10", "--server", "127.0.0.1:1"], ["10", "--pid", "1"], ["10", "--interval", "-1"],
                    ["2000000"], ["10", "--workers", "2"], ["10", "--procs", "2", "--post"],
                    ["10", "--procs", "2", "--opens", "2"], ["2", "--procs", "3"]],
        "open-only": [[], ["x"], ["5", "--timeout", "0"], ["5", "--server", "1.2.3"]],
        "overflow-report": [["--port", "0"], ["--watch", "x"], ["--count", "2"], ["extra"]],
        "publish": [[], ["10", "-c", "0"], ["10", "-c", "2", "-k", "4"], ["10", "--db", "x.db"], ["10", "--ids"]],
        "fanout-floor": [[], ["0"], ["10", "--rounds", "0"], ["10", "--nope"]],
        "backlog-experiment": [["--backlogs", "x"], ["--readers", "0"], ["surplus"]],
        "topics": [["0"], ["10", "--scenario", "nope"], ["10", "--scenario", "t4,"], ["10", "--pool", "8"],
                   ["10", "--events", "0"], ["10", "--nope"]],
        "rate": [["0"], ["--rates", "x"], ["--rates", "100,"], ["--step", "0"], ["-k", "0"], ["10", "--bogus"]],
        "plot": [[], ["/tmp/somewhere"], ["--rate"], ["a", "b", "--rate", "x.csv"]],
        "bench-mercure": [["--setups", "three"], ["--setups", "one,one"], ["--rounds", "0"], ["--port", "65534"],
                          ["--readers"], ["extra"]],
        "bench-adversary": [["--attacks", "nope"], ["--attacks", ""], ["--seconds", "0"], ["--readers", "0"],
                            ["--rate", "x"], ["--port", "65536"], ["--seconds"], ["extra"]],
    }
    for name, cases in bad.items():
        for args in cases:
            code, out, err, _ = run(name, *args, expect=2)
            assert "usage: load/" + name in err, (name, args, err)
        code, out, err, _ = run(name, "--help")
        assert out.startswith("usage: load/" + name), (name, out)
    # More readers than the fd limit allows is said plainly, exit 2.
    code, out, err, _ = run("readers", 999999, expect=2)
    assert "open files" in err and "hard limit" in err, err


test_usage_errors.alone = False


def test_topics_every_scenario():
    # Every scenario's readers open and have exactly the events of their
    # topics (the tool counts what is missing, doubled or not wanted), with
    # the figures beside; the floor's events reach only its last one's reader.
    code, out, err, js = run("topics", 40, "--events", 60, "--batch", 20, "--pool", 16, timeout=120)
    assert js["tool"] == "topics" and js["readers"] == 40 and js["events"] == 60, js
    sc = {s["name"]: s for s in js["scenarios"]}
    assert set(sc) == {"floor", "one", "t1", "t4", "t16", "own", "own-subtree"}, js
    for s in sc.values():
        assert s["opened"] == 40 and s["events"] == 60, s
        assert s["missing"] == 0 and s["doubled"] == 0 and s["unwanted"] == 0, s
        assert s["frames"] == s["frames_expected"] > 0, s
        assert s["sched_us_per_event"] > 0, s
    assert sc["floor"]["frames"] == 1 and sc["one"]["frames"] == 40 * 60 and sc["own"]["frames"] == 60, js
    assert sc["t16"]["frames"] > sc["t4"]["frames"] > sc["t1"]["frames"], js
    assert "Every reader had exactly the events of its topics" in out, out


test_topics_every_scenario.timeout = 150


def test_presence_opens_and_answers_over_a_group_of_workers():
    # Readers over two client processes against two workers: every one
    # opens, and every answer for t/0 counts its readers exactly.
    code, out, err, js = run("presence", 300, "--topics", 10, "--procs", 2, "--workers", 2, "--queries", 5,
                             timeout=120)
    assert js["tool"] == "presence" and js["opened"] == 300 and js["wrong_counts"] == 0, js
    assert js["workers"] == 2 and js["opens_per_s"] > 0 and js["top_p50_ms"] > 0, js
    code, out, err, js = run("presence", 100, "--presence", "off", "--queries", 0, timeout=120)
    assert js["presence"] == "off" and js["opened"] == 100, js
    run("presence", 10, "--presence", "maybe", expect=2)


test_presence_opens_and_answers_over_a_group_of_workers.timeout = 150


def test_bench_tokens_first_open_and_reopen():
    # Every reader of every round opens (an unverified token would be a 401
    # and not open); each reader's own token is checked once, on the first
    # open, and the reopen with the same tokens is answered from the cache.
    code, out, err, js = run("bench-tokens", 30, timeout=120)
    runs = {(r["token"], r["phase"]): r for r in js["runs"]}
    assert set(runs) == {(t, p) for t in ("no token", "HS256", "ES256") for p in ("first open", "reopen")}, js
    assert all(r["opened"] == 30 and r["cpu_per_open_us"] > 0 for r in runs.values()), js
    for alg in ("HS256", "ES256"):
        assert runs[(alg, "first open")]["signatures_checked"] == 30, js
        assert runs[(alg, "reopen")]["signatures_checked"] == 0, js
        assert isinstance(runs[(alg, "reopen")]["beside_no_token_us"], float), js
    assert runs[("no token", "first open")]["signatures_checked"] == 0, js
    assert runs[("no token", "reopen")]["beside_no_token_us"] is None, js
    assert "| ES256, reopen | 30 |" in out, out


test_bench_tokens_first_open_and_reopen.timeout = 150


def test_bench_auth_storm_costs_one_request_per_session():
    # 200 opens over 5 sessions: every reader opens in every round, the cold
    # storm asks the application once per session (the rest joined or hit the
    # cache), the reopen asks nothing.
    code, out, err, js = run("bench-auth", 200, "--sessions", 5, timeout=90)
    floor, cold, cached = js["runs"]
    assert all(r["opened"] == 200 for r in js["runs"]), js
    assert floor["app_requests"] == 0 and cold["app_requests"] == 5 and cached["app_requests"] == 0, js
    assert cold["joined"] + cold["cache_hits"] == 195 and cached["cache_hits"] == 200, js
    assert "| auth_request, cold cache (the storm) | 200 | 5 |" in out, out
    run("bench-auth", 10, "--sessions", 11, expect=2)


test_bench_auth_storm_costs_one_request_per_session.timeout = 120


def test_bench_redis_small():
    # Every step ran against real nodes: no reader missed an event on either
    # backend, every POST was answered 201 through one and three nodes, and
    # the three nodes held every reader asked for.
    code, out, err, js = run("bench-redis", "--readers", 20, "--events", 2, "--publish", 300, "--held", 40,
                             "--tails", "1,2", timeout=150)
    for node in ("sqlite", "redis-1"):
        assert js["latency"][node]["missing_total"] == 0, js
        assert js["publish"][node]["ok"] == 300, js
    assert js["publish"]["three"]["ok"] == 300 and js["publish"]["three"]["errors"] == 0, js
    assert js["held"]["opened"] == 120, js
    assert "| redis-1 |" in out and "Three nodes held 120 streams" in out, out
    # Redis's own CPU over each Redis publish step, by the publishes it served.
    for k in ("redis-1", "three"):
        r = js["redis_cpu"][k]
        assert r["publishes"] == 300 and r["cpu_s"] >= 0, js
        assert (r["us_per_publish"] > 0) == (r["cpu_s"] > 0), js
    assert "one core's worth (the log's ceiling)" in out, out
    # The tail step: a fresh Redis with one node, then two, every POST served.
    rows = js["tails"]["rows"]
    assert [r["nodes"] for r in rows] == [1, 2] and all(r["publishes"] == 300 for r in rows), js
    assert set(js["tails"]["fit"]) == {"a_us", "b_us_per_node"}, js
    assert "for each node reading the tail" in out, out
    for bad in ("0,1", "33", "x"):
        code, out, err, _ = run("bench-redis", "--tails", bad, expect=2)
        assert "usage: load/bench-redis" in err, (bad, err)


test_bench_redis_small.timeout = 180


def test_bench_mercure_small():
    # Both endpoints measured on the same nodes in one run, on one node
    # (SQLite) and on two over the tool's own redis-server (readers on A,
    # publishes on B): every POST to /api/events and to /.well-known/mercure
    # answered (and stored, on SQLite), every reader (herald's and
    # Mercure's) opened and had every event, and each figure printed with
    # its ratio and the target beside it. Timings are not judged here.
    code, out, err, js = run("bench-mercure", "--readers", 20, "--events", 2, "--publish", 300, "--rounds", 1,
                             timeout=90)
    assert js["tool"] == "bench-mercure" and js["complete"] is True and js["failures"] == [], js
    assert sorted(js["setups"]) == ["one", "two"] and len(js["ports"]) == 3, js
    for key, title in (("one", "one node, SQLite"), ("two", "two nodes on Redis (readers on A, publishes on B)")):
        setup = js["setups"][key]
        for ep in ("herald", "mercure"):
            s = setup[ep]
            assert s["ok"] == 300 and s["http_errors"] == 0 and s["network_errors"] == 0, (key, ep, s)
            assert s["readers_opened"] == 20 and s["events_timed"] == 2 and s["missing_total"] == 0, (key, ep, s)
            assert s["throughput_rps"] > 0 and 0 < s["event_to_last_p50_ms"] <= s["event_to_last_max_ms"], (key, s)
        assert set(setup["ratio"]) == {"throughput", "event_to_last_p50", "event_to_last_max"}, setup
        assert all(r > 0 for r in setup["ratio"].values()), setup
        assert all(isinstance(m, bool) for m in setup["meets"].values()), setup
        assert f"| {title} | " in out and f"| {title} | worst | " in out, out
    assert "≥ 0.90: " in out and "≤ 1.10: " in out and "FAIL" not in out, out


test_bench_mercure_small.timeout = 120


def _nchan_missing():
    """Why nginx with the nchan module cannot run here, or None."""
    if not (os.environ.get("NGINX") or shutil.which("nginx") or os.access("/usr/sbin/nginx", os.X_OK)):
        return "nginx is not installed (Debian: nginx-light; scripts/deps installs it)"
    module = os.environ.get("NCHAN_MODULE") or "/usr/lib/nginx/modules/ngx_nchan_module.so"
    if not os.path.isfile(module):
        return f"the nchan module {module} is not installed (Debian: libnginx-mod-nchan; scripts/deps installs it)"
    return None


def test_bench_peer_small():
    # herald and a real nginx+nchan, each with every reader opened and every
    # event at every reader, the floors measured, and the table and the JSON
    # line carrying each figure; the nginx started here is gone afterwards.
    # scripts/deps installs nginx and the module with the rest (make test),
    # so their absence is a set-up to fix, said as such.
    why = _nchan_missing()
    assert why is None, why
    code, out, err, js = run("bench-peer", "--readers", 200, "--events", 3, "--rounds", 1, "--interval", 0.1,
                             timeout=200)
    assert js["tool"] == "bench-peer" and js["complete"] is True, js
    res = js["results"]["200"]
    for who in ("herald", "nchan"):
        runs = res["runs"][who]
        assert len(runs) == 1 and runs[0]["opened"] == 200, (who, runs)
        assert runs[0]["received"] == [200, 200, 200] and runs[0]["missing_total"] == 0, (who, runs)
        assert runs[0]["events_failed"] == 0, (who, runs)
        for key in ("open_ms", "event_to_last_ms", "cpu_ms_per_event", "wait_ms_per_event", "rss_per_reader_kb",
                    "open_vs_floor", "event_vs_floor"):
            assert res[who][key] is not None and res[who][key] >= 0, (who, key, res[who])
        assert res[who]["open_ms"] > 0 and res[who]["event_to_last_ms"] > 0, (who, res[who])
    assert res["floors"]["write_floor_ms"] > 0 and res["floors"]["open_floor_ms"] > 0, res["floors"]
    assert "| herald |" in out and "| nginx + nchan, one worker |" in out and "| kernel floors |" in out, out
    assert "| CPU per event | waiting for a CPU per event |" in out, out
    assert "NO (" not in out, out
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).startswith("nginx: master")
                and "herald-peer-" in _cmdline(p)], "an nginx of load/bench-peer is still running"


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


test_bench_peer_small.timeout = 240


def test_help_every_tool():
    """--help prints the usage on stdout and exits 0, for every tool and the
    bench script; an unknown option exits 2 with the usage on stderr only."""
    for name in TOOLS + SCRIPTS:
        for flag in ("--help", "-h"):
            code, out, err, _ = run(name, flag)
            assert out.startswith("usage: load/" + name), (name, flag, out)
            assert err == "", (name, flag, err)
        code, out, err, _ = run(name, "--no-such-option", expect=2)
        assert out == "" and "usage: load/" + name in err and "--no-such-option" in err, (name, out, err)


test_help_every_tool.alone = False


def test_overflow_report_unix_listeners():
    """Unix listeners are reported beside TCP ones, their accept queue now
    and its limit from sock_diag (UNIX_DIAG_RQLEN), in every output mode."""
    with Herald(args=["--backlog", "77"], unix=True) as h:
        code, out, err, js = run("overflow-report", "--json")
        mine = [l for l in js["listeners"] if l.get("path") == h.sock_path]
        assert len(mine) == 1, js["listeners"]
        u = mine[0]
        assert u["family"] == "unix" and u["port"] is None and u["name"] == "unix:" + h.sock_path, u
        assert u["max"] == 77 and u["queued"] == 0, u
        assert u["pid"] == h.pid and "herald" in u["process"], u
        tcp = [l for l in js["listeners"] if l["family"] == "tcp" and l["port"] == h.port]
        assert len(tcp) == 1 and tcp[0]["max"] == 77, js["listeners"]
        # Once, as text: a row per listener, the unix one named by its path.
        code, out, err, _ = run("overflow-report", "--port", h.port, "--socket", h.sock_path)
        assert f"| unix:{h.sock_path} | herald (pid {h.pid}) | 0 | 77 |" in out, out
        assert f"| 127.0.0.1:{h.port} | herald (pid {h.pid}) | 0 | 77 |" in out, out
        # Found by its file too, when named by another path to it.
        code, out, err, js = run("overflow-report", "--socket", os.path.relpath(h.sock_path, ROOT), "--json")
        assert [l["path"] for l in js["listeners"]] == [h.sock_path], js["listeners"]
        # Deltas over time, as text and as JSON.
        code, out, err, _ = run("overflow-report", "--socket", h.sock_path, "--watch", 0.2, "--count", 2)
        rows = [l for l in out.splitlines() if re.match(r"\| \d\d:\d\d:\d\d \|", l)]
        assert len(rows) == 2 and all(f"unix:{h.sock_path} 0/77" in r for r in rows), out
        code, out, err, _ = run("overflow-report", "--socket", h.sock_path, "--watch", 0.2, "--count", 2, "--json")
        lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        assert len(lines) == 2, out
        for l in lines:
            assert [(x["path"], x["queued"], x["max"]) for x in l["listeners"]] == [(h.sock_path, 0, 77)], l
    # The queue now: a listener with a backlog of 5 that accepts nothing,
    # with two connections waiting in it.
    d = tempfile.mkdtemp(prefix="herald-test-")
    path = os.path.join(d, "still.sock")
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    clients = []
    try:
        lsock.bind(path)
        lsock.listen(5)
        for _ in range(2):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect(path)
            clients.append(c)
        code, out, err, js = run("overflow-report", "--socket", path, "--json")
        assert [(l["queued"], l["max"], l["pid"]) for l in js["listeners"]] == [(2, 5, os.getpid())], js
        # Not listening there any more: said plainly, exit 1.
        lsock.close()
        code, out, err, js = run("overflow-report", "--socket", path, "--json", expect=1)
        assert js["listeners"] == [] and any(path in n for n in js["notes"]), js
    finally:
        for c in clients:
            c.close()
        lsock.close()
        shutil.rmtree(d, ignore_errors=True)


def _wrapper(folder, real, mark):
    """An executable `herald` in folder that notes its use in mark, then runs real."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "herald")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\necho used > '{mark}'\nexec '{real}' \"$@\"\n")
    os.chmod(path, 0o755)
    return path


def _run_copy(path, cwd, env, expect):
    env = dict(env)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    p = subprocess.run([path, "5", "--close"], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=40)
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    assert p.returncode == expect, f"{path} exited {p.returncode}, expected {expect}\n{out}\n{err}"
    m = re.search(r"started herald (\S+) \(pid", err)
    return out, err, m.group(1) if m else None


def test_tool_outside_the_tree_finds_herald():
    """A tool copied out of the tree (as `make install` puts it) starts
    $HERALD_BIN when set, else the herald of the tree it was built in when it
    exists, else the herald on PATH, and otherwise names all three."""
    real = os.path.abspath(os.environ.get("HERALD_BIN", "build/herald"))
    d = tempfile.mkdtemp(prefix="herald-test-")
    try:
        mark = os.path.join(d, "used")
        on_path = _wrapper(os.path.join(d, "bin"), real, mark)
        base = {k: v for k, v in os.environ.items() if k != "HERALD_BIN"}
        base["PATH"] = os.path.join(d, "bin") + ":/usr/bin:/bin"
        # The tool as built, copied: the tree's herald or the one on PATH.
        copy = os.path.join(d, "open-only")
        shutil.copy(tool("open-only"), copy)
        out, err, used = _run_copy(copy, d, base, 0)
        assert used == on_path or (used and used.startswith(ROOT + "/")), err
        assert (used == on_path) == os.path.exists(mark)
        # Built for a tree that is gone (the usual installed case), compiled
        # here with that tree's herald named the way the Makefile names it.
        gone = os.path.join(d, "gone", "build", "herald")
        built = os.path.join(d, "open-only-gone")
        cc = subprocess.run(["cc", "-std=gnu11", "-D_GNU_SOURCE", "-Isrc", f'-DHERALD_TREE_BIN="{gone}"', "-o", built,
                             "load/open-only.c"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "load", "tool*.c"))) + ["src/common/util.c", "src/common/procstat.c", "src/common/sockdiag.c", "-lssl", "-lcrypto", "-lm"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        assert cc.returncode == 0, cc.stdout.decode(errors="replace")
        if os.path.exists(mark):
            os.unlink(mark)
        out, err, used = _run_copy(built, d, base, 0)
        assert used == on_path and os.path.exists(mark), err
        assert json.loads(out.splitlines()[-1])["connects"] == 5
        # Nothing anywhere: one clear error naming the three places.
        out, err, used = _run_copy(built, d, dict(base, PATH="/usr/bin:/bin"), 1)
        assert "HERALD_BIN" in err and gone in err and "PATH" in err and used is None, err
        # HERALD_BIN wins over PATH.
        os.unlink(mark)
        out, err, used = _run_copy(built, d, dict(base, HERALD_BIN=real), 0)
        assert used == real and not os.path.exists(mark), err
        # The tree's herald, once there, wins over PATH.
        os.makedirs(os.path.dirname(gone))
        tree_mark = os.path.join(d, "tree-used")
        _wrapper(os.path.dirname(gone), real, tree_mark)
        out, err, used = _run_copy(built, d, base, 0)
        assert used == gone and os.path.exists(tree_mark) and not os.path.exists(mark), err
    finally:
        shutil.rmtree(d, ignore_errors=True)


test_tool_outside_the_tree_finds_herald.timeout = 120


def test_publish_with_token_protected_server():
    """Against a herald with a publish token: refusals counted by status (the
    requests pipelined behind a refusal the server closed on are sent again,
    not counted as network errors), one plain hint about --token, no more in
    flight than requests, and rows as a real number or null with a reason."""
    with Herald(args=["--publish-token", "sekrit"]) as h:
        server = f"127.0.0.1:{h.port}"
        code, out, err, js = run("publish", 50, "--server", server, expect=1)
        assert js["in_flight"] == 50 and "| 50 | 50 | 16 |" in out, out
        assert js["ok"] == 0 and js["http_status"] == {"401": 50} and js["network_errors"] == 0, js
        assert js["rows"] is None and "--db" in js["rows_unknown"], js
        assert "--token" in js["hint"] and "401" in js["hint"], js
        text = "\n".join(l for l in out.splitlines() if not l.startswith("{"))
        assert text.count("--token") == 1 and "| 50 (401: 50) | 0 |" in text, out
        code, out, err, js = run("publish", 50, "--server", server, "--db", h.db, "--token", "wrong", expect=1)
        assert js["http_status"] == {"403": 50} and js["network_errors"] == 0 and js["rows"] == 0, js
        assert "publish_token" in js["hint"], js
        code, out, err, js = run("publish", 50, "--server", server, "--db", h.db, "--token", "sekrit")
        assert js["ok"] == 50 and js["http_errors"] == 0 and js["network_errors"] == 0, js
        assert js["rows"] == 50 and js["in_flight"] == 50 and "hint" not in js, js
        assert "The database holds 50 new rows" in out
    # The caps follow N: 5 requests are never more than 5 in flight.
    code, out, err, js = run("publish", 5)
    assert js["in_flight"] == 5 and js["connections"] == 5 and js["rows"] == 5, js


def test_readers_some_refused():
    """Readers turned away (429 past the per-address cap): the table and the
    JSON say how many opened, time "all N" over those, and show how many did
    not open and why beside it."""
    with Herald(args=["--per-address-limit", "5"]) as h:
        code, out, err, js = run("readers", 12, "--server", f"127.0.0.1:{h.port}", "--db", h.db, "--events", 2,
                                 "--interval", 0.1, "--idle", 0, "--no-floor", expect=1)
    assert js["n"] == 12 and js["opened"] == 5 and js["not_opened"] == 7 and js["event_to_all_n"] == 5, js
    assert js["non200_status"] == {"429": 7} and js["missing_total"] == 0, js
    assert all(e["received"] == 5 and e["missing"] == 0 for e in js["events"]), js["events"]
    header = next(l for l in out.splitlines() if l.startswith("| run |"))
    assert "| opens (12) | not opened |" in header and "event to all 5 |" in header, header
    assert "all 12" not in out, out
    row = next(l for l in out.splitlines() if l.startswith("| 1 | "))
    assert "(5 of 12) | 7 (429: 7) |" in row, row
    assert "| max (all 5) |" in out, out


RATE_COLUMNS = ["rate", "sent", "ok", "deliveries", "deliveries_per_s", "p50_ms", "p99_ms", "max_ms", "lost",
                "order_errors", "catchups", "cpu_us_per_delivery", "server_cpu_pct", "server_runq_wait_pct",
                "server_rss_kb", "client_cpu_pct", "keeps_up"]


def test_rate_small_two_steps_lose_nothing():
    """load/rate with 20 readers and two short rates: every event it sent was
    answered and reached every reader, in order, once; the table, the JSON
    line and the CSV agree, and load/plot draws the rate curve from it."""
    tmp = tempfile.mkdtemp(prefix="herald-rate-")
    try:
        csv_path = os.path.join(tmp, "rate.csv")
        code, out, err, js = run("rate", 20, "--rates", "50,200", "--step", "1", "-k", "4", "--csv", csv_path,
                                 timeout=90)
        assert js["tool"] == "rate" and js["n"] == 20 and js["opened"] == 20, js
        assert js["lost_total"] == 0 and js["readers_short"] == 0 and js["order_errors_total"] == 0, js
        assert js["foreign_frames"] == 0 and js["herald_exit"] == 0, js
        steps = js["steps"]
        assert [s["rate"] for s in steps] == [50, 200], steps
        for s, want in zip(steps, (50, 200)):
            assert s["sent"] == want and s["ok"] == want and s["failed"] == 0, s
            assert s["deliveries"] == 20 * want and s["lost"] == 0 and s["behind"] == 0, s
            assert s["order_errors"] == 0 and s["gaps"] == 0, s
            assert 0 <= s["p50_ms"] <= s["p99_ms"] <= s["max_ms"] < 10000, s
            assert s["server_rss_kb_max"] > 0 and s["cpu_us_per_delivery"] >= 0 and s["catchups"] >= 0, s
        assert js["published"] == 250
        assert "| rate (ev/s) | sent | deliveries/s | p50 | p99 | max | lost |" in out, out
        assert "| 200 | 200 |" in out, out
        with open(csv_path) as f:
            rows = list(csv.DictReader(f))
        assert list(rows[0].keys()) == RATE_COLUMNS, rows[0].keys()
        assert [int(float(r["rate"])) for r in rows] == [50, 200]
        assert all(r["lost"] == "0" and r["order_errors"] == "0" for r in rows), rows
        assert [int(r["deliveries"]) for r in rows] == [1000, 4000], rows
        # The picture of the curve.
        pics = os.path.join(tmp, "pics")
        code, out, err, _ = run("plot", "--rate", csv_path, "--label", "test", pics)
        with open(os.path.join(pics, "rate.png"), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        assert not os.path.exists(os.path.join(pics, "latency.png"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


test_rate_small_two_steps_lose_nothing.timeout = 120


def test_readers_opens_csv_and_plots():
    """load/readers --opens-csv gives every reader's connect and open time
    (open after connect, from the first connect); load/plot draws the
    latency and opens pictures from readers' two CSV files."""
    tmp = tempfile.mkdtemp(prefix="herald-plot-")
    try:
        lat, opens = os.path.join(tmp, "lat.csv"), os.path.join(tmp, "opens.csv")
        code, out, err, js = run("readers", 30, "--events", 3, "--interval", "0.1", "--idle", 0, "--no-floor",
                                 "--csv", lat, "--opens-csv", opens)
        check_readers(js, 30, 3)
        with open(opens) as f:
            rows = list(csv.DictReader(f))
        assert [int(r["reader"]) for r in rows] == list(range(30)), rows
        assert min(float(r["connect_ms"]) for r in rows) == 0
        assert all(0 <= float(r["connect_ms"]) <= float(r["open_ms"]) for r in rows), rows
        code, out, err, _ = run("plot", "--readers", lat, "--opens", opens, tmp)
        for name in ("latency.png", "opens.png"):
            with open(os.path.join(tmp, name), "rb") as f:
                assert f.read(8) == b"\x89PNG\r\n\x1a\n", name
        assert "wrote" in err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_minimal_sse_answers_herald_opening_bytes():
    """load/minimal-sse, the floor for opens, writes exactly what herald
    writes when a stream opens (so the two are compared on the same bytes),
    answers a head that arrives in pieces, and serves many at once."""
    p = subprocess.Popen([tool("minimal-sse")], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = p.stdout.readline().decode()
        m = re.search(r"listening on 127\.0\.0\.1:(\d+) \(backlog (\d+)\)", line)
        assert m, line
        port = int(m.group(1))
        assert int(m.group(2)) == int(os.environ.get("BACKLOG", "1024"))

        def opening(port, pieces):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            for piece in pieces:
                s.sendall(piece)
            got = b""
            while not got.endswith(b": stream open\n\n"):
                chunk = s.recv(4096)
                assert chunk, got
                got += chunk
            return s, got

        req = b"GET /api/events/stream HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"
        held = [opening(port, [req[:20], req[20:41], req[41:]]) for _ in range(50)]
        minimal = held[0][1]
        assert all(g == minimal for _, g in held)
        with Herald() as h:
            s, herald_bytes = opening(h.port, [req])
            s.close()
        assert minimal == herald_bytes, (minimal, herald_bytes)
        for s, _ in held:
            s.close()
    finally:
        p.terminate()
        assert p.wait(timeout=10) == 0


def test_readers_opens_beside_minimal_server():
    """--opens R: the same readers opened against herald and load/minimal-sse,
    alternating, R rounds each; every reader of every round opens."""
    code, out, err, js = run("readers", 30, "--opens", 2, timeout=90)
    assert js["mode"] == "opens" and js["n"] == 30 and js["rounds"] == 2, js
    assert js["not_opened"] == 0 and js["herald_exit"] == 0, js
    assert [(r["server"], r["round"]) for r in js["runs"]] == [
        ("minimal-sse", 1), ("herald", 1), ("herald", 2), ("minimal-sse", 2)], js["runs"]
    assert all(r["opened"] == 30 and r["open_ms"] > 0 and r["server_cpu_ms"] > 0 for r in js["runs"]), js
    assert abs(js["ratio"] - js["herald_open_ms"] / js["minimal_open_ms"]) < 0.01, js
    assert "| readers | herald, median of 2 | minimal server, median | herald / minimal |" in out, out
    assert out.count("| herald | ") == 2 and out.count("| minimal-sse | ") == 2, out


test_readers_opens_beside_minimal_server.timeout = 120


def check_ids(code, js, n):
    """Every reader read every id once, in order: none missed, none twice,
    every reader up to the newest id, and the tool exits 0."""
    assert js["readers_checked"] == n and js["ids_missed"] == 0 and js["ids_duplicated"] == 0, js
    assert js["readers_with_gaps"] == 0 and js["readers_with_duplicates"] == 0, js
    assert code == 0 and js["readers_complete"] == n, js
    assert js["readers_behind"] == 0 and js["min_last_id"] == js["last_id"], js


def test_readers_restart_every_reader_resumes_without_loss():
    """--restart: herald stopped and started again on its port and database
    while events are inserted before, during and after; every reader
    reconnects with Last-Event-ID and reads every id once, in order."""
    code, out, err, js = run("readers", 40, "--restart", "--rate", 100, "--before", 0.5, "--after", 0.5,
                             timeout=90, expect=None)
    check_ids(code, js, 40)
    assert js["mode"] == "restart" and js["opened"] == 40, js
    assert js["streams_ended"] == 40 and js["reopened"] == 40, js
    # Events were published while no herald was serving.
    assert js["first_id"] <= js["term_id"] < js["ready_id"] < js["last_id"], js
    assert js["events_published"] == js["last_id"] - js["first_id"] + 1 and js["events_failed"] == 0, js
    assert js["old_herald_exit"] == 0 and js["herald_exit"] == 0, js
    assert 0 < js["ready_to_reopened_ms"] <= js["ready_to_caught_up_ms"], js
    assert js["reconnects_failed"] == 0 and js["non200_status"] == {}, js
    assert isinstance(js["listen_overflows"], int), js
    assert "| 40 | 100 |" in out and "| 0 | 0 | %d of 40 |" % js["readers_complete"] in out, out


test_readers_restart_every_reader_resumes_without_loss.timeout = 120


def test_readers_restart_catches_a_reconnect_without_last_id():
    """The check can fail: readers that reconnect without Last-Event-ID miss
    what was published while herald was down, and the tool says so."""
    code, out, err, js = run("readers", 20, "--restart", "--rate", 100, "--before", 0.3, "--after", 0.3,
                             "--no-last-id", timeout=90, expect=1)
    assert js["ready_id"] > js["term_id"], js
    assert js["readers_complete"] == 0 and js["readers_with_gaps"] == 20, js
    assert js["ids_missed"] >= 20 * (js["ready_id"] - js["term_id"]), js


test_readers_restart_catches_a_reconnect_without_last_id.timeout = 120


def test_readers_soak_small():
    """--soak: readers, a steady rate, a client connecting and leaving;
    RSS sampled, nothing lost, the churner's connects all completed."""
    code, out, err, js = run("readers", 20, "--soak", 3, "--rate", 50, "--churn", 20, "--sample", 0.5,
                             "--warmup", 1, timeout=90, expect=None)
    check_ids(code, js, 20)
    assert js["mode"] == "soak" and js["opened"] == 20, js
    assert 100 <= js["events_published"] <= 160 and js["events_failed"] == 0, js
    assert js["closed_after_open"] == 0 and js["herald_exit"] == 0, js
    assert js["churn_streams"] >= 10 and js["churn_requests"] >= 10 and js["churn_failed"] == 0, js
    assert len(js["samples"]) >= 6, js["samples"]
    assert all(s[1] > 0 for s in js["samples"]), js["samples"]
    assert js["rss_first_kb"] > 0 and js["rss_last_kb"] > 0 and js["rss_slope_kib_per_min"] is not None, js
    assert "slope after warm-up" in out and "| 20 | 50 |" in out, out


test_readers_soak_small.timeout = 120


def test_readers_mode_usage_errors():
    for args in (["10", "--opens", "2", "--server", "127.0.0.1:1"], ["10", "--restart", "--tls"],
                 ["10", "--opens", "2", "--restart"], ["10", "--rate", "5"], ["10", "--soak", "2", "--after", "1"],
                 ["10", "--restart", "--churn", "5"], ["10", "--no-last-id"], ["10", "--soak", "0"],
                 ["10", "--mercure"], ["10", "--server", "127.0.0.1:1", "--db", "x.db", "--mercure"]):
        code, out, err, _ = run("readers", *args, expect=2)
        assert "usage: load/readers" in err, (args, err)
    code, out, err, _ = run("minimal-sse", "--listen", "unix:/tmp/x", expect=2)
    assert "usage: load/minimal-sse" in err


def test_tls_handshakes_counts_resumed_sessions():
    """load/tls-handshakes small: every open of every phase succeeds; the
    phases that offer tickets resume every one (counted by the client), the
    others none; herald's CPU is read for each; the table and the JSON line
    agree. Bad arguments are usage errors."""
    code, out, err, js = run("tls-handshakes", 20, "--storm", 20, timeout=120)
    assert js["tool"] == "tls-handshakes" and js["n"] == 20 and js["storm"] == 20, js
    assert js["protocol"] == "TLSv1.3", js
    phases = {p["phase"]: p for p in js["phases"]}
    assert list(phases) == ["plain", "full", "resumed", "storm: open", "storm: reconnect with tickets",
                            "storm: reconnect without"], list(phases)
    for name, p in phases.items():
        assert p["opened"] == p["n"] == 20 and p["failed"] == 0, p
        assert set(p["failures"]) == {"connect", "tls", "http", "timeout"}, p
        assert p["server_cpu_ms"] is not None and p["server_cpu_ms"] >= 0, p
        assert 0 < p["p50_ms"] <= p["p99_ms"], p
        assert f"| {name} | 20 | {p['resumed']} | 0 |" in out, (name, out)
    want_resumed = {"plain": 0, "full": 0, "resumed": 20, "storm: open": 0, "storm: reconnect with tickets": 20,
                    "storm: reconnect without": 0}
    assert {k: p["resumed"] for k, p in phases.items()} == want_resumed, phases
    assert not phases["plain"]["tls"] and phases["storm: reconnect with tickets"]["at_once"], phases
    assert phases["storm: reconnect with tickets"]["dropped_first"], phases
    assert "20 of 20 offered tickets resumed" in out, out
    # The TLS 1.2 path resumes too (tickets under herald's own keys).
    code, out, err, js = run("tls-handshakes", 5, "--storm", 0, "--tls12", "--phases", "full,resumed", timeout=60)
    assert js["protocol"] == "TLSv1.2" and [p["phase"] for p in js["phases"]] == ["full", "resumed"], js
    assert [p["resumed"] for p in js["phases"]] == [0, 5], js
    for args in ([], ["0"], ["5", "--phases", "fast"], ["5", "--tls-cert", "x"], ["5", "--plain", "127.0.0.1:1"],
                 ["5", "--insecure", "--cacert", "x"], ["5", "--server", "unix:/tmp/x"]):
        code, out, err, _ = run("tls-handshakes", *args, expect=2)
        assert "usage: load/tls-handshakes" in err, (args, err)


test_tls_handshakes_counts_resumed_sessions.timeout = 180


SANITIZER_WARNING = re.compile(r"^warning: herald \S+ is built with AddressSanitizer: ")


def _fake_herald(folder, sanitized):
    """A `herald` in folder that runs the real one; with sanitized, its
    bytes hold the symbol a sanitized build has (what the tools look for)."""
    real = os.path.abspath(os.environ.get("HERALD_BIN", "build/herald"))
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "herald")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + ("# __asan_init\n" if sanitized else "") + f"exec '{real}' \"$@\"\n")
    os.chmod(path, 0o755)
    return path


def _bytes_sanitized(path):
    with open(path, "rb") as f:
        return b"__asan_init" in f.read()


def test_every_tool_says_first_when_its_herald_is_sanitized():
    """A tool that starts or measures a herald built with a sanitizer says so
    on the first line of its output (its figures would be the sanitizer's);
    with a release herald it says nothing of the kind."""
    d = tempfile.mkdtemp(prefix="herald-test-")
    try:
        asan = _fake_herald(os.path.join(d, "asan"), True)
        release = _fake_herald(os.path.join(d, "release"), False)
        runs = [
            ("readers", [5, "--events", 1, "--interval", 0.1, "--idle", 0, "--no-floor"], 40),
            ("open-only", [3, "--close"], 40),
            ("publish", [20, "-c", 4, "-k", 2], 40),
            ("rate", [5, "--rates", 20, "--step", 0.5, "-k", 1], 60),
            ("topics", [10, "--scenario", "one", "--events", 10, "--batch", 5, "--pool", 16], 60),
            ("tls-handshakes", [3, "--storm", 0, "--phases", "full"], 60),
            ("backlog-experiment", ["--readers", 5, "--opens", 3, "--backlogs", "1024", "--events", 1,
                                    "--interval", 0.1, "--idle", 0, "--no-floor"], 90),
            ("bench-tokens", [3], 90),
            ("bench-redis", ["--readers", 3, "--events", 1, "--publish", 10, "--held", 3, "--tails", 0], 120),
            ("bench-mercure", ["--setups", "one", "--readers", 3, "--events", 1, "--publish", 10, "--rounds", 1], 90),
            ("bench-workers", ["--latency", 3, "--hold", 3, "--held", 3, "--publish", 10, "--events", 2], 120),
            ("bench-catchup", ["--rows", 100, "--streams", "1", "--repeat", 1], 120),
            ("bench-adversary", ["--readers", 5, "--seconds", 0.5, "--rows", 100, "--attacks", "ping-flood"], 120),
        ]
        def one(item):
            name, args, timeout, herald = item
            # bench-adversary's status is its verdict on the herald measured
            # (a sanitized one holds freed memory in quarantine): 0 or 1.
            expect = None if name == "bench-adversary" else 0
            code, out, err, _ = run(name, *args, timeout=timeout, expect=expect, env={"HERALD_BIN": herald})
            assert code in (0, 1), (name, code, err[-2000:])
            if herald == asan:
                first = out.splitlines()[0] if out else ""
                assert SANITIZER_WARNING.match(first) and asan in first, (name, first, out[:2000], err[-2000:])
            else:
                assert "Sanitizer" not in out, (name, out[:2000])

        side_by_side(one, [(name, args, timeout, herald) for name, args, timeout in runs for herald in (asan, release)])
        # A running herald named by --pid: the binary of that process.
        with Herald(args=["--per-address-limit", "0"]) as h:
            code, out, err, _ = run("readers", 5, "--server", f"127.0.0.1:{h.port}", "--pid", h.pid,
                                    "--db", h.db, "--events", 1, "--interval", 0.1, "--idle", 0, "--no-floor")
            said = bool(re.match(r"warning: herald \S+ is built with \S*Sanitizer", out))
            assert said == _bytes_sanitized(f"/proc/{h.pid}/exe") or said == _bytes_sanitized(h.cmd[0]), out[:500]
    finally:
        shutil.rmtree(d, ignore_errors=True)


test_every_tool_says_first_when_its_herald_is_sanitized.timeout = 900
# Tiny runs whose figures it does not read: it may run beside other tests.
test_every_tool_says_first_when_its_herald_is_sanitized.alone = False


def test_tools_prefer_the_tree_release_herald_to_a_sanitized_one():
    """Built by the sanitized build (`make test`), a tool still starts the
    tree's release herald when one exists; only without it does it start the
    sanitized one, saying so. The scripts find herald the same way."""
    d = tempfile.mkdtemp(prefix="herald-test-")
    try:
        tree = os.path.join(d, "tree")
        asan = _fake_herald(os.path.join(tree, "build", "asan"), True)
        release = _fake_herald(os.path.join(tree, "build"), False)
        built = os.path.join(d, "open-only")
        srcs = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "load", "tool*.c")))
        cc = subprocess.run(["cc", "-std=gnu11", "-D_GNU_SOURCE", "-Isrc", f'-DHERALD_TREE_BIN="{asan}"',
                             f'-DHERALD_RELEASE_BIN="{release}"', "-o", built, "load/open-only.c"] + srcs +
                            ["src/common/util.c", "src/common/procstat.c", "src/common/sockdiag.c", "-lssl", "-lcrypto", "-lm"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        assert cc.returncode == 0, cc.stdout.decode(errors="replace")
        env = {k: v for k, v in os.environ.items() if k != "HERALD_BIN"}
        out, err, used = _run_copy(built, d, env, 0)
        assert used == release and "Sanitizer" not in out, (used, out, err)
        os.unlink(release)
        out, err, used = _run_copy(built, d, env, 0)
        assert used == asan and SANITIZER_WARNING.match(out), (used, out, err)
        # The scripts: load/tool_herald.py, as the Python tools and load/bench use it, in a tree.
        os.makedirs(os.path.join(tree, "load"))
        shutil.copy(os.path.join(ROOT, "load", "tool_herald.py"), os.path.join(tree, "load"))
        _fake_herald(os.path.join(tree, "build"), False)

        def which():
            p = subprocess.run(["python3", os.path.join(tree, "load", "tool_herald.py")], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
            assert p.returncode == 0, p.stderr
            return p.stdout.splitlines()

        assert which() == [release], which()
        os.unlink(release)
        lines = which()
        assert lines[0] == asan and SANITIZER_WARNING.match(lines[1]), lines
    finally:
        shutil.rmtree(d, ignore_errors=True)


test_tools_prefer_the_tree_release_herald_to_a_sanitized_one.timeout = 180


_runs_given = set()
_runs_lock = threading.Lock()


def _free_run(count):
    """A port P with P .. P+count-1 all unbound now, outside the ephemeral range,
    and none given to another caller in this process (runs side by side)."""
    with _runs_lock:
        for _ in range(100):
            p = harness.spare_ports(1)[0]
            run_ = range(p, p + count)
            if p + count <= 65536 and not _runs_given.intersection(run_) and \
                    not any(harness._port_is_bound(q) for q in range(p + 1, p + count)):
                _runs_given.update(run_)
                return p
    raise AssertionError(f"no {count} free ports in a row")


def side_by_side(check, items, width=4):
    """check(item) for every item, `width` at a time: tiny tool runs that read
    no figure wait mostly on their herald's start and stop, not on the CPU.
    The first failure is raised, naming its item."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=width) as pool:
        futures = [(item, pool.submit(check, item)) for item in items]
        for item, f in futures:
            try:
                f.result()
            except AssertionError as e:
                raise AssertionError(f"{item[0]}: {e}") from e


def test_every_tool_that_starts_herald_takes_a_port():
    """--port P: the herald a tool starts listens on 127.0.0.1:P (so it can
    be watched while the tool runs), for every tool that starts one; a
    taken port is herald's failure to start, said as such; --port with
    --server is a usage error."""
    small = {
        "readers": [5, "--events", 1, "--interval", 0.1, "--idle", 0, "--no-floor"],
        "open-only": [3, "--close"],
        "publish": [20, "-c", 4, "-k", 2],
        "rate": [5, "--rates", 20, "--step", 0.5, "-k", 1],
        "topics": [10, "--scenario", "one", "--events", 10, "--batch", 5, "--pool", 16],
        "tls-handshakes": [3, "--storm", 0, "--phases", "full"],
        "backlog-experiment": ["--readers", 5, "--opens", 3, "--backlogs", "1024", "--events", 1, "--interval", 0.1,
                               "--idle", 0, "--no-floor"],
    }
    def one(item):
        name, args = item
        port = _free_run(1)
        code, out, err, js = run(name, *args, "--port", port, timeout=90)
        assert re.search(rf"started herald \S+ \(pid \d+\).* (on |plain on )?127\.0\.0\.1:{port}\b", err), \
            (name, port, err[-3000:])

    def bench(item):
        name, args = item
        port = _free_run(4)
        code, out, err, js = run(name, *args, "--port", port, timeout=150)
        want = [port + i for i in range(4)] if name == "bench-redis" else [port]
        assert js["ports"] == want, (name, port, js.get("ports"))

    side_by_side(one, list(small.items()))
    side_by_side(bench, [("bench-tokens", [3]),
                         ("bench-workers", ["--latency", 3, "--hold", 3, "--held", 3, "--publish", 10, "--events", 2]),
                         ("bench-redis", ["--readers", 3, "--events", 1, "--publish", 10, "--held", 3, "--tails", 0]),
                         ("bench-mercure", ["--setups", "one", "--readers", 3, "--events", 1, "--publish", 10,
                                            "--rounds", 1]),
                         ("bench-adversary", ["--readers", 5, "--seconds", 0.5, "--rows", 100, "--attacks",
                                              "slowloris"])])
    # A port another socket holds: herald cannot start there, and says why.
    held = socket.socket()
    try:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        for name in ("rate", "topics"):
            code, out, err, js = run(name, *small[name], "--port", port, expect=1)
            assert "Address already in use" in err, (name, err[-2000:])
    finally:
        held.close()
    for name, args in (("readers", [5, "--server", "127.0.0.1:1", "--db", "x"]), ("open-only", [3, "--server",
                       "127.0.0.1:1"]), ("publish", [3, "--server", "127.0.0.1:1"]),
                       ("tls-handshakes", [3, "--server", "127.0.0.1:1"]), ("rate", [5, "--port", "65536"]),
                       ("bench", ["--port", "x"]), ("bench-redis", ["--port", "65535"]),
                       ("bench-mercure", ["--port", "65534"])):
        code, out, err, _ = run(name, *args, *(["--port", 8199] if "--server" in args else []), expect=2)
        assert "usage: load/" + name in err, (name, err)


test_every_tool_that_starts_herald_takes_a_port.timeout = 900
test_every_tool_that_starts_herald_takes_a_port.alone = False  # tiny runs, figures unread


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_bench_adversary_small():
    """load/bench-adversary at a small scale: herald and the readers are
    started and stopped, each attack asked for runs from its own address
    with the readers and the health prober beside it, and the table and the
    JSON line carry every figure; its verdicts follow from the figures and
    the exit status from the verdicts (0 or 1, never 2 or a hang). Not
    herald's timings: those are the tool's to report."""
    code, out, err, js = run("bench-adversary", "--readers", 50, "--seconds", 1, "--attacks", "ping-flood,slowloris",
                             timeout=150, expect=None)
    assert code in (0, 1), (code, out[-3000:], err[-3000:])
    assert js["tool"] == "bench-adversary" and js["readers_opened"] == 50 and js["herald_exit"] == 0, js
    assert [r["attack"] for r in js["attacks"]] == ["none", "ping-flood", "slowloris"], js
    for r in js["attacks"]:
        assert r["error"] is None, r
        # The prober and the readers ran all along; herald answered /metrics.
        assert r["health_requests"] > 0 and r["health_worst_ms"] > 0, r
        assert r["readers_events"] > 0 and r["readers_worst_ms"] > 0, r
        assert isinstance(r["passes_over"], int) and r["passes_over"] >= 0, r
        assert r["rss_before_kb"] > 0 and r["rss_peak_kb"] >= r["rss_before_kb"], r
        assert r["herald_cpu_ms"] > 0, r
        if r["attack"] == "none":
            assert r["opened"] == 0 and r["verdict"] == "-", r
            continue
        assert r["rss_per_conn_kib"] >= 0 and r["allowance_kib"] > 0, r
        # The verdict is "ok" exactly when no reason was found. A few passes
        # over the bound are the machine's own (the tool allows twice the
        # rate of the run with no attack, plus three), so passes over are a
        # reason only past that; memory over its allowance always is; no
        # pass over with memory within its allowance is always "ok".
        assert r["verdict"] in ("ok", "FAIL") and (r["verdict"] == "ok") == (not r["why"]), r
        if r["rss_per_conn_kib"] > r["allowance_kib"]:
            assert r["verdict"] == "FAIL" and any(w.startswith("RSS ") for w in r["why"]), r
        if r["passes_over"] == 0 and r["rss_per_conn_kib"] <= r["allowance_kib"]:
            assert r["verdict"] == "ok", r
        if r["passes_over"]:
            assert r["worst_pass_ms"] or r["pass_bound_ms"], r
    flood, slow = js["attacks"][1], js["attacks"][2]
    # herald ends a PING flood with GOAWAY ENHANCE_YOUR_CALM, and the tool
    # comes back with a new connection each time.
    assert flood["outcomes"].get("GOAWAY 0xb", 0) >= 2 and flood["held_peak"] == 1, flood
    assert flood["extra"]["pings_written"] > 250, flood
    # 200 connections held at once, each a few bytes into its head.
    assert slow["held_peak"] == 200 and slow["connections"] == 200 and slow["extra"]["bytes_each"] >= 1, slow
    assert (code == 0) == all(r["verdict"] == "ok" for r in js["attacks"][1:]) == js["ok"], js
    lines = out.splitlines()
    assert "| attack | health worst (ms) | readers' worst delay (ms) | passes > 10 ms | worst pass (ms), what ran | " \
           "RSS KiB per connection (allowed) | verdict |" in lines, out
    assert any(ln.startswith("| none (readers and events only) |") for ln in lines), out
    for name in ("ping-flood", "slowloris"):
        row = [ln for ln in lines if ln.startswith(f"| {name} |")]
        assert len(row) == 2 and re.search(r"\| (ok|FAIL: [^|]+) \|$", row[0]), (name, row)
    # Nothing it started is left: herald, by the pid it named, and its folder.
    m = re.search(r"herald \S+ \(pid (\d+)\) on 127\.0\.0\.1:\d+, .* folder (\S+)", err)
    assert m, err
    assert not _alive(int(m.group(1))) and not os.path.exists(m.group(2)), err


test_bench_adversary_small.timeout = 200


def test_bench_check_compares_with_its_baseline():
    """load/bench-check writes a baseline (--update) with its commit and date,
    and against one says which figures moved by more than 20%: worse ones
    fail the run, better ones are pointed out; --measured judges a run's
    written figures without measuring again."""
    d = tempfile.mkdtemp(prefix="herald-test-")
    try:
        base = os.path.join(d, "baseline.json")
        mine = os.path.join(d, "measured.json")
        small = ["--readers", 20, "--step", 1, "--runs", 1]
        code, out, err, _ = run("bench-check", *small, "--baseline", mine, "--update", timeout=240)
        with open(mine) as f:
            doc = json.load(f)
        # CPU per event of h2c streams over HTTP/1.1 readers is left out when
        # the HTTP/1.1 run spent no CPU tick (20 readers may not).
        assert set(doc["figures"]) - {"cpu_per_event_h2c_ratio"} == {
            "rss_per_reader_b", "rss_per_tls_reader_b", "event_floor_ratio", "open_floor_ratio",
            "cpu_per_delivery_floor_pct", "cpu_per_delivery_us", "tls_over_plain_cpu_per_delivery",
            "cpu_per_tls_delivery_us"}, doc
        assert doc["readers"] == 20 and re.match(r"^[0-9a-f]{7,}", doc["commit"]) and doc["date"], doc
        assert doc["figures"]["event_floor_ratio"] > 0 and doc["figures"]["open_floor_ratio"] > 0, doc
        judged = {"rss_per_reader_b", "rss_per_tls_reader_b", "event_floor_ratio", "open_floor_ratio",
                  "cpu_per_delivery_floor_pct", "tls_over_plain_cpu_per_delivery", "cpu_per_event_h2c_ratio"}
        # Every figure far above this run's: nothing got worse. (Memory over
        # 20 readers is a page or two, or none: the figure may be 0 in one
        # run and several KiB in the next, so far above means far above
        # any run's, not ten times this one's.)
        high = dict(doc, figures={k: v * 10 + 1e7 for k, v in doc["figures"].items()})
        with open(base, "w") as f:
            json.dump(high, f)
        code, out, err, js = run("bench-check", "--measured", mine, "--baseline", base, timeout=30)
        # Each judged figure of the run counts as better; CPU per delivery in
        # microseconds is shown only (the machine moves it), and counts
        # neither way.
        assert js["worse"] == 0 and js["better"] == len(judged & set(doc["figures"])), out
        assert "No figure got worse" in out and doc["commit"] in out, out
        assert not js["figures"]["cpu_per_delivery_us"]["judged"] and "not judged" in out, out
        # Every figure far below: each one is worse, and the run fails.
        low = dict(doc, figures={k: v / 100 for k, v in doc["figures"].items() if v > 0})
        with open(base, "w") as f:
            json.dump(low, f)
        code, out, err, js = run("bench-check", "--measured", mine, "--baseline", base, timeout=30, expect=1)
        assert js["worse"] == len(judged & set(low["figures"])) and "worse by more than 20%" in out, out
        assert all(js["figures"][k]["change"] > 0.2 for k in ("event_floor_ratio", "open_floor_ratio")), out
        # A run measured now and judged at once, against the high baseline:
        # five or six figures judged (the h2c ratio when both runs spent
        # CPU), none worse.
        with open(base, "w") as f:
            json.dump(high, f)
        code, out, err, js = run("bench-check", *small, "--baseline", base, timeout=240)
        assert js["worse"] == 0 and js["better"] in (6, 7) and "No figure got worse" in out, out
        # A baseline of another size is not compared; nor is a measured run;
        # --measured and --update together, or a file that is not a run, are
        # usage errors.
        with open(base, "w") as f:
            json.dump(dict(doc, readers=1000), f)
        code, out, err, js = run("bench-check", *small, "--baseline", base, timeout=60, expect=2)
        assert "not comparable" in err, err
        code, out, err, js = run("bench-check", "--measured", mine, "--baseline", base, timeout=30, expect=2)
        assert "not comparable" in err, err
        code, out, err, js = run("bench-check", "--measured", mine, "--update", timeout=30, expect=2)
        assert "not both" in err, err
        code, out, err, js = run("bench-check", "--measured", os.path.join(d, "none.json"), timeout=30, expect=2)
        assert "cannot read the measured figures" in err, err
    finally:
        shutil.rmtree(d, ignore_errors=True)


test_bench_check_compares_with_its_baseline.timeout = 900
