# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: configuration. --check-config on good and bad files (the
error names file, line, key and value), unknown keys, precedence defaults <
file < env < flags (seen in the logged backlog), HERALD_* and BACKLOG
environment, --help, --version, unknown flags, and start-up failures.
Listen addresses, certificates, allow_origin and trusted_proxies checked at
load with their origin; --listen lists; quoted and dashed file entries;
unknown HERALD_* variables; the journal's error priority; tokens read from
files; metrics_access, ipv6_prefix and tls_ticket_rotate; the man page's
rendering."""
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile

from harness import HERALD_BIN, Herald, Stream, publish, request


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
    # A database that cannot be created (its folder would be inside a file;
    # even root cannot make that).
    with open(os.path.join(d, "file"), "w"):
        pass
    bad_db = os.path.join(d, "file", "sub", "h.db")
    code, out = _run(["--db", bad_db, "--listen", "127.0.0.1:0"])
    assert code != 0 and os.path.join(d, "file") in out, (code, out)


def test_listen_flag_overrides_file_list():
    d = tempfile.mkdtemp(prefix="herald-test-")
    sock = os.path.join(d, "from-file.sock")
    with Herald(dir=d, listen=False, config=f"listen = unix:{sock}\n", args=["--listen", "127.0.0.1:0"]) as h:
        ls = h.listeners()
        assert [k for k, _, _ in ls] == ["tcp"], f"--listen did not replace the file's list: {ls}"
        assert not os.path.exists(sock)


# --- Addresses checked once, at load ---------------------------------------

BAD_LISTEN = [("nonsense", "host:port"),
              ("127.0.0.1:99999", "port"),
              ("127.0.0.1:", "port"),
              ("127.0.0.1:80x", "port"),
              ("[::1]8199", "[IPv6]:port"),
              ("localhost:8199", "not an IP address"),
              ("unix:", "unix socket path"),
              ("tls:unix:/tmp/x.sock", "TCP addresses only")]


def test_check_config_refuses_bad_listen_addresses_naming_their_origin():
    for value, why in BAD_LISTEN:
        # A flag, the environment and a file line each name themselves.
        code, out = _run(["--check-config", "--listen", value])
        assert code == 1, f"--listen {value} accepted by --check-config:\n{out}"
        assert f'option --listen: listen = "{value}"' in out and why in out, out
        code, out = _run(["--check-config"], env={"HERALD_LISTEN": f"127.0.0.1:1, {value}"})
        assert code == 1, f"HERALD_LISTEN={value} accepted:\n{out}"
        assert f'environment HERALD_LISTEN: listen = "{value}"' in out and why in out, out
        p, (code, out) = _check(f"backlog = 5\nlisten = 127.0.0.1:1,{value}\n")
        assert code == 1, f"listen = {value} in a file accepted:\n{out}"
        assert f'{p}:2: listen = "{value}"' in out and why in out, out
    # The edges of the port range are fine.
    code, out = _run(["--check-config", "--listen", "127.0.0.1:0", "--listen", "127.0.0.1:65535"])
    assert code == 0, out


def test_bad_listen_address_refused_before_anything_opens():
    d = tempfile.mkdtemp(prefix="herald-conf-")
    sock, db = os.path.join(d, "h.sock"), os.path.join(d, "h.db")
    code, out = _run(["--db", db, "--listen", "unix:" + sock, "--listen", "127.0.0.1:99999"])
    assert code == 1, f"started with port 99999:\n{out}"
    assert 'listen = "127.0.0.1:99999"' in out, out
    assert not os.path.exists(sock), "a listener was opened before the bad address was seen"
    assert not os.path.exists(db), "the database was opened before the bad address was seen"


def test_listen_flag_takes_a_comma_separated_list():
    d = tempfile.mkdtemp(prefix="herald-test-")
    sock = os.path.join(d, "h.sock")
    code, out = _run(["--check-config", "--listen", f"127.0.0.1:0, unix:{sock}", "--listen", "127.0.0.1:1"])
    assert code == 0, out
    assert f"listen = 127.0.0.1:0, unix:{sock}, 127.0.0.1:1\n" in out, out
    with Herald(dir=d, listen=False, args=["--listen", f"127.0.0.1:0,unix:{sock}"]) as h:
        kinds = sorted(k for k, _, _ in h.listeners())
        assert kinds == ["tcp", "unix"], h.log()
        assert os.path.exists(sock)


# --- Every key's error names where the value came from ----------------------

def test_allow_origin_and_trusted_proxies_errors_name_their_origin():
    cases = [("allow_origin", "ftp://example.com", "origin such as"),
             ("allow_origin", "https://example.com/path", "no path"),
             ("trusted_proxies", "10.0.0.0/33", "prefix length"),
             ("trusted_proxies", "example.com", "not an IP address")]
    for key, value, why in cases:
        p, (code, out) = _check(f"# a comment\n{key} = {value}\n")
        assert code == 1, f"{key} = {value} accepted:\n{out}"
        assert f'{p}:2: {key} = "{value}"' in out and why in out, out
        env = "HERALD_" + key.upper()
        code, out = _run(["--check-config"], env={env: value})
        assert code == 1 and f'environment {env}: {key} = "{value}"' in out and why in out, out
        flag = "--" + key.replace("_", "-")
        code, out = _run(["--check-config", flag, value])
        assert code == 1 and f'option {flag}: {key} = "{value}"' in out and why in out, out


# --- Quoted values in the file ------------------------------------------------

def test_quoted_file_values_lose_one_pair_of_quotes():
    def check(text):  # without _check's --db, so that the file's db shows
        p = _conf(text)[1]
        return p, _run(["--check-config", "--config", p])

    p, (code, out) = check('db = "/tmp/with space.db"\n'
                           "allow_origin = 'https://a.example'\n"
                           'retry_ms = "2500"\n'
                           'trusted_proxies = ""\n')
    assert code == 0, out
    assert "db = /tmp/with space.db\n" in out and "allow_origin = https://a.example\n" in out, out
    assert "retry_ms = 2500\n" in out and "trusted_proxies = \n" in out, out
    # Only a matching pair is removed, and only one.
    p, (code, out) = check("retry_ms = \"2500'\n")
    assert code == 1 and f'{p}:1: retry_ms = "\\"2500\'"' in out, out
    p, (code, out) = check('db = ""x.db""\n')
    assert code == 0 and 'db = "x.db"\n' in out, out
    # The effect: a quoted read token is the token without its quotes.
    with Herald(config='read_token = "abc"\n') as h:
        eid = publish(h.port, data="private", public=False)
        s = Stream(h.port, query=f"token=abc&last_event_id={eid - 1}")
        assert s.status == 200, s.status
        assert [e["id"] for e in s.events(n=1, timeout=5)] == [eid], "the read token kept its quotes"
        s.close()


# --- Unknown environment variables, dashed keys ------------------------------

def test_unknown_herald_environment_variable_is_an_error():
    code, out = _run(["--check-config"], env={"HERALD_FOO": "1"})
    assert code == 1, f"HERALD_FOO accepted:\n{out}"
    assert "HERALD_FOO" in out and "unknown" in out, out
    # A key spelled in lower case or with dashes is not the variable.
    code, out = _run(["--check-config"], env={"HERALD_max_body": "1k"})
    assert code == 1 and "HERALD_max_body" in out and "HERALD_MAX_BODY" in out, out
    # The build's own variables (HERALD_BIN here) and real keys are fine.
    code, out = _run(["--check-config"], env={"HERALD_MAX_BODY": "1k", "HERALD_BUILD": "build/x"})
    assert code == 0 and "max_body = 1024\n" in out, out


def test_near_misses_name_the_key_meant():
    """A misspelt key in the file, the environment and the flags is
    answered with the key nearest to it; workers says it takes auto; presence
    off with mercure_subscriptions on is refused, naming both."""
    p, (code, out) = _check("presense_top = 5\n")
    assert code == 1 and f'{p}:1: unknown key "presense_top" (did you mean presence_top?)' in out, out
    code, out = _run(["--check-config"], env={"HERALD_HEARTBEAT_INTERVALL": "5s"})
    assert code == 1 and "(did you mean HERALD_HEARTBEAT_INTERVAL?)" in out, out
    code, out = _run(["--check-config", "--max-bdy", "1k"])
    assert code == 2 and "unknown option --max-bdy (did you mean --max-body?)" in out, out
    code, out = _run(["--check-config"], env={"HERALD_WORKERS": "two"})
    assert code == 1 and ('environment HERALD_WORKERS: workers = "two": not a whole number, nor auto '
                          '(allowed: 1 to 64, or auto: one per CPU)') in out, out
    code, out = _run(["--check-config"], env={"HERALD_WORKERS": "auto"})
    assert code == 0, out
    p, (code, out) = _check("presence = off\nmercure_subscriptions = on\n")
    assert code == 1 and (f"{p}:2: mercure_subscriptions = on needs presence = on ({p}:1 sets it off)"
                          in out), out


def test_dashed_keys_in_the_file_are_the_same_keys():
    p, (code, out) = _check("max-body = 1k\nper-address-limit = 5\n")
    assert code == 0, f"dashed keys refused in the file:\n{out}"
    assert "max_body = 1024\n" in out and "per_address_limit = 5\n" in out, out
    p, (code, out) = _check("# x\nmax-body = lots\n")
    assert code == 1 and f'{p}:2: max_body = "lots"' in out, out


# --- Errors under journald ----------------------------------------------------

def test_config_errors_carry_the_journal_error_priority():
    d, p = _conf("backlog = 0\ncolour = red\n")
    errpath = os.path.join(d, "stderr")
    with open(errpath, "wb") as f:
        st = os.fstat(f.fileno())
        env = _env({"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}", "HERALD_FOO": "1"})
        r = subprocess.run([HERALD_BIN, "--check-config", "--config", p], stdout=subprocess.PIPE, stderr=f,
                           stdin=subprocess.DEVNULL, env=env, timeout=10)
    with open(errpath) as f:
        lines = [ln for ln in f.read().splitlines() if ln]
    assert r.returncode == 1, lines
    assert len(lines) >= 3, lines
    for ln in lines:
        assert ln.startswith("<3>"), f"an error line without the journal's error priority: {ln!r}"
    # Without the journal: no priority prefix, the level named instead.
    code, out = _run(["--check-config", "--config", p])
    assert code == 1 and "<3>" not in out and "error" in out, out


# --- The manual page -----------------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_man_page_renders_without_stray_quotes():
    """A quote in the rendered page is one the source prints on purpose
    (inside an example); a quote left over from macro arguments is not."""
    man = os.path.join(ROOT, "docs", "herald.8")
    r = subprocess.run(["groff", "-man", "-Tutf8", "-P-cbou", "-ww", man], capture_output=True, text=True,
                       timeout=20)
    assert r.returncode == 0, r.stderr
    assert not r.stderr.strip(), f"groff warns:\n{r.stderr}"
    with open(man) as f:
        src = f.read()
    examples = " ".join(re.findall(r"^\.EX\n(.*?)^\.EE", src, re.M | re.S)).replace("\\e", "\\")
    stray = [ln.strip() for ln in r.stdout.splitlines() if '"' in ln and ln.strip() not in examples]
    assert not stray, "rendered lines with stray quotes:\n" + "\n".join(stray)


# --- Tokens read from files ------------------------------------------------------

def _write(d, name, content):
    path = os.path.join(d, name)
    with open(path, "wb") as f:
        f.write(content)
    return path


def _post(port, token=None):
    h = {"Authorization": f"Bearer {token}"} if token else {}
    return request(port, "POST", "/api/events", {"data": "x", "public": True}, headers=h)[0]


def test_publish_token_file_is_read_at_load_and_at_every_reload():
    d = tempfile.mkdtemp(prefix="herald-test-")
    tf = _write(d, "publish.token", b"s3cret-one\n")
    conf = f"publish_token_file = {tf}\n"
    p, (code, out) = _check(conf)
    assert code == 0, out
    assert "publish_token = (set)\n" in out and f"publish_token_file = {tf}\n" in out, out
    assert "s3cret" not in out, out
    with Herald(dir=d, config=conf) as h:
        assert _post(h.port) == 401
        assert _post(h.port, "s3cret-on") == 403
        assert _post(h.port, "s3cret-one") == 201
        # A new token in the file (CRLF line end this time): SIGHUP reads it.
        _write(d, "publish.token", b"s3cret-two\r\n")
        since = h.log_size()
        h.signal(signal.SIGHUP)
        h.wait_log(r"configuration reloaded", since=since)
        assert _post(h.port, "s3cret-one") == 403
        assert _post(h.port, "s3cret-two") == 201
        # An empty file: the reload is refused, naming key and path; the token stays.
        _write(d, "publish.token", b"")
        since = h.log_size()
        h.signal(signal.SIGHUP)
        h.wait_log(r"reload failed", since=since)
        said = h.log()[since:]
        assert f'publish_token_file = "{tf}"' in said and "empty" in said, said
        assert _post(h.port, "s3cret-two") == 201
        assert "s3cret" not in h.log()


def test_read_token_file_gives_the_read_token():
    d = tempfile.mkdtemp(prefix="herald-test-")
    tf = _write(d, "read.token", b"r-tok\n")
    with Herald(dir=d, args=["--read-token-file", tf]) as h:
        eid = publish(h.port, data="private", public=False)
        s = Stream(h.port, query=f"token=r-tok&last_event_id={eid - 1}")
        assert [e["id"] for e in s.events(n=1, timeout=5)] == [eid]
        s.close()


def test_token_file_errors_name_key_and_path_never_the_content():
    d = tempfile.mkdtemp(prefix="herald-test-")
    cases = [(os.path.join(d, "missing"), None, "No such file"),
             ("empty", b"", "empty"),
             ("newline", b"\n", "empty"),
             ("long", b"Z" * 1025, "too long"),
             ("control", b"SECRETVALUE\x01", "control character"),
             ("twolines", b"SECRETVALUE\n\n", "control character"),
             ("dir", "dir", "Is a directory")]
    os.mkdir(os.path.join(d, "dir"))
    for key in ("publish_token_file", "read_token_file", "metrics_token_file"):
        for name, content, why in cases:
            path = name if content is None else (os.path.join(d, "dir") if content == "dir"
                                                 else _write(d, name, content))
            p, (code, out) = _check(f"# tokens\n{key} = {path}\n")
            assert code == 1, f"{key} = {name} accepted:\n{out}"
            assert f'{p}:2: {key} = "{path}"' in out and why in out, out
            assert "SECRETVALUE" not in out and "ZZZZ" not in out, out
    ok = _write(d, "ok", b"Y" * 1024 + b"\r\n")
    p, (code, out) = _check(f"publish_token_file = {ok}\n")
    assert code == 0, out
    # A token given both ways is an error naming both keys.
    p, (code, out) = _check(f"publish_token = abc\npublish_token_file = {ok}\n")
    assert code == 1 and "publish_token" in out and "publish_token_file" in out, out
    assert f"{p}:1" in out and f"{p}:2" in out and "abc" not in out, out
    code, out = _run(["--check-config", "--read-token", "abc"], env={"HERALD_READ_TOKEN_FILE": ok})
    assert code == 1 and "option --read-token" in out and "environment HERALD_READ_TOKEN_FILE" in out, out


# --- New keys: metrics access, IPv6 prefix, ticket rotation --------------------

def test_metrics_access_and_its_token():
    code, out = _run(["--check-config"])
    assert code == 0 and "metrics_access = local\n" in out and "metrics_token = \n" in out, out
    for mode in ("any", "local"):
        code, out = _run(["--check-config", "--metrics-access", mode])
        assert code == 0 and f"metrics_access = {mode}\n" in out, out
    code, out = _run(["--check-config", "--metrics-access", "all"])
    assert code == 1 and 'option --metrics-access: metrics_access = "all"' in out, out
    assert "any, local" in out, out
    code, out = _run(["--check-config", "--metrics-access", "token"])
    assert code == 1 and "option --metrics-access" in out and "metrics_token" in out, out
    code, out = _run(["--check-config", "--metrics-access", "token", "--metrics-token", "m3trics"])
    assert code == 0 and "metrics_access = token\n" in out and "metrics_token = (set)\n" in out, out
    assert "m3trics" not in out, out
    d = tempfile.mkdtemp(prefix="herald-test-")
    tf = _write(d, "m.token", b"m3trics\n")
    code, out = _run(["--check-config"], env={"HERALD_METRICS_ACCESS": "token", "HERALD_METRICS_TOKEN_FILE": tf})
    assert code == 0 and "metrics_token = (set)\n" in out and "m3trics" not in out, out
    code, out = _run(["--check-config", "--metrics-token", "bad\x01"])
    assert code == 1 and "metrics_token = (value not shown)" in out and "bad" not in out, out


def test_ipv6_prefix_and_tls_ticket_rotate_ranges():
    code, out = _run(["--check-config"])
    assert code == 0 and "ipv6_prefix = 64\n" in out and "tls_ticket_rotate = 43200000ms\n" in out, out
    for v in ("1", "128"):
        code, out = _run(["--check-config", "--ipv6-prefix", v])
        assert code == 0 and f"ipv6_prefix = {v}\n" in out, out
    for v in ("0", "129", "/64"):
        code, out = _run(["--check-config", "--ipv6-prefix", v])
        assert code == 1 and f'ipv6_prefix = "{v}"' in out, out
    for v, ms in (("0", 0), ("1s", 1000), ("1m", 60000), ("12h", 43200000), ("7d", 604800000)):
        code, out = _run(["--check-config", "--tls-ticket-rotate", v])
        assert code == 0 and f"tls_ticket_rotate = {ms}ms\n" in out, out
    for v in ("999ms", "1ms", "8d", "soon"):
        code, out = _run(["--check-config", "--tls-ticket-rotate", v])
        assert code == 1 and f'tls_ticket_rotate = "{v}"' in out, out


# --- Signed tokens: the key file is read and checked at load -------------------

def _openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=30)


def test_check_config_refuses_a_bad_jwt_key_file():
    """--check-config builds the token verifier: a secret too short, a file
    that holds no public key, a private key, or a key of the wrong type is
    refused with file, line, key and path (never the secret); good key files
    pass."""
    d = tempfile.mkdtemp(prefix="herald-test-jwt-")
    try:
        _check_jwt_key_files(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _check_jwt_key_files(d):
    short = _write(d, "short.secret", b"TOPSECRET-123\n")
    p, (code, out) = _check(f"jwt_algorithm = HS256\njwt_secret_file = {short}\n")
    assert code == 1, out
    assert f'{p}:2: jwt_secret_file = "{short}": the secret is 13 bytes; HS256 needs at least 32' in out, out
    assert "TOPSECRET" not in out, out

    garbage = _write(d, "garbage.pem", b"-----BEGIN PUBLIC KEY-----\nnot base64\n-----END PUBLIC KEY-----\n")
    p, (code, out) = _check(f"jwt_algorithm = ES256\njwt_public_key_file = {garbage}\n")
    assert code == 1 and f'{p}:2: jwt_public_key_file = "{garbage}": no PEM public key' in out, out

    priv, pub = os.path.join(d, "ec.key"), os.path.join(d, "ec.pub")
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", priv)
    _openssl("pkey", "-in", priv, "-pubout", "-out", pub)
    p, (code, out) = _check(f"jwt_algorithm = ES256\njwt_public_key_file = {priv}\n")
    assert code == 1 and "holds a private key" in out, out
    assert "PRIVATE" not in out.replace("holds a private key", ""), out
    p, (code, out) = _check(f"jwt_algorithm = RS256\njwt_public_key_file = {pub}\n")
    assert code == 1 and f'jwt_public_key_file = "{pub}": not an RSA key, which RS256 needs' in out, out
    code, out = _run(["--check-config", "--jwt-algorithm", "ES256", "--jwt-public-key-file",
                      os.path.join(d, "missing.pem")])
    assert code == 1 and "option --jwt-public-key-file: jwt_public_key_file" in out, out
    assert "No such file or directory" in out, out

    # The good ones pass, and print their settings.
    p, (code, out) = _check(f"jwt_algorithm = ES256\njwt_public_key_file = {pub}\njwt_cookie = herald_token\n")
    assert code == 0 and "configuration OK" in out and "jwt_algorithm = ES256\n" in out, out
    assert "jwt_leeway = 10s\n" in out and "jwt_cookie = herald_token\n" in out, out
    good = _write(d, "good.secret", b"Z" * 40 + b"\n")
    code, out = _run(["--check-config", "--jwt-algorithm", "HS256"], env={"HERALD_JWT_SECRET_FILE": good})
    assert code == 0 and "configuration OK" in out and "ZZZZ" not in out, out
    code, out = _run(["--check-config", "--jwt-algorithm", "HS256"])
    assert code == 1 and 'jwt_algorithm = "HS256" needs jwt_secret_file' in out, out
