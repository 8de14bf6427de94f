"""End-to-end: configuration. --check-config on good and bad files (the
error names file, line, key and value), unknown keys, precedence defaults <
file < env < flags (seen in the logged backlog), HERALD_* and BACKLOG
environment, --help, --version, unknown flags, and start-up failures."""
import os
import re
import socket
import subprocess
import tempfile

from harness import HERALD_BIN, Herald


def _env(extra=None):
    env = {k: v for k, v in os.environ.items() if not (k.startswith("HERALD_") or k == "BACKLOG")}
    env["HERALD_BIN"] = HERALD_BIN
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    env.pop("NOTIFY_SOCKET", None)
    env.pop("LISTEN_FDS", None)
    env.update(extra or {})
    return env


def _run(args, env=None, timeout=10):
    r = subprocess.run([HERALD_BIN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, env=_env(env), timeout=timeout)
    return r.returncode, r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")


def _conf(text):
    d = tempfile.mkdtemp(prefix="herald-conf-")
    p = os.path.join(d, "herald.conf")
    with open(p, "w") as f:
        f.write(text)
    return d, p


def _check(text, extra_args=()):
    d, p = _conf(text)
    return p, _run(["--check-config", "--config", p, "--db", os.path.join(d, "h.db")] + list(extra_args))


GOOD = """# a comment
; another comment
listen = 127.0.0.1:0, unix:/tmp/herald-check-config-test.sock
backlog = 512
log_level = info
per_address_limit = 0
max_readers = 100
heartbeat_interval = 30s
header_timeout = 5
keepalive_timeout = 2m
stall_timeout = 1h
max_request_line = 4096
max_header_bytes = 16k
max_headers = 32
max_body = 1m
queue_limit = 256k
retention_age = 7d
retention_count = 1000
publish_token = abc
read_token = def
trusted_proxies = 127.0.0.0/8,::1,unix
retry_ms = 2000
rotate_after = 0
busy_timeout_ms = 5
"""


def test_check_config_good_file():
    p, (code, out) = _check(GOOD)
    assert code == 0, f"--check-config on a good file exited {code}:\n{out}"


def test_check_config_bad_value_names_file_line_key_value():
    p, (code, out) = _check("log_level = info\nbacklog = abc\n")
    assert code != 0, f"backlog = abc accepted:\n{out}"
    assert p in out, f"message does not name the file {p}:\n{out}"
    assert re.search(re.escape(p) + r":2\b", out), f"message does not name line 2 as {p}:2:\n{out}"
    assert "backlog" in out and "abc" in out, f"message does not name key and value:\n{out}"


def test_check_config_bad_values_of_several_kinds():
    for line, key, value in [("heartbeat_interval = 5x", "heartbeat_interval", "5x"),
                             ("max_body = lots", "max_body", "lots"),
                             ("per_address_limit = -1", "per_address_limit", "-1"),
                             ("log_level = shouty", "log_level", "shouty"),
                             ("queue_limit = 12q", "queue_limit", "12q")]:
        p, (code, out) = _check("# first line\n\n" + line + "\n")
        assert code != 0, f"{line!r} accepted:\n{out}"
        assert re.search(re.escape(p) + r":3\b", out), f"{line!r}: message does not name {p}:3:\n{out}"
        assert key in out and value in out, f"{line!r}: message does not name key and value:\n{out}"


def test_check_config_unknown_key():
    p, (code, out) = _check("backlog = 10\ncolour = red\n")
    assert code != 0, f"unknown key accepted:\n{out}"
    assert "colour" in out, f"message does not name the unknown key:\n{out}"
    assert p in out, f"message does not name the file:\n{out}"


def test_missing_config_file():
    d = tempfile.mkdtemp(prefix="herald-conf-")
    missing = os.path.join(d, "nope.conf")
    code, out = _run(["--check-config", "--config", missing])
    assert code != 0, out
    assert missing in out, f"message does not name the missing file:\n{out}"


def test_bad_flag_value_and_env_value():
    code, out = _run(["--check-config", "--backlog", "abc"])
    assert code != 0 and "backlog" in out and "abc" in out, (code, out)
    code, out = _run(["--check-config"], env={"HERALD_BACKLOG": "xyz"})
    assert code != 0 and "xyz" in out and "backlog" in out.lower(), (code, out)


def _backlog_logged(h):
    ls = h.listeners()
    assert ls, f"no 'listening on' line:\n{h.log()}"
    return {b for _, _, b in ls}


def test_precedence_file_env_flag():
    with Herald(config="backlog = 100\n") as h:
        assert _backlog_logged(h) == {100}, h.log()
    with Herald(config="backlog = 100\n", args=["--backlog", "200"]) as h:
        assert _backlog_logged(h) == {200}, h.log()
    with Herald(config="backlog = 100\n", env=_env({"HERALD_BACKLOG": "300"})) as h:
        assert _backlog_logged(h) == {300}, h.log()
    with Herald(config="backlog = 100\n", env=_env({"HERALD_BACKLOG": "300"}), args=["--backlog", "201"]) as h:
        assert _backlog_logged(h) == {201}, h.log()
    with Herald(env=_env({"BACKLOG": "400"})) as h:
        assert _backlog_logged(h) == {400}, h.log()
    if (_somaxconn() or 0) >= 1024:
        with Herald(env=_env()) as h:
            assert _backlog_logged(h) == {1024}, f"default backlog is not 1024:\n{h.log()}"


def test_other_keys_by_env_and_flag():
    # A key with an underscore, by environment and by dashed flag, with effect:
    # the stream's retry line carries retry_ms.
    from harness import Stream
    with Herald(env=_env({"HERALD_RETRY_MS": "2500"})) as h:
        s = Stream(h.port)
        assert s.read_exact(len(b"retry: 2500\n")) == b"retry: 2500\n"
        s.close()
    with Herald(config="retry_ms = 1111\n", env=_env({"HERALD_RETRY_MS": "2500"}), args=["--retry-ms", "777"]) as h:
        s = Stream(h.port)
        assert s.read_exact(len(b"retry: 777\n")) == b"retry: 777\n"
        s.close()


def _somaxconn():
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            return int(f.read())
    except OSError:
        return None


def test_help_version_unknown_flag():
    code, out = _run(["--help"])
    assert code == 0, (code, out)
    assert "usage" in out.lower(), out
    assert "--check-config" in out and "--listen" in out, out
    code, out = _run(["--version"])
    assert code == 0 and "0.1.0" in out, (code, out)
    code, out = _run(["--no-such-flag"])
    assert code == 2, f"unknown flag exited {code}:\n{out}"
    assert "no-such-flag" in out, out
    code, out = _run(["--backlog"])  # missing value
    assert code != 0, f"flag without value exited {code}:\n{out}"


def test_startup_failures_exit_nonzero():
    # A port already taken.
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    d = tempfile.mkdtemp(prefix="herald-conf-")
    try:
        code, out = _run(["--db", os.path.join(d, "h.db"), "--listen", f"127.0.0.1:{port}"])
        assert code != 0, f"started on a taken port:\n{out}"
        assert str(port) in out, f"message does not name the address:\n{out}"
    finally:
        taken.close()
    code, out = _run(["--db", os.path.join(d, "h.db"), "--listen", "not-an-address"])
    assert code != 0 and "not-an-address" in out, (code, out)
    # A database that cannot be created.
    code, out = _run(["--db", "/nonexistent-dir/sub/h.db", "--listen", "127.0.0.1:0"])
    assert code != 0 and "/nonexistent-dir/sub" in out, (code, out)


def test_listen_flag_overrides_file_list():
    d = tempfile.mkdtemp(prefix="herald-test-")
    sock = os.path.join(d, "from-file.sock")
    with Herald(dir=d, listen=False, config=f"listen = unix:{sock}\n", args=["--listen", "127.0.0.1:0"]) as h:
        ls = h.listeners()
        assert [k for k, _, _ in ls] == ["tcp"], f"--listen did not replace the file's list: {ls}"
        assert not os.path.exists(sock)
