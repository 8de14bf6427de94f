# SPDX-License-Identifier: BSD-2-Clause
"""/metrics: Prometheus text with counters that follow what happened and
well-formed latency histograms."""
import re
import time

from harness import Herald, Stream, publish, request


def _metrics(port):
    st, hdrs, body = request(port, "GET", "/metrics")
    assert st == 200 and hdrs["content-type"].startswith("text/plain"), (st, hdrs)
    return body.decode()


def _value(text, name):
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert m, f"{name} missing from /metrics"
    return float(m.group(1))


def _histogram(text, name):
    buckets = [(le, int(v)) for le, v in re.findall(rf'^{name}_bucket{{le="([^"]+)"}} (\d+)$', text, re.M)]
    assert buckets and buckets[-1][0] == "+Inf", f"{name}: no buckets ending in +Inf"
    counts = [v for _, v in buckets]
    assert counts == sorted(counts), f"{name}: buckets not cumulative: {buckets}"
    count = _value(text, f"{name}_count")
    assert counts[-1] == count, (name, counts[-1], count)
    assert _value(text, f"{name}_sum") >= 0
    return count


def test_counters_and_histograms_follow_the_work():
    with Herald() as h:
        before = _metrics(h.port)
        assert _histogram(before, "herald_publish_seconds") == 0
        s = Stream(h.port)
        for i in range(3):
            publish(h.port, data=f"m{i}")
        assert [e["data"] for e in s.events(3)] == ["m0", "m1", "m2"]
        after = _metrics(h.port)
        assert _value(after, "herald_readers") == 1
        assert _value(after, "herald_events_published_total") == 3
        assert _value(after, "herald_frames_queued_total") == 3
        assert _histogram(after, "herald_publish_seconds") == 3
        assert 1 <= _histogram(after, "herald_store_commit_seconds") <= 3
        assert 1 <= _histogram(after, "herald_fanout_seconds") <= 3
        assert _histogram(after, "herald_flush_seconds") >= 3
        assert _value(after, "process_resident_memory_bytes") > 0
        s.close()


def test_wal_is_checkpointed_at_a_pause_not_per_commit():
    # herald's connection never checkpoints inside a commit; once publishes
    # pause, the WAL is copied into the database from a timer.
    with Herald() as h:
        for i in range(5):
            publish(h.port, data=f"c{i}")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if _histogram(_metrics(h.port), "herald_checkpoint_seconds") >= 1:
                break
            time.sleep(0.05)
        text = _metrics(h.port)
        assert _histogram(text, "herald_checkpoint_seconds") == 1, "one checkpoint after the pause"
        assert _histogram(text, "herald_store_commit_seconds") == 5
