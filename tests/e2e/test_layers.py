# SPDX-License-Identifier: BSD-2-Clause
"""The folders of src/ stand in floors with no circle (scripts/layers, which
make check runs): the tree as it is passes, and the script fails on a copy
with an arrow that closes a circle, an include that names no folder or a .c
file over 1,200 lines."""
import os
import shutil
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAYERS = os.path.join(ROOT, "scripts", "layers")


def _layers(src):
    p = subprocess.run([LAYERS, src], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def _copy():
    d = tempfile.mkdtemp(prefix="herald-layers-")
    shutil.copytree(os.path.join(ROOT, "src"), os.path.join(d, "src"))
    return d


def _append(path, line):
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(line + "\n" + text)


def test_the_tree_has_no_circle():
    code, out = _layers(os.path.join(ROOT, "src"))
    assert code == 0, out
    assert out.rstrip().endswith("no circle"), out
    folders = sorted(n for n in os.listdir(os.path.join(ROOT, "src"))
                     if os.path.isdir(os.path.join(ROOT, "src", n)))
    for name in folders:
        assert f" {name}" in out, (name, out)
    # Nothing at the top of src/: every file lives in its folder.
    loose = [n for n in os.listdir(os.path.join(ROOT, "src")) if os.path.isfile(os.path.join(ROOT, "src", n))]
    assert loose == [], loose


def test_a_circle_is_named():
    d = _copy()
    try:
        src = os.path.join(d, "src")
        # common is the floor everything stands on: one arrow up closes a circle.
        _append(os.path.join(src, "common", "util.c"), '#include "server/server.h"')
        code, out = _layers(src)
        assert code == 1, out
        assert "make a circle" in out and "common -> server" in out and "common/util.c" in out, out
    finally:
        shutil.rmtree(d)


def test_an_include_without_its_folder_is_named():
    d = _copy()
    try:
        src = os.path.join(d, "src")
        _append(os.path.join(src, "hub", "hub.c"), '#include "loop.h"')
        code, out = _layers(src)
        assert code == 1, out
        assert 'hub/hub.c: #include "loop.h" names no folder' in out, out
    finally:
        shutil.rmtree(d)


def test_a_source_file_over_1200_lines_is_named():
    d = _copy()
    try:
        src = os.path.join(d, "src")
        path = os.path.join(src, "common", "util.c")
        with open(path) as f:
            have = sum(1 for _ in f)
        code, out = _layers(src)
        assert code == 0, out
        # Up to the limit passes; one line past it fails and names the file.
        with open(path, "a") as f:
            f.write("\n" * (1200 - have))
        code, out = _layers(src)
        assert code == 0, out
        with open(path, "a") as f:
            f.write("\n")
        code, out = _layers(src)
        assert code == 1, out
        assert "common/util.c: 1201 lines, over the 1200 a source file may have" in out, out
        # Headers may be longer (a table of declarations is one concern).
        with open(os.path.join(src, "common", "util.h"), "a") as f:
            f.write("\n" * 1300)
        with open(path, "w") as f:
            f.write("\n" * 10)
        code, out = _layers(src)
        assert code == 0, out
    finally:
        shutil.rmtree(d)
