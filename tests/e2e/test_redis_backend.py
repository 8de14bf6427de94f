# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: the stream, resume, retention and backpressure tests again,
with the event log in Redis Streams instead of SQLite.

Each test below is the SQLite test of the same name run unchanged, with a
redis-server of its own (harness.RedisServer: a spare loopback port, AOF on)
made the log of every Herald it starts (harness.use_redis): POST publishes,
h.insert() becomes redis-cli FCALL herald_publish, h.stored_events() reads
the stream with XRANGE, and Herald(db=...) shares a stream name as it shares
a database. SQLite-only behaviour (file modes, WAL, inotify, the idle check)
stays in its own files. `tests/run.py redis_backend` runs these alone."""
import test_backpressure
import test_resume
import test_stream
from harness import RedisServer, use_redis

CHOSEN = {
    test_stream: [
        "test_event_frame_format",
        "test_default_type_is_message",
        "test_fanout_100_readers_post_and_cli_insert",
        "test_cli_insert_alone_is_noticed_promptly",
        "test_topic_filter",
        "test_topic_filter_percent_encoded",
        "test_order_with_concurrent_publishers_and_cli_writers",
        "test_carriage_returns_in_data_cannot_inject_fields",
        "test_large_event_intact",
        "test_keepalive_requests_on_one_connection",
        "test_health_and_metrics",
    ],
    test_resume: [
        "test_resume_after_restart_gets_exactly_the_missed_events",
        "test_resume_header_and_query_from_the_middle",
        "test_resume_with_topic_filter",
        "test_no_resume_point_gets_only_live_events",
        "test_too_old_resume_point_gets_reset",
        "test_resume_point_beyond_newest_gets_reset",
        "test_reconnects_during_live_flow_lose_nothing",
        "test_stream_rotation_and_resume",
        "test_resume_from_newest_id_is_not_a_reset",
    ],
    test_backpressure: [
        "test_stalled_reader_is_bounded_and_loses_nothing",
        "test_stalled_reader_closed_after_stall_timeout_then_resumes",
        "test_reader_crossing_between_live_and_catchup_loses_nothing",
    ],
}


def _on_redis(fn):
    """fn run with a fresh Redis holding every Herald's log."""
    def run():
        with RedisServer() as r:
            use_redis(r)
            try:
                fn()
            finally:
                use_redis(None)
    run.__name__ = fn.__name__
    run.__doc__ = fn.__doc__
    run.timeout = getattr(fn, "timeout", 60) + 15
    return run


for _mod, _names in CHOSEN.items():
    for _name in _names:
        globals()[_name] = _on_redis(getattr(_mod, _name))
