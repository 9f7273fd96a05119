"""The plan only asks the CUDA install script (scripts/) for what it can install."""

from __future__ import annotations

import re
from pathlib import Path

from build_matrix.plan import make_plan

REPO = Path(__file__).resolve().parents[2]


def test_install_script_knows_every_planned_cuda(data) -> None:
    script = (REPO / "scripts" / "install-cuda-manylinux.sh").read_text()
    table = re.search(r"FINAL_UPDATE=\((.*?)\)", script, re.S)
    assert table, "scripts/install-cuda-manylinux.sh has no FINAL_UPDATE table"
    known = set(re.findall(r"\[(\d+\.\d+)\]=", table.group(1)))
    jobs = [j for j in make_plan(data).jobs if j.os == "linux" and j.cuda]
    needed = {j.cuda for j in jobs}
    missing = {c: [j.id for j in jobs if j.cuda == c][:3] for c in sorted(needed - known)}
    assert not missing, (
        f"CUDA versions the plan installs with scripts/install-cuda-manylinux.sh but it does not know: {missing}"
    )
    for job in jobs:
        assert job.environment["CIBW_BEFORE_ALL"] == f"bash scripts/install-cuda-manylinux.sh {job.cuda}"
        if job.manylinux == "manylinux2014":  # EL7: NVIDIA ships no packages after CUDA 12.4
            assert tuple(map(int, job.cuda.split("."))) <= (12, 4), job.id


def test_windows_install_script_knows_every_planned_cuda(data) -> None:
    script = (REPO / "scripts" / "install-cuda-windows.ps1").read_text()
    known = set(re.findall(r"'(\d+\.\d+)'\s*=\s*'\d+\.\d+\.\d+'", script))
    assert known, "scripts/install-cuda-windows.ps1 lists no CUDA versions"
    jobs = [j for j in make_plan(data).jobs if j.os == "windows" and j.cuda]
    missing = sorted({j.cuda for j in jobs} - known)
    assert not missing, f"CUDA versions Windows jobs need but scripts/install-cuda-windows.ps1 does not know: {missing}"
