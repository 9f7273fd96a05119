"""Publishing into an existing site is crash-safe as a whole: `index_site build` SIGKILLed before each of
its filesystem changes leaves the old site or the new one -- manifest, pages and files agreeing --
and the next build finishes the job."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from index_site_helpers import NOW, REPO_ROOT, snapshot

# One child build per filesystem step, each SIGKILLed and resumed: 50-110 s on 2 cores.
pytestmark = pytest.mark.slow

#: Runs `index_site build` and SIGKILLs itself just before its K-th filesystem change (any call
#: that creates, writes, links, renames, removes or flushes something); prints the count at the end.
_DRIVER = r"""
import builtins, io, os, shutil, signal, sys, tempfile
K = int(sys.argv[1])
count = 0
def step():
    global count
    if count == K:
        os.kill(os.getpid(), signal.SIGKILL)
    count += 1
def wrap(fn, changes=lambda *a, **k: True):
    def inner(*a, **k):
        if changes(*a, **k):
            step()
        return fn(*a, **k)
    return inner
def writes(file, mode="r", *a, **k):
    return isinstance(mode, str) and any(c in mode for c in "wax+")
def os_writes(path, flags, *a, **k):
    return bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
builtins.open = io.open = wrap(io.open, writes)
os.open = wrap(os.open, os_writes)
for name in ("rename", "replace", "link", "symlink", "unlink", "remove", "rmdir", "mkdir", "fsync", "chmod"):
    setattr(os, name, wrap(getattr(os, name)))
shutil.rmtree = wrap(shutil.rmtree)
tempfile.mkdtemp = wrap(tempfile.mkdtemp)
tempfile.mkstemp = wrap(tempfile.mkstemp)
from index_site import site
site._renameat2_exchange = wrap(site._renameat2_exchange)
from index_site.cli import main
rc = main(["build", *sys.argv[2:]])
print(f"STEPS {count}")
sys.exit(rc)
"""


def _build(k: int, wheels: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _DRIVER, str(k), str(wheels), "--out", str(site), "--now", NOW],
        cwd=str(REPO_ROOT),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _siblings(site: Path) -> list[str]:
    return sorted(p.name for p in site.parent.iterdir() if p.name.startswith(f".{site.name}."))


def test_killed_at_every_step_leaves_the_old_or_the_new_site(cli, make_wheel, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    make_wheel(directory=first, variant="torch2.13-cpu")
    make_wheel(directory=second, variant="torch2.14-cpu")
    make_wheel(directory=second, variant="torch2.14-cu130", platform="manylinux_2_28_x86_64")
    pristine = tmp_path / "pristine" / "site"
    assert cli("build", first, "--out", pristine, "--now", NOW).code == 0
    old = snapshot(pristine)

    expected = tmp_path / "expected" / "site"
    shutil.copytree(pristine, expected)
    full = _build(10**9, second, expected)
    assert full.returncode == 0, full.stderr
    new = snapshot(expected)
    assert new != old and "manifest.json" in new
    steps = int(full.stdout.rsplit("STEPS ", 1)[1])
    assert steps > 5, full.stdout

    for k in range(steps):
        work = tmp_path / f"k{k}"
        site = work / "site"
        shutil.copytree(pristine, site)
        proc = _build(k, second, site)
        assert proc.returncode == -signal.SIGKILL, (k, proc.returncode, proc.stderr[-2000:])
        now = snapshot(site) if site.exists() else {}
        assert now in (old, new), (
            f"killed before change {k} of {steps}: the site is neither the old nor the new one; "
            f"differs from the old in {sorted(set(now.items()) ^ set(old.items()))[:3]}"
        )
        # the next build completes the publish and cleans up what the killed one left beside the site
        again = _build(10**9, second, site)
        assert again.returncode == 0, (k, again.stderr)
        assert snapshot(site) == new, k
        assert _siblings(site) == [], (k, _siblings(site))
        shutil.rmtree(work)
