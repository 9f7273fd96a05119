"""The plan: combinations, jobs, filters, job fields and the JSON schema."""

from __future__ import annotations

import json
import time

import pytest

import causal_conv1d_contract as contract
from build_matrix import compat
from build_matrix.errors import UnknownJob, UnknownValue
from build_matrix.plan import ABI_NAMES, Job, make_plan, python_tag


@pytest.fixture(scope="module")
def plan(data: compat.CompatData):
    return make_plan(data)


@pytest.fixture(scope="module")
def per_minor(data: compat.CompatData):
    """The plan without stable-ABI jobs: one job per torch minor (the matrix before the stable ABI)."""
    return make_plan(data, stable_abi=False)


def test_full_plan_is_fast(data: compat.CompatData) -> None:
    best = min(_timed(lambda: make_plan(data)) for _ in range(3))
    assert best < 1.0, f"plan over the full table took {best:.3f} s"
    start = time.perf_counter()
    make_plan()  # including loading and validating the data file
    assert time.perf_counter() - start < 1.0


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def test_counts_are_consistent(plan, data: compat.CompatData) -> None:
    s = plan.summary()
    assert s["covered"] + s["unavailable"] == s["combinations"] == len(plan.combinations)
    # the full cross product: linux platforms have two ABIs, Windows one
    per_minor = len(data.accels()) * len(data.pythons()) * (2 + 2 + 1)
    assert s["combinations"] == per_minor * len(data.torch)
    assert s["jobs"] == len(plan.jobs) == len({j.id for j in plan.jobs})
    covered = [c for c in plan.combinations if c.status == "covered"]
    assert {c.job for c in covered} == {j.id for j in plan.jobs}, "every job covers something"
    assert s["per_python_jobs"] == len(covered)  # one official ABI per covered (torch, accel, python, platform)
    assert s["jobs_saved_ratio"] == round(len(covered) / len(plan.jobs), 2) > 3
    assert "abi3" in s["abi3"]


def test_combination_keys_and_values(plan) -> None:
    for c in plan.combinations[:500]:
        d = c.to_dict()
        assert set(d) == {"torch", "accel", "python", "abi", "platform", "status", "job", "reason"}
        assert d["abi"] in ABI_NAMES
        assert d["status"] in ("covered", "unavailable")
        assert (d["job"] is None) == (d["status"] == "unavailable")
        assert d["reason"]


def _combo(plan, torch, accel, python, abi, platform):
    [c] = [
        c
        for c in plan.combinations
        if (c.torch, c.accel, c.python, c.abi, c.platform) == (torch, accel, python, abi, platform)
    ]
    return c


def test_reasons(plan) -> None:
    assert _combo(plan, "2.8", "cu118", "3.12", "cxx11", "linux-x86_64").reason.startswith(
        "torch 2.8 has no cu118 build"
    )
    assert "no cu118 build for linux-aarch64" in _combo(plan, "2.7", "cu118", "3.12", "cxx11", "linux-aarch64").reason
    assert "does not ship for CPython 3.14" in _combo(plan, "2.8", "cpu", "3.14", "cxx11", "linux-x86_64").reason
    assert "free-threaded" in _combo(plan, "2.9", "cu128", "3.13t", "cxx11", "linux-x86_64").reason
    assert "needs CPython >=3.9" in _combo(plan, "2.4", "cpu", "3.8", "pre-cxx11", "linux-x86_64").reason
    wrong_abi = _combo(plan, "2.6", "cu118", "3.11", "cxx11", "linux-x86_64")
    assert wrong_abi.status == "unavailable" and "torch2.6-cu118-cxx11abi1" in wrong_abi.reason
    ok = _combo(plan, "2.6", "cu118", "3.11", "pre-cxx11", "linux-x86_64")
    assert ok.status == "covered" and ok.job == "torch2.6-cu118-linux-x86_64"
    assert _combo(plan, "2.6", "cu126", "3.11", "cxx11", "linux-x86_64").status == "covered"
    assert _combo(plan, "2.13", "cu130", "3.14", "msvc", "windows-amd64").job == "stable2.10-cu13-windows-amd64"
    assert _combo(plan, "2.9", "cu130", "3.14", "msvc", "windows-amd64").job == "torch2.9-cu130-windows-amd64"
    stable = _combo(plan, "2.12", "cu126", "3.12", "cxx11", "linux-aarch64")
    assert stable.job == "stable2.10-cu12-linux-aarch64"
    assert stable.reason == (
        "served by causal_conv1d-1.7.0.post1+cu12.stable2.10-cp39-abi3-manylinux_2_28_aarch64.whl "
        "(stable ABI: every torch >= 2.10 with CUDA 12)"
    )
    # the stable ABI changes which job serves a combination, never whether one does
    assert _combo(plan, "2.12", "cu126", "3.12", "pre-cxx11", "linux-aarch64").status == "unavailable"


def test_abi_follows_the_contract(plan) -> None:
    for job in plan.jobs:
        assert job.cxx11_abi == contract.official_cxx11_abi(job.build_variant.torch_minor, job.accel)
        if job.os == "linux":
            assert job.manylinux == ("manylinux_2_28" if job.cxx11_abi else "manylinux2014")
        else:
            assert job.manylinux is None


def test_cpu_job_fields(per_minor) -> None:
    job = per_minor.job("torch2.13-cpu-linux-x86_64")
    assert isinstance(job, Job)
    assert (job.torch, job.accel, job.platform, job.os, job.arch) == ("2.13", "cpu", "linux-x86_64", "linux", "x86_64")
    assert job.variant == contract.Variant.parse("torch2.13-cpu")
    assert job.torch_version == "2.13.0"
    assert job.torch_index_url == "https://download.pytorch.org/whl/cpu"
    assert job.cuda is None and job.cuda_archs == ""
    assert job.cxx11_abi is True and job.manylinux == "manylinux_2_28"
    assert job.python == "3.10" and job.cpp_std == "20"
    assert job.covers_pythons == ("3.10", "3.11", "3.12", "3.13", "3.14")
    assert job.wheel_filename == "causal_conv1d-1.7.0.post1+cpu.torch2.13-cp39-abi3-manylinux_2_28_x86_64.whl"
    env = job.environment
    assert env["CIBW_BUILD"] == "cp310-manylinux_x86_64"
    assert env["CIBW_ARCHS"] == "x86_64"
    assert env["CIBW_MANYLINUX_X86_64_IMAGE"] == "manylinux_2_28"
    assert env["CIBW_BEFORE_ALL"] == ""
    assert '"torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu' in env["CIBW_BEFORE_BUILD"]
    assert "--no-isolation" in env["CIBW_BUILD_FRONTEND"]
    assert 'CAUSAL_CONV1D_LOCAL_VERSION="cpu.torch2.13"' in env["CIBW_ENVIRONMENT"]
    assert 'CAUSAL_CONV1D_FORCE_BUILD="TRUE"' in env["CIBW_ENVIRONMENT"]
    assert 'CAUSAL_CONV1D_SKIP_CUDA_BUILD="TRUE"' in env["CIBW_ENVIRONMENT"]
    assert 'CAUSAL_CONV1D_STABLE_ABI="FALSE"' in env["CIBW_ENVIRONMENT"]
    assert "TORCH_CUDA_ARCH_LIST" not in env["CIBW_ENVIRONMENT"]
    assert env["CIBW_REPAIR_WHEEL_COMMAND"].startswith("auditwheel repair ")
    assert "--exclude 'libtorch.so'" in env["CIBW_REPAIR_WHEEL_COMMAND"]
    assert (
        "python -m build_matrix check --job torch2.13-cpu-linux-x86_64 {dest_dir}/*.whl"
        in env["CIBW_REPAIR_WHEEL_COMMAND"]
    )
    assert "import torch, causal_conv1d" in env["CIBW_TEST_COMMAND"]


def test_cuda_job_fields(plan, per_minor, data: compat.CompatData) -> None:
    job = plan.job("torch2.6-cu118-linux-x86_64")
    assert job.stable_abi is False and job.to_dict()["stable_abi"] is False and job.serves == ("torch2.6-cu118",)
    assert job.to_dict()["requires_torch"] == "torch>=2.6,<2.7"
    plan = per_minor  # the per-minor jobs of torch >= 2.10 (what the matrix had before the stable ABI)
    assert job.cuda == "11.8" and job.cuda_archs == data.cuda["11.8"].archs
    assert job.cxx11_abi is False and job.manylinux == "manylinux2014"
    assert job.wheel_platform == "manylinux2014_x86_64" and job.python == "3.9"
    env = job.environment
    assert env["CIBW_BEFORE_ALL"] == "bash scripts/install-cuda-manylinux.sh 11.8"
    assert env["CIBW_MANYLINUX_X86_64_IMAGE"] == "manylinux2014"
    assert f'TORCH_CUDA_ARCH_LIST="{data.cuda["11.8"].archs}"' in env["CIBW_ENVIRONMENT"]
    assert 'CUDA_HOME="/usr/local/cuda-11.8"' in env["CIBW_ENVIRONMENT"]
    assert "SKIP_CUDA_BUILD" not in env["CIBW_ENVIRONMENT"]

    arm = plan.job("torch2.14-cu130-linux-aarch64")
    assert arm.cuda_archs == data.cuda["13.0"].archs_aarch64 and "11.0" in arm.cuda_archs
    assert arm.environment["CIBW_MANYLINUX_AARCH64_IMAGE"] == "manylinux_2_28"
    assert arm.environment["CIBW_ARCHS"] == "aarch64"

    win = plan.job("torch2.14-cu130-windows-amd64")
    assert win.environment["CIBW_BUILD"] == "cp310-win_amd64" and win.environment["CIBW_ARCHS"] == "AMD64"
    assert win.environment["CIBW_BEFORE_ALL"] == ""  # the toolkit is installed on the runner first
    assert "delvewheel repair" in win.environment["CIBW_REPAIR_WHEEL_COMMAND"]
    assert win.wheel_filename in win.environment["CIBW_REPAIR_WHEEL_COMMAND"]
    assert not any(k.startswith("CIBW_MANYLINUX") for k in win.environment)


def test_arch_lists_obey_cuda_limits(plan) -> None:
    for job in plan.jobs:
        if job.cuda is None:
            continue
        cuda = tuple(int(x) for x in job.cuda.split("."))
        archs = [tuple(int(x) for x in a.replace("+PTX", "").split(".")) for a in job.cuda_archs.split(";")]
        if cuda >= (13, 0):
            assert min(archs) >= (7, 5), job.id
        if cuda < (12, 8):
            assert max(archs) < (10, 0), job.id


def test_job_ids_and_python(plan) -> None:
    for job in plan.jobs:
        assert job.id == f"{job.variant.name}-{job.platform}"
        assert contract.parse_build_variant(job.variant.name) == job.variant
        assert ("stable" in job.id) == job.stable_abi
        assert job.python == job.covers_pythons[0]
        assert job.environment["CIBW_BUILD"].startswith(python_tag(job.python) + "-")
        assert not any(p.endswith("t") for p in job.covers_pythons)
        assert job.torch_version.startswith(job.torch + ".")
        assert contract.parse_wheel_name(job.wheel_filename).variant == job.variant


def test_unknown_job_suggests(plan) -> None:
    with pytest.raises(UnknownJob) as info:
        plan.job("torch2.9-cpu-linux-x86-64")
    assert "torch2.9-cpu-linux-x86_64" in info.value.suggestions
    assert "Perhaps you meant 'torch2.9-cpu-linux-x86_64'" in str(info.value)
    assert info.value.exit_code == 3
    with pytest.raises(UnknownJob) as info:
        plan.job("torch2.13-cu130-linux-x86_64")  # torch >= 2.10: no per-minor job; the stable one is named
    assert "the stable-ABI job stable2.10-cu13-linux-x86_64 builds the wheel" in str(info.value)
    # the stable job is the one suggestion: no older torch minor's job (another torch's wheel) before it
    assert info.value.suggestions == ["stable2.10-cu13-linux-x86_64"]
    assert "Perhaps you meant 'stable2.10-cu13-linux-x86_64'?" in str(info.value)
    assert "torch2.9" not in str(info.value)


@pytest.mark.parametrize(
    "spec,expected",
    [
        ("2.7", ["2.7"]),
        ("2.6-2.9", ["2.6", "2.7", "2.8", "2.9"]),
        ("2.6..2.7", ["2.6", "2.7"]),
        ("2.13-", ["2.13", "2.14", "2.15"]),
        ("-2.5", ["2.4", "2.5"]),
        (">=2.12,<2.14", ["2.12", "2.13"]),
        ("2.4,2.10", ["2.4", "2.10"]),
        (["2.4", "2.10-2.11"], ["2.4", "2.10", "2.11"]),
    ],
)
def test_torch_filter(data: compat.CompatData, spec, expected) -> None:
    plan = make_plan(data, torch=spec)
    assert sorted({c.torch for c in plan.combinations}, key=compat.minor_key) == expected
    assert {j.torch for j in plan.jobs if not j.stable_abi} == {m for m in expected if compat.minor_key(m) < (2, 10)}
    stable = [j for j in plan.jobs if j.stable_abi]
    if any(compat.minor_key(m) >= (2, 10) for m in expected):
        assert len(stable) == 9  # cpu, cu12, cu13 x 3 platforms, whatever the filter
    else:
        assert stable == []
    assert {j.torch for j in make_plan(data, torch=spec, stable_abi=False).jobs} == set(expected)


@pytest.mark.parametrize(
    "kwargs,kind,value,suggestion",
    [
        ({"torch": "2.44"}, "torch", "2.44", "2.4"),  # typo in a minor
        ({"torch": "2.6-2.99"}, "torch", "2.99", "2.9"),  # unknown range end
        ({"torch": ">=3.0"}, "torch", ">=3.0", None),  # selects nothing
        ({"torch": "latest"}, "torch", "latest", None),  # not a spec at all
        ({"accels": "cu1288"}, "accel", "cu1288", "cu128"),
        ({"accels": ["cpu", "CPU"]}, "accel", "CPU", "cpu"),
        ({"platforms": "linux-x86-64"}, "platform", "linux-x86-64", "linux-x86_64"),
        ({"platforms": "windows"}, "platform", "windows", "windows-amd64"),
        ({"pythons": "3.1"}, "python", "3.1", "3.11"),
    ],
)
def test_unknown_filter_values(data: compat.CompatData, kwargs, kind, value, suggestion) -> None:
    with pytest.raises(UnknownValue) as info:
        make_plan(data, **kwargs)
    assert info.value.kind == kind and info.value.value == value
    assert repr(value) in str(info.value)
    if suggestion:
        assert suggestion in info.value.suggestions, info.value.suggestions


def test_filters_combine(data: compat.CompatData) -> None:
    plan = make_plan(data, torch="2.7", accels="cpu,cu128", platforms=["windows-amd64"], pythons="3.12,3.13t")
    assert [j.id for j in plan.jobs] == ["torch2.7-cpu-windows-amd64", "torch2.7-cu128-windows-amd64"]
    assert len(plan.combinations) == 2 * 2  # accels x pythons, one platform with one ABI
    assert plan.filters == {
        "torch": ["2.7"],
        "accels": ["cpu", "cu128"],
        "platforms": ["windows-amd64"],
        "pythons": ["3.12", "3.13t"],
    }


def test_index_url_override(data: compat.CompatData, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = make_plan(data, torch="2.7", accels="cu128", torch_index_base="https://mirror.example/whl/")
    assert {j.torch_index_url for j in plan.jobs} == {"https://mirror.example/whl/cu128"}
    assert all("--index-url https://mirror.example/whl/cu128" in j.environment["CIBW_BEFORE_BUILD"] for j in plan.jobs)
    monkeypatch.setenv(compat.INDEX_ENV, "https://env.example/whl")
    assert make_plan(data, torch="2.7", accels="cu128").jobs[0].torch_index_url == "https://env.example/whl/cu128"


def test_plan_json_schema(cli) -> None:
    res = cli("plan", "--format", "json", "--torch", "2.13-2.14")
    assert res.code == 0
    doc = json.loads(res.out)
    assert {"schema_version", "abi3", "summary", "jobs", "combinations", "filters", "data", "generator"} <= set(doc)
    assert doc["summary"]["covered"] == sum(c["status"] == "covered" for c in doc["combinations"])
    job = doc["jobs"][0]
    for key in (
        "id",
        "variant",
        "platform",
        "python",
        "environment",
        "torch_version",
        "torch_index_url",
        "cuda",
        "cuda_archs",
        "cxx11_abi",
        "manylinux",
        "cpp_std",
        "covers_pythons",
        "wheel_filename",
    ):
        assert key in job
    assert "cp39-abi3" in doc["abi3"]


def test_jobs_are_frozen_and_hashable(plan) -> None:
    job = plan.job("torch2.7-cpu-linux-x86_64")
    assert len(set(plan.jobs)) == len(plan.jobs)
    with pytest.raises(AttributeError):
        job.python = "3.12"  # type: ignore[misc]


# --- stable-ABI jobs (torch >= 2.10)


def test_job_count_before_and_after(plan, per_minor) -> None:
    legacy = [j for j in plan.jobs if not j.stable_abi]
    stable = [j for j in plan.jobs if j.stable_abi]
    assert len(per_minor.jobs) == 133  # one job per torch minor x accel x platform (the data of 2026-11-30)
    assert len(stable) == 9 and len(plan.jobs) == 70
    assert [j.id for j in legacy] == [j.id for j in per_minor.jobs if j.build_variant.torch_minor < (2, 10)]
    assert [j.id for j in stable] == [
        f"stable2.10-{f}-{p}"
        for f in ("cpu", "cu12", "cu13")
        for p in ("linux-x86_64", "linux-aarch64", "windows-amd64")
    ]
    assert plan.summary()["covered"] == per_minor.summary()["covered"] == 651
    # same combinations, same statuses: the stable ABI changes only which job serves them
    assert [(c.torch, c.accel, c.python, c.abi, c.platform, c.status) for c in plan.combinations] == [
        (c.torch, c.accel, c.python, c.abi, c.platform, c.status) for c in per_minor.combinations
    ]


def test_every_torch_2_10_plus_combination_is_covered_by_its_family(plan) -> None:
    by_id = {j.id: j for j in plan.jobs}
    for c in plan.combinations:
        if compat.minor_key(c.torch) < (2, 10) or c.status != "covered":
            continue
        job = by_id[c.job]
        family = contract.accel_family(c.accel)
        assert job.stable_abi and job.id == f"stable2.10-{family}-{c.platform}", c
        assert f"torch{c.torch}-{c.accel}" in job.serves
        assert job.variant.serves(contract.Variant.parse(f"torch{c.torch}-{c.accel}"))


def test_stable_cuda_job_fields(plan, data: compat.CompatData) -> None:
    cu13 = plan.job("stable2.10-cu13-linux-x86_64")
    assert cu13.variant == contract.StableVariant("cu13") and cu13.stable_abi
    # the newest CUDA 13 a supported torch ships (13.2: torch 2.12-2.15), built against the newest
    # torch minor with it whose data is not inferred (2.15 is confidence "low"): torch 2.14.1+cu132
    assert (cu13.cuda, cu13.torch, cu13.accel, cu13.torch_version) == ("13.2", "2.14", "cu132", "2.14.1")
    assert cu13.torch_index_url.endswith("/cu132")
    assert cu13.cuda_archs == "7.5;8.0;8.6;9.0;10.0;12.0+PTX"
    assert cu13.wheel_filename == "causal_conv1d-1.7.0.post1+cu13.stable2.10-cp39-abi3-manylinux_2_28_x86_64.whl"
    assert set(cu13.serves) == {
        f"torch{m}-{a}"
        for m in ("2.10", "2.11", "2.12", "2.13", "2.14", "2.15")
        for a in ("cu130", "cu132")
        if a in data.torch[m].builds
    }
    d = cu13.to_dict()
    assert d["stable_abi"] is True and d["family"] == "cu13" and d["requires_torch"] == "torch>=2.10"
    assert d["variant"] == "stable2.10-cu13" and "torch2.10-cu130" in d["serves"]
    env = cu13.environment["CIBW_ENVIRONMENT"]
    assert 'CAUSAL_CONV1D_STABLE_ABI="TRUE"' in env
    assert 'CAUSAL_CONV1D_LOCAL_VERSION="cu13.stable2.10"' in env
    assert 'TORCH_CUDA_ARCH_LIST="7.5;8.0;8.6;9.0;10.0;12.0+PTX"' in env
    assert cu13.environment["CIBW_BEFORE_ALL"] == "bash scripts/install-cuda-manylinux.sh 13.2"
    assert '"torch==2.14.1" --index-url https://download.pytorch.org/whl/cu132' in cu13.environment["CIBW_BEFORE_BUILD"]

    cu12 = plan.job("stable2.10-cu12-linux-x86_64")
    # CUDA 12 on torch >= 2.10: cu126 (2.10-2.15) and cu128 (2.10, 2.11): toolkit 12.8, torch 2.11.0+cu128;
    # the arch list is the union, so cu126 users on sm_53/60 keep their kernels
    assert (cu12.cuda, cu12.torch_version, cu12.accel) == ("12.8", "2.11.0", "cu128")
    assert cu12.cuda_archs == "5.3;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX"
    assert "torch2.15-cu126" in cu12.serves and "torch2.10-cu128" in cu12.serves
    assert plan.job("stable2.10-cu12-linux-aarch64").cuda_archs == "8.0;9.0;10.0;12.0+PTX"
    assert plan.job("stable2.10-cu13-linux-aarch64").cuda_archs == "8.0;9.0;10.0;11.0;12.0+PTX"
    for job in (j for j in plan.jobs if j.stable_abi and j.cuda):
        assert job.cuda_archs.count("+PTX") == 1 and job.cuda_archs.endswith("+PTX")


def test_stable_cpu_job_fields(plan) -> None:
    cpu = plan.job("stable2.10-cpu-linux-x86_64")
    assert (cpu.cuda, cpu.cuda_archs, cpu.torch_version, cpu.python) == (None, "", "2.14.1", "3.10")
    assert cpu.covers_pythons == ("3.10", "3.11", "3.12", "3.13", "3.14", "3.15")  # 3.15: torch 2.15
    env = cpu.environment
    assert 'CAUSAL_CONV1D_SKIP_CUDA_BUILD="TRUE"' in env["CIBW_ENVIRONMENT"]
    assert 'CAUSAL_CONV1D_LOCAL_VERSION="cpu.stable2.10"' in env["CIBW_ENVIRONMENT"]
    assert "check --job stable2.10-cpu-linux-x86_64" in env["CIBW_REPAIR_WHEEL_COMMAND"]


def test_stable_build_choice_ignores_filters(plan, data: compat.CompatData) -> None:
    narrow = make_plan(data, torch="2.12", accels="cu126", platforms="linux-x86_64")
    assert [j.id for j in narrow.jobs] == ["stable2.10-cu12-linux-x86_64"]
    assert narrow.jobs[0].to_dict() == plan.job("stable2.10-cu12-linux-x86_64").to_dict()


def test_a_new_torch_release_adds_no_job(data: compat.CompatData, tmp_path) -> None:
    text = compat.DEFAULT_DATA_PATH.read_text()
    entry = text[text.index('[torch."2.15"]') :]
    newer = tmp_path / "newer.toml"
    newer.write_text(
        text + "\n" + entry.replace('"2.15"', '"2.16"').replace('"2.15.0"', '"2.16.0"').replace("2.15.0", "2.16.0")
    )
    grown = make_plan(compat.load(newer))
    now = make_plan(data)
    assert [j.id for j in grown.jobs] == [j.id for j in now.jobs]
    for a, b in zip(grown.jobs, now.jobs):
        assert a.environment == b.environment  # no rebuild: the same wheels serve torch 2.16
    assert "torch2.16-cu130" in grown.job("stable2.10-cu13-linux-x86_64").serves


def test_resolve_job_takes_per_minor_ids(data: compat.CompatData) -> None:
    from build_matrix.plan import resolve_job

    assert resolve_job(data, "stable2.10-cpu-linux-x86_64").stable_abi
    legacy = resolve_job(data, "torch2.13-cpu-linux-x86_64")  # a legacy build to compare with, on request
    assert not legacy.stable_abi and legacy.variant == contract.Variant.parse("torch2.13-cpu")
    with pytest.raises(UnknownJob):
        resolve_job(data, "torch2.13-cpu-linux-x86")


def test_stable_toolkit_prefers_known_torch(tmp_path) -> None:
    text = compat.DEFAULT_DATA_PATH.read_text()
    # mark 2.14 inferred too: 2.13 (high) is then the newest well-known minor with cu132
    f = tmp_path / "d.toml"
    f.write_text(
        text.replace(
            'IDX: torch-2.14.1+cu126 for win_amd64 and manylinux_2_28_aarch64 quoted"\nconfidence = "high"',
            'IDX: torch-2.14.1+cu126 for win_amd64 and manylinux_2_28_aarch64 quoted"\nconfidence = "low"',
        )
    )
    job = make_plan(compat.load(f)).job("stable2.10-cu13-linux-x86_64")
    assert (job.torch_version, job.cuda) == ("2.13.0", "13.2")
