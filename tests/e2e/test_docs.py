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
