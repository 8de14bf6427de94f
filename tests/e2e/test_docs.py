"""Every configuration key herald knows is documented: in the example
configuration, the README's table and the man page; and the example
configuration passes --check-config."""
import os
import re
import subprocess

from harness import HERALD_BIN

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _keys():
    out = subprocess.run([HERALD_BIN, "--help"], capture_output=True, text=True, timeout=10).stdout
    keys = re.findall(r"^  ([a-z_]+) ", out.split("Keys and defaults", 1)[1], re.M)
    assert len(keys) > 20, out
    return keys


def _read(rel):
    with open(os.path.join(ROOT, rel)) as f:
        return f.read()


def test_every_key_is_documented():
    conf, readme, man = _read("conf/herald.conf"), _read("README.md"), _read("docs/herald.8")
    missing = []
    for k in _keys():
        if not re.search(rf"^{k} =", conf, re.M):
            missing.append(f"{k}: conf/herald.conf")
        if f"`{k}`" not in readme:
            missing.append(f"{k}: README.md")
        if k not in man:
            missing.append(f"{k}: docs/herald.8")
    assert not missing, "undocumented keys: " + ", ".join(missing)


def test_example_configuration_is_valid():
    r = subprocess.run([HERALD_BIN, "--config", os.path.join(ROOT, "conf/herald.conf"), "--check-config"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    assert "configuration OK" in r.stdout, r.stdout


def _git(*args):
    return subprocess.run(["git", "-C", ROOT] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=30)


# What a run leaves behind: logs, databases, Redis' snapshots and AOF.
RUN_LEFTOVERS = ["r2.log", "redis.log", "herald.log", "dump.rdb", "appendonly.aof", "appendonlydir/x.aof",
                 "herald.db", "herald.db-wal", "load/x.log", "tests/e2e/x.log"]


def test_no_run_leftovers_in_the_tree():
    """No log, database or Redis file is part of the source, and git ignores
    such files wherever a run leaves them."""
    if _git("rev-parse", "--is-inside-work-tree").returncode != 0:
        return  # not a git checkout (an unpacked archive): nothing tracked to check
    tracked = [f for f in _git("ls-files").stdout.splitlines()
               if re.search(r"(\.log|\.rdb|\.aof|\.db|\.db-wal|\.db-shm)$|(^|/)appendonlydir/", f)]
    assert not tracked, f"run leftovers committed: {tracked}"
    r = _git("check-ignore", "--no-index", *RUN_LEFTOVERS)
    ignored = set(r.stdout.split())
    assert ignored == set(RUN_LEFTOVERS), f"not ignored: {sorted(set(RUN_LEFTOVERS) - ignored)}"
