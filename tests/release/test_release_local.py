"""The local release's orchestration, with a fake runner: commands, order, outputs, failures."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Optional

import pytest
from release_fakes import FakeRunner, arg_after, doctor_json, machine, make_plan, smoke_json, write_fake_wheel

import causal_conv1d_contract as contract
from release.local import REPO_ROOT, LocalOptions, LocalRelease

PORT = 5555
BASE = f"http://127.0.0.1:{PORT}/"


class World:
    """A fake machine: handlers that act like build_matrix, index_site, pip and the smoke script."""

    def __init__(self, tmp: Path, plan: dict[str, Any]) -> None:
        self.tmp = tmp
        self.plan = plan
        self.installed_from: Optional[str] = None  # override the URL pip reports
        self.smoke_ok = True
        self.doctor_status = "ok"
        self.fail: dict[str, int] = {}  # runner key -> exit status
        self.runner = FakeRunner(
            {
                "build_matrix plan": self.plan_cmd,
                "build_matrix coverage": self.coverage,
                "build_matrix build": self.build,
                "build_matrix check": self.simple("build_matrix check"),
                "index_site build": self.publish,
                "index_site verify": self.simple("index_site verify"),
                "venv": self.simple("venv"),
                "pip": self.pip,
                "script": self.smoke,
                "causal_conv1d": lambda argv, kw: doctor_json(self.installed_variant(), status=self.doctor_status),
            }
        )
        self.pages: dict[str, str] = {}
        self.base = BASE  # where the fake server is (the port the run will pick)

    def simple(self, key: str):
        return lambda argv, kw: self.fail.get(key)

    def plan_cmd(self, argv, kw):
        return self.fail.get("build_matrix plan") or json.dumps(self.plan)

    def build(self, argv, kw):
        if "build_matrix build" in self.fail:
            return self.fail["build_matrix build"]
        job = arg_after(argv, "--job")
        variant = job.rsplit("-linux-", 1)[0]
        write_fake_wheel(Path(arg_after(argv, "--out")), variant, "manylinux_2_28_x86_64")
        Path(arg_after(argv, "--report")).write_text(json.dumps({"compile_s": 75.0}))
        return None

    def coverage(self, argv, kw):
        """Like build_matrix coverage --format json: rows of the torch >= 2.10 variants (no cells needed)."""
        rows = [{"variant": v, "cells": {}} for v in ("torch2.13-cpu", "torch2.14-cpu", "torch2.14-cu130")]
        Path(arg_after(argv, "--output")).write_text(json.dumps({"platforms": ["linux-x86_64"], "rows": rows}))
        return self.fail.get("build_matrix coverage")

    def publish(self, argv, kw):
        """Like index_site build: each wheel on its own page; a stable one also on the pages it serves."""
        if "index_site build" in self.fail:
            return self.fail["index_site build"]
        wheels, site = Path(argv[argv.index("build") + 1]), Path(arg_after(argv, "--out"))
        served = [r["variant"] for r in json.loads(Path(arg_after(argv, "--coverage")).read_text())["rows"]]
        site.mkdir(parents=True, exist_ok=True)
        (site / "index.html").write_text("landing page")
        for wheel in wheels.glob("*.whl"):
            variant = contract.parse_wheel_name(wheel.name).variant
            names = [variant.name]
            if isinstance(variant, contract.StableVariant):
                names += [n for n in served if variant.serves(contract.Variant.parse(n))]
            for name in names:
                page = site / "whl" / name / contract.PROJECT_NAME / "index.html"
                page.parent.mkdir(parents=True, exist_ok=True)
                page.write_text(f'<a href="../../../files/{contract.quote_path(wheel.name)}">{wheel.name}</a>')
                self.pages[f"{self.base}whl/{name}/{contract.PROJECT_NAME}/"] = page.read_text()
        return None

    def pip(self, argv, kw):
        if "pip" in self.fail:
            return self.fail["pip"]
        wheel = self.tmp / "work" / "wheels" / self.installed_wheel()
        url = self.installed_from or f"{self.base}files/{contract.quote_path(wheel.name)}"
        report = {
            "install": [
                {
                    "metadata": {"name": "torch", "version": "2.13.0+cpu"},
                    "download_info": {"url": "file:///opt/wheels/t.whl"},
                },
                {
                    "metadata": {"name": "causal_conv1d", "version": "1.7.0.post1+cpu.torch2.13"},
                    "download_info": {"url": url, "archive_info": {"hashes": {"sha256": "ab" * 32}}},
                },
            ]
        }
        Path(arg_after(argv, "--report")).write_text(json.dumps(report))
        return None

    def smoke(self, argv, kw):
        return smoke_json(self.installed_variant(), ok=self.smoke_ok)

    def installed_wheel(self) -> str:
        """The wheel the page pip was given links (what pip would install)."""
        pip = next(c for c in self.runner.calls if FakeRunner.key(c) == "pip")
        page = self.pages[arg_after(pip, "--extra-index-url") + contract.PROJECT_NAME + "/"]
        return page.split(">", 1)[1].split("<", 1)[0]

    def installed_variant(self) -> str:
        return contract.parse_wheel_name(self.installed_wheel()).variant.name

    def release(self, *, nvcc: bool = True, **opts: Any) -> tuple[LocalRelease, io.StringIO]:
        stream = io.StringIO()
        options = LocalOptions(work_dir=self.tmp / "work", **opts)
        rel = LocalRelease(
            options,
            self.runner,
            machine(nvcc="/usr/local/cuda/bin/nvcc" if nvcc else None),
            stream=stream,
            http_get=self.http_get,
            port_picker=lambda: PORT,
            reachable=lambda url: False,
        )
        return rel, stream

    def http_get(self, url: str) -> str:
        if url not in self.pages:
            raise OSError(f"404 {url}")
        return self.pages[url]


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path, make_plan())


def test_defaults_build_both_variants_and_install_the_cpu_wheel(world: World) -> None:
    rel, stream = world.release()
    result = rel.run()
    text = stream.getvalue()
    assert result.ok, text
    assert world.runner.keys() == [
        "build_matrix plan",
        "build_matrix coverage",
        "build_matrix build",
        "build_matrix build",
        "build_matrix check",
        "build_matrix check",
        # no second "build_matrix coverage": publish reuses the plan step's coverage.json
        "index_site build",
        "index_site serve",
        "index_site verify",
        "venv",
        "pip",
        "script",
        "causal_conv1d",
    ]
    builds = [c for c in world.runner.calls if FakeRunner.key(c) == "build_matrix build"]
    assert [arg_after(c, "--job") for c in builds] == ["stable2.10-cpu-linux-x86_64", "stable2.10-cu13-linux-x86_64"]
    assert "--native" in builds[0] and "--cuda-archs" not in builds[0]
    # the stable CPU wheel compiles against this machine's torch 2.13 (the plan's is 2.14.1); CUDA: the plan's
    assert arg_after(builds[0], "--torch-spec") == "torch==2.13.*" and "--torch-spec" not in builds[1]
    assert arg_after(builds[1], "--cuda-archs") == "9.0"  # the small default arch list
    checks = [c for c in world.runner.calls if FakeRunner.key(c) == "build_matrix check"]
    assert [arg_after(c, "--job") for c in checks] == [arg_after(c, "--job") for c in builds]
    assert "--cuda-archs" not in checks[0] and arg_after(checks[1], "--cuda-archs") == "9.0"  # what we built
    assert sorted(Path(c[-1]).name for c in checks) == sorted(p.name for p in (world.tmp / "work/wheels").glob("*.whl"))
    serve = world.runner.started[0]
    assert serve.argv[-2:] == ["--port", str(PORT)] and serve.stopped
    publish = next(c for c in world.runner.calls if FakeRunner.key(c) == "index_site build")
    assert arg_after(publish, "--coverage").endswith("coverage.json")  # the pages of torch >= 2.10 link it
    pip = next(c for c in world.runner.calls if FakeRunner.key(c) == "pip")
    # installed from the page of this machine's torch minor (the command users have), that torch pinned
    assert arg_after(pip, "--extra-index-url") == f"{BASE}whl/torch2.13-cpu/"
    assert arg_after(pip, "--only-binary") == "causal-conv1d" and pip[-2:] == ["causal-conv1d", "torch==2.13.*"]
    assert pip.count("--extra-index-url") == 1  # PyTorch's index unreachable: pip's own indexes for torch
    pip_env = world.runner.kwargs[world.runner.calls.index(pip)]["env"]
    assert "127.0.0.1" in pip_env["NO_PROXY"]  # the local index never goes through a proxy
    # progress, timings and the total
    assert "[1/7] plan the build matrix" in text and "[7/7] import and run the op" in text
    assert "compile time 1 min 15 s" in text
    assert "local release finished: 7 steps in" in text
    assert "stopped the index server" in text
    report = json.loads((world.tmp / "work/report.json").read_text())
    assert report["ok"] and report["installed"]["variant"] == "stable2.10-cpu"
    assert report["installed"]["filename"].startswith("causal_conv1d-1.7.0.post1+cpu.stable2.10-")
    assert report["installed"]["url"].startswith(BASE)
    assert report["compile_seconds"] == {"stable2.10-cpu-linux-x86_64": 75.0, "stable2.10-cu13-linux-x86_64": 75.0}
    assert json.loads((world.tmp / "work/plan.json").read_text())["jobs"]
    # the page is built for the local site it is served from, with the project's coverage
    publish = next(c for c in world.runner.calls if FakeRunner.key(c) == "index_site build")
    assert arg_after(publish, "--site-url") == BASE
    assert arg_after(publish, "--coverage") == str(world.tmp / "work" / "coverage.json")
    # the summary ends with where the site and the report are and how to serve the site again
    work = (world.tmp / "work").resolve()
    assert text.rstrip("\n").splitlines()[-3:] == [
        f"site:    {work / 'site'}",
        f"report:  {work / 'report.json'}",
        f"serve:   cd {REPO_ROOT} && {rel.o.python} -m index_site serve {work / 'site'} --port {PORT}   (then open {BASE})",
    ]


def test_without_nvcc_only_the_cpu_variant(world: World) -> None:
    rel, stream = world.release(nvcc=False)
    assert rel.run().ok
    assert world.runner.keys().count("build_matrix build") == 1
    assert "stable2.10-cu13 left out: no nvcc found" in stream.getvalue()


def test_a_per_minor_variant_of_torch_2_10_plus_plans_without_stable_jobs(world: World) -> None:
    rel, stream = world.release(variants=("torch2.13-cpu",))
    assert rel.run().ok, stream.getvalue()
    plan = next(c for c in world.runner.calls if FakeRunner.key(c) == "build_matrix plan")
    assert "--no-stable-abi" in plan and "planning without stable-ABI jobs" in stream.getvalue()
    build = next(c for c in world.runner.calls if FakeRunner.key(c) == "build_matrix build")
    assert "--torch-spec" not in build  # a per-minor job installs its own torch
    pip = next(c for c in world.runner.calls if FakeRunner.key(c) == "pip")
    assert pip[-1] == "causal-conv1d"


def test_the_stable_wheel_must_be_on_the_torch_minor_page(world: World) -> None:
    real = world.coverage
    world.coverage = lambda argv, kw: (
        (real(argv, kw), Path(arg_after(argv, "--output")).write_text('{"rows": []}'))[1] and None
    )
    world.runner.handlers["build_matrix coverage"] = world.coverage
    rel, _ = world.release(nvcc=False)
    result = rel.run()
    assert result.failed is not None and result.failed.key == "publish"
    assert "whl/torch2.13-cpu/causal-conv1d/index.html" in result.failed.detail


def test_options_reach_the_commands(world: World) -> None:
    rel, _ = world.release(
        variants=("torch2.14-cu130", "torch2.14-cpu"), cuda_archs="8.0;9.0", max_jobs=3, torch_index_url="", port=6000
    )
    world.base = "http://127.0.0.1:6000/"
    rel.port_picker = lambda: pytest.fail("an explicit --port must be used")  # type: ignore[assignment]
    assert rel.run().ok
    builds = [c for c in world.runner.calls if FakeRunner.key(c) == "build_matrix build"]
    assert [arg_after(c, "--job") for c in builds] == ["torch2.14-cpu-linux-x86_64", "torch2.14-cu130-linux-x86_64"]
    assert arg_after(builds[1], "--cuda-archs") == "8.0;9.0"
    assert all(arg_after(c, "--max-jobs") == "3" and arg_after(c, "--torch-index-url") == "" for c in builds)
    pip = next(c for c in world.runner.calls if FakeRunner.key(c) == "pip")
    assert arg_after(pip, "--extra-index-url") == "http://127.0.0.1:6000/whl/torch2.14-cpu/"


def test_wheels_from_skips_the_build(world: World, tmp_path: Path) -> None:
    prebuilt = tmp_path / "prebuilt"
    write_fake_wheel(prebuilt, "torch2.13-cpu", "linux_x86_64")
    write_fake_wheel(prebuilt, "torch2.14-cpu", "linux_x86_64")  # not selected: ignored
    rel, stream = world.release(variants=("torch2.13-cpu",), wheels_from=prebuilt)
    assert rel.run().ok, stream.getvalue()
    assert "build_matrix build" not in world.runner.keys()
    assert [p.name for p in (tmp_path / "work/wheels").glob("*.whl")] == [next(prebuilt.glob("*torch2.13*")).name]
    assert "take prebuilt wheels" in stream.getvalue()


def test_wheels_from_without_the_variant_fails_at_build(world: World, tmp_path: Path) -> None:
    prebuilt = tmp_path / "prebuilt"
    write_fake_wheel(prebuilt, "torch2.14-cpu")
    rel, stream = world.release(variants=("torch2.13-cpu",), wheels_from=prebuilt)
    result = rel.run()
    assert result.failed is not None and result.failed.key == "build"
    assert "expected one torch2.13-cpu wheel for linux-x86_64" in result.failed.detail
    assert "FAILED at step 2/7 'take prebuilt wheels'" in stream.getvalue()


@pytest.mark.parametrize(
    ("key", "step"),
    [
        ("build_matrix plan", "plan"),
        ("build_matrix build", "build"),
        ("build_matrix check", "check"),
        ("index_site build", "publish"),
        ("index_site verify", "serve"),
        ("pip", "install"),
    ],
)
def test_a_failing_command_stops_at_its_step(world: World, key: str, step: str) -> None:
    world.fail[key] = 3
    rel, stream = world.release(nvcc=False)
    result = rel.run()
    assert result.failed is not None and result.failed.key == step
    assert "status 3" in result.failed.detail
    statuses = {s.key: s.status for s in result.steps}
    order = ["plan", "build", "check", "publish", "serve", "install", "run"]
    after = order[order.index(step) + 1 :]
    assert all(statuses[k] == "not run" for k in after)
    assert all(p.stopped for p in world.runner.started)  # the server never outlives the run
    report = json.loads((world.tmp / "work/report.json").read_text())
    assert report["ok"] is False and report["failed_step"] == step
    # the closing lines offer to serve the site only when this run wrote it (publish ran)
    tail = stream.getvalue().rsplit("\nsite:", 1)[1]
    if order.index(step) <= order.index("publish"):
        assert "(not written: nothing to serve)" in tail and "serve:" not in tail
    else:
        assert "\nserve:   " in tail


@pytest.mark.parametrize(
    "attr,value,step,message",
    [
        # installed from elsewhere
        (
            "installed_from",
            "https://pypi.org/packages/causal_conv1d-1.7.0.post1+cpu.torch2.13-cp39-abi3-linux_x86_64.whl",
            "install",
            "not from the local index",
        ),
        ("smoke_ok", False, "run", "differs from the reference"),  # wrong numbers
        ("doctor_status", "mismatch", "run", "import guard reports the build record as 'mismatch'"),
    ],
)
def test_a_wrong_result_fails_its_step(world: World, attr: str, value: object, step: str, message: str) -> None:
    setattr(world, attr, value)
    rel, _ = world.release(nvcc=False)
    result = rel.run()
    assert result.failed is not None and result.failed.key == step
    assert message in result.failed.detail


def test_server_that_dies_fails_serve(world: World) -> None:
    rel, _ = world.release(nvcc=False)
    original_start = world.runner.start

    def dying_start(argv, **kw):
        proc = original_start(argv, **kw)
        proc.exit_status = 1
        return proc

    world.runner.start = dying_start  # type: ignore[method-assign]
    result = rel.run()
    assert result.failed is not None and result.failed.key == "serve"
    assert "exited with status 1" in result.failed.detail


def test_invalid_plan_json_fails_plan(world: World) -> None:
    world.runner.handlers["build_matrix plan"] = lambda argv, kw: "not json"
    rel, _ = world.release()
    result = rel.run()
    assert result.failed is not None and result.failed.key == "plan"
    assert "invalid JSON" in result.failed.detail


def test_work_dir_is_reset_but_foreign_files_are_kept(world: World) -> None:
    work = world.tmp / "work"
    (work / "wheels").mkdir(parents=True)
    stale = write_fake_wheel(work / "wheels", "torch2.14-cpu")
    (work / "notes.txt").write_text("mine")
    rel, _ = world.release(nvcc=False)
    assert rel.run().ok
    assert not stale.exists()  # an old run's wheel is not republished
    assert (work / "notes.txt").read_text() == "mine"
