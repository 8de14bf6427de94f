# SPDX-License-Identifier: BSD-2-Clause
"""The loop-stall guard: every pass of herald's loop is timed into
herald_loop_pass_seconds, /api/health shows the worst pass of the last minute
and what ran longest in it, and a pass over loop_stall_warn is logged with that
label (rate-limited, a larger stall never hidden by a smaller one).

A stall is made without changing herald: while a client keeps herald busy,
the test stops the process (SIGSTOP) for a while and lets it go on
(SIGCONT). A stop that lands inside a pass lengthens that pass by the stop;
one that lands in epoll_wait does not, so the test tries again until a pass
was caught (herald is inside a pass most of the time under this load, so a
few tries suffice; every try is bounded).

Also here: the core's own work that the guard found holding the loop with
large events, retention's pruning steps, now sized by their time."""
import json
import re
import signal
import threading
import time

from harness import Herald, request, sqlite, wait_until


def _health(h):
    st, _, body = request(h.port, "GET", "/api/health")
    assert st == 200, (st, body)
    return json.loads(body)


def _metric(h, name):
    st, _, body = request(h.port, "GET", "/metrics")
    assert st == 200
    m = re.search(rf"^{re.escape(name)} (\S+)$", body.decode(), re.M)
    assert m, f"{name} missing from /metrics"
    return float(m.group(1))


class Busy:
    """A client asking for /api/health in a loop, on new connections, until stopped."""

    def __init__(self, port):
        self.port = port
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.is_set():
            try:
                request(self.port, "GET", "/api/health", timeout=5)
            except OSError:
                pass

    def close(self):
        self.stop.set()
        self.t.join(10)


def _stall_until(h, ms, done, timeout=20):
    """Stop herald for ms at a time while a client keeps it busy, until
    done() is true (a stop that lands inside a pass lengthens it; one that
    lands in epoll_wait does not, so it takes a few tries)."""
    busy = Busy(h.port)
    try:
        deadline = time.monotonic() + timeout
        while True:
            time.sleep(0.05)  # let the client's requests flow again
            h.signal(signal.SIGSTOP)
            time.sleep(ms / 1000)
            h.signal(signal.SIGCONT)
            v = done()
            if v:
                return v
            assert time.monotonic() < deadline, f"no stall of {ms} ms caught in {timeout} s:\n{h.log()}"
    finally:
        busy.close()


WARNING = (r"warning: the event loop was held ([\d.]+) ms in one pass "
           r"\(loop_stall_warn (\d+) ms\): longest ([\d.]+) ms in (.+?), (\d+) callbacks")


def _stall(h, ms, since):
    """A stall of ms, until its warning line appears in the log after offset since; returns the match."""
    def warned():
        time.sleep(0.2)  # the line is written at the pass's end, after SIGCONT
        return re.search(WARNING, h.log()[since:])
    return _stall_until(h, ms, warned)


def test_a_stalled_pass_is_counted_shown_in_health_and_logged_with_what_ran():
    with Herald(args=["--loop-stall-warn", "100ms"]) as h:
        assert _metric(h, "herald_loop_pass_seconds_count") > 0
        assert _metric(h, "herald_loop_stalls_total") == 0
        m = _stall(h, 400, 0)
        held, limit, longest, what = float(m.group(1)), int(m.group(2)), float(m.group(3)), m.group(4)
        assert limit == 100
        assert held >= 350 and longest <= held, m.group(0)
        # What ran: a request of the busy client, its reading, or the
        # connections' writes; each names itself, and a request its peer.
        assert re.fullmatch(r"GET /api/health from 127\.0\.0\.1|reading a request from 127\.0\.0\.1|"
                            r"accepting connections|writing to connections.*", what), what
        health = _health(h)
        assert health["loop_worst_ms"] >= 350, health
        assert health["loop_worst"] == what, health
        assert _metric(h, "herald_loop_stalls_total") >= 1
        # The histogram has the pass in its top buckets.
        st, _, body = request(h.port, "GET", "/metrics")
        text = body.decode()
        count = float(re.search(r'^herald_loop_pass_seconds_bucket\{le="\+Inf"\} (\d+)$', text, re.M).group(1))
        under = float(re.search(r'^herald_loop_pass_seconds_bucket\{le="0.25"\} (\d+)$', text, re.M).group(1))
        assert count - under >= 1, text


def test_warnings_are_rate_limited_but_a_larger_stall_is_not_hidden():
    with Herald(args=["--loop-stall-warn", "100ms"]) as h:
        first = _stall(h, 300, 0)
        lines = lambda: re.findall(r"the event loop was held", h.log())
        assert len(lines()) == 1
        # Within the window, stalls no worse than twice the one written
        # are counted, not written...
        since = h.log_size()
        stalls = _metric(h, "herald_loop_stalls_total")
        _stall_until(h, 200, lambda: _metric(h, "herald_loop_stalls_total") > stalls)
        assert _metric(h, "herald_loop_stalls_total") > stalls, "no second stall caught"
        assert "the event loop was held" not in h.log()[since:], h.log()[since:]
        # ...but one more than twice as long is written at once, and says
        # how many went unwritten before it.
        big = _stall(h, float(first.group(1)) * 2 + 400, since)
        assert float(big.group(1)) > 2 * float(first.group(1)), big.group(0)
        line = h.log()[since:].splitlines()
        line = [l for l in line if "the event loop was held" in l][0]
        assert re.search(r"; \d+ more over loop_stall_warn since the last line, the worst [\d.]+ ms", line), line


def test_loop_stall_warn_zero_logs_nothing_and_health_still_shows_the_worst():
    with Herald(args=["--loop-stall-warn", "0"]) as h:
        _stall_until(h, 300, lambda: _health(h)["loop_worst_ms"] >= 250)
        assert "the event loop was held" not in h.log()
        assert _metric(h, "herald_loop_stalls_total") == 0


def test_loop_stall_warn_is_validated():
    with Herald(args=["--loop-stall-warn", "5 parsecs"], wait=False) as h:
        h.proc.wait(15)
        assert h.proc.returncode != 0
        assert "loop_stall_warn" in h.log(), h.log()


def test_pruning_steps_follow_their_time_with_large_events():
    # Retention removes the oldest rows in steps. A step of a fixed 1,000
    # rows took hundreds of ms when each row is large (the removed pages
    # are zeroed and written to the WAL); steps now start small and halve
    # while they take over 2 ms, so rows of 60 KB are removed a few at a
    # time. The debug line of each step says how many and what the next
    # step may take.
    with Herald(args=["--retention-count", "10", "--log-level", "debug"]) as h:
        sqlite(h.db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) "
                     "INSERT INTO events(type, topic, data, public) "
                     "SELECT 'message', 'news', printf('%.60000c', 'x'), 1 FROM n")
        wait_until(lambda: int(sqlite(h.db, "SELECT count(*) FROM events")) <= 10, timeout=60,
                   what="retention to remove the backlog")
        steps = [(int(a), int(b)) for a, b in
                 re.findall(r"retention removed (\d+) events in [\d.]+ ms; .*; next step (\d+) rows", h.log())]
        assert steps, h.log()
        assert max(n for n, _ in steps) <= 64, steps
        assert min(nxt for _, nxt in steps) < 64, steps  # halved: rows this large take longer than the target
        assert sum(n for n, _ in steps) >= 290, steps
