"""Which jobs a local release builds on which machine."""

from __future__ import annotations

import pytest
from release_fakes import machine, make_plan

from release.errors import UsageError
from release.machine import job_platform, wheel_job_platform
from release.select import plan_summary, select_jobs


def test_defaults_with_nvcc_13_build_cpu_then_cuda(plan) -> None:
    sel = select_jobs(plan, machine())
    assert sel.ids == ["stable2.10-cpu-linux-x86_64", "stable2.10-cu13-linux-x86_64"]  # the stable-ABI wheels
    assert sel.notes == ()


def test_defaults_without_nvcc_build_cpu_only_and_say_why(plan) -> None:
    sel = select_jobs(plan, machine(nvcc=None))
    assert sel.ids == ["stable2.10-cpu-linux-x86_64"]
    assert "no nvcc found" in sel.notes[0]


def test_defaults_with_another_cuda_major_skip_the_cuda_variant(plan) -> None:
    sel = select_jobs(plan, machine(cuda="12.8"))
    assert sel.ids == ["stable2.10-cpu-linux-x86_64"]
    assert "this nvcc is 12.8" in sel.notes[0]


def test_no_cuda_switch(plan) -> None:
    sel = select_jobs(plan, machine(), cuda=False)
    assert sel.ids == ["stable2.10-cpu-linux-x86_64"]
    assert "--no-cuda" in sel.notes[0]


def test_platform_decides_the_job(plan) -> None:
    sel = select_jobs(plan, machine(platform="windows-amd64"), cuda=False)
    assert sel.ids == ["stable2.10-cpu-windows-amd64"]


def test_a_cuda_12_nvcc_cannot_build_the_cu13_stable_wheel(plan) -> None:
    sel = select_jobs(plan, machine(cuda="12.8"))
    assert "stable2.10-cu13 left out: it needs CUDA 13.x, this nvcc is 12.8" in sel.notes[0]


def test_explicit_variants_keep_cpu_first(plan) -> None:
    sel = select_jobs(plan, machine(), variants=["torch2.14-cu130", "torch2.14-cpu", "torch2.14-cpu"])
    assert sel.ids == ["torch2.14-cpu-linux-x86_64", "torch2.14-cu130-linux-x86_64"]


@pytest.mark.parametrize(
    ("variants", "kw", "message"),
    [
        (["torch2.13-cpux"], {}, "Invalid variant name"),  # breaks the variant contract
        (["torch2.12-cpu"], {}, r"Perhaps you meant .*torch2\.13-cpu"),  # valid name, not in the plan
        (["torch2.14-cu130"], {"cuda": False}, "--no-cuda is set"),  # contradictory options
        ([], {}, "name at least one variant"),  # empty list
    ],
)
def test_bad_variants_name_the_value(plan, variants, kw, message) -> None:
    with pytest.raises(UsageError, match=message):
        select_jobs(plan, machine(), variants=variants, **kw)


def test_cuda_variant_without_nvcc_is_a_clear_error(plan) -> None:
    with pytest.raises(UsageError, match="no nvcc found"):
        select_jobs(plan, machine(nvcc=None), variants=["torch2.14-cu130"])


def test_malformed_plan_is_reported() -> None:
    with pytest.raises(UsageError, match="no 'jobs' list"):
        select_jobs({"combinations": []}, machine())
    with pytest.raises(UsageError, match="needs 'id', 'variant', 'platform'"):
        select_jobs({"jobs": [{"id": "x"}]}, machine())


def test_plan_summary_counts() -> None:
    text = plan_summary(make_plan(variants=("torch2.13-cpu",), platforms=("linux-x86_64", "windows-amd64")))
    assert text == "3 combinations (2 covered, 1 unavailable) -> 2 build jobs (1 variants x 2 platforms)"


@pytest.mark.parametrize(
    ("system", "arch", "expected"),
    [("Linux", "x86_64", "linux-x86_64"), ("Linux", "aarch64", "linux-aarch64"), ("Windows", "AMD64", "windows-amd64")],
)
def test_job_platform(system, arch, expected) -> None:
    assert job_platform(system, arch) == expected


def test_job_platform_unknown_machine() -> None:
    with pytest.raises(UsageError, match="Darwin"):
        job_platform("Darwin", "arm64")


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("manylinux_2_28_x86_64", "linux-x86_64"),
        ("manylinux2014_aarch64", "linux-aarch64"),
        ("linux_x86_64", "linux-x86_64"),
        ("win_amd64", "windows-amd64"),
        ("macosx_11_0_arm64", None),  # not a platform we build
    ],
)
def test_wheel_job_platform(tag, expected) -> None:
    assert wheel_job_platform(tag) == expected
