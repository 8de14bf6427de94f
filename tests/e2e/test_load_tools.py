"""End-to-end: the measurement tools in load/ against a real herald, with
small N. Each tool's JSON line is checked (counts match, every event reached
every reader), open-only's counter deltas are compared with /proc/net/netstat
read here, the overflow report must find herald's own listening socket with
its configured backlog, and bad arguments must give a usage error (exit 2)."""
import csv
import json
import os
import socket
import subprocess

from harness import Herald

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = ["readers", "open-only", "overflow-report", "publish", "fanout-floor", "backlog-experiment"]


def tool(name):
    path = os.path.join(ROOT, "load", name)
    assert os.access(path, os.X_OK), f"{path} is not built (make; LOAD_TOOLS in the Makefile lists it?)"
    return path


def run(name, *args, timeout=40, expect=0):
    """Run load/NAME with args; return (exit code, stdout, stderr, last JSON line or None)."""
    env = dict(os.environ)
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
    assert js["floor_ms"] is not None and js["floor_ms"] > 0 and js["floor_ratio"] > 0
    assert js["herald_exit"] == 0
    # The markdown table with the agreed columns, then the per-event table.
    assert "| run | listen backlog | opens (40) | threads, all open | event to all 40 | CPU while events flow " \
           "| CPU idle | RSS per reader |" in out, out
    assert "| small | 128 |" in out
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
        with open(path) as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == 30 * 2
        assert {r["event"] for r in rows} == {"1", "2"}
        assert all(r["latency_ms"] != "" and float(r["latency_ms"]) >= 0 for r in rows)
        assert sorted({int(r["id"]) for r in rows}) == [e["id"] for e in js["events"]]


def test_readers_counts_errors_by_kind():
    # Nothing listens on a port we just closed: every open is refused.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    code, out, err, js = run("readers", 5, "--server", f"127.0.0.1:{port}", "--publish",
                             f"http://127.0.0.1:{port}/api/events", "--no-floor", expect=1)
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
    # A port nobody listens on is said plainly, exit 1.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    code, out, err, js = run("overflow-report", "--port", port, "--json", expect=1)
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


def test_fanout_floor():
    code, out, err, js = run("fanout-floor", 50, "--rounds", 3)
    assert js["n"] == 50 and js["rounds"] == 3 and js["transport"] == "tcp"
    assert js["loop_ms"] > 0 and js["cpu_ms"] >= 0 and js["last_reader_ms"] > 0
    assert js["last_reader_min_ms"] <= js["last_reader_ms"] <= js["last_reader_max_ms"]
    code, out, err, js = run("fanout-floor", 20, "--rounds", 2, "--unix", "--json")
    assert js["transport"] == "unix" and js["last_reader_ms"] > 0


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
                    ["2000000"]],
        "open-only": [[], ["x"], ["5", "--timeout", "0"], ["5", "--server", "1.2.3"]],
        "overflow-report": [["--port", "0"], ["--watch", "x"], ["--count", "2"], ["extra"]],
        "publish": [[], ["10", "-c", "0"], ["10", "-c", "2", "-k", "4"], ["10", "--db", "x.db"]],
        "fanout-floor": [[], ["0"], ["10", "--rounds", "0"], ["10", "--nope"]],
        "backlog-experiment": [["--backlogs", "x"], ["--readers", "0"], ["surplus"]],
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
