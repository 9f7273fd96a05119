"""Test doubles of the release tests: a fake command runner, canned plans, fake wheels."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import causal_conv1d_contract as contract  # noqa: E402
from release.commands import CommandResult  # noqa: E402
from release.errors import CommandFailed  # noqa: E402
from release.machine import Machine  # noqa: E402

#: The torch a stable-ABI job of the real plan compiles against, per family.
STABLE_BUILD = {"cpu": "torch2.14-cpu", "cu12": "torch2.11-cu128", "cu13": "torch2.14-cu132"}


def make_job(variant: str, platform: str = "linux-x86_64", **extra: Any) -> dict[str, Any]:
    v = contract.parse_build_variant(variant)
    stable = isinstance(v, contract.StableVariant)
    build = contract.Variant.parse(STABLE_BUILD[v.family]) if stable else v
    return {
        "id": f"{variant}-{platform}",
        "variant": variant,
        "torch": build.torch,
        "accel": build.accel,
        "platform": platform,
        "runs_on": "ubuntu-24.04",
        "python": "3.10",
        "cuda": build.cuda,
        "torch_index_url": f"https://download.pytorch.org/whl/{build.accel}",
        "environment": {"CIBW_BUILD": "cp310-manylinux_x86_64"},
        "stable_abi": stable,
        **extra,
    }


def make_plan(
    variants: Sequence[str] = (
        "stable2.10-cpu",
        "stable2.10-cu13",
        "torch2.13-cpu",
        "torch2.14-cu130",
        "torch2.14-cpu",
    ),
    platforms: Sequence[str] = ("linux-x86_64", "windows-amd64"),
) -> dict[str, Any]:
    jobs = [make_job(v, p) for v in variants for p in platforms]
    combos = [
        {
            "torch": j["torch"],
            "accel": j["accel"],
            "python": "3.10",
            "abi": "cxx11",
            "platform": j["platform"],
            "status": "covered",
            "job": j["id"],
            "reason": None,
        }
        for j in jobs
    ]
    combos.append(
        {
            "torch": "2.14",
            "accel": "cu118",
            "python": "3.10",
            "abi": "cxx11",
            "platform": "linux-x86_64",
            "status": "unavailable",
            "job": None,
            "reason": "torch 2.14 has no cu118 build",
        }
    )
    return {"combinations": combos, "jobs": jobs, "summary": {}}


def machine(
    *, nvcc: Optional[str] = "/usr/local/cuda/bin/nvcc", cuda: Optional[str] = "13.0", platform: str = "linux-x86_64"
) -> Machine:
    return Machine(platform=platform, nvcc=Path(nvcc) if nvcc else None, cuda_version=cuda if nvcc else None, cores=2)


@dataclasses.dataclass
class FakeProcess:
    argv: list[str]
    stopped: bool = False
    exit_status: Optional[int] = None  # set: the server "died"
    pid: int = 4242

    def poll(self) -> Optional[int]:
        return 0 if self.stopped else self.exit_status

    def stop(self, timeout: float = 10.0) -> Optional[int]:
        self.stopped = True
        return -15


Handler = Callable[[list[str], Mapping[str, Any]], "str | int | None"]


class FakeRunner:
    """Records commands; ``handlers`` answer them by a key found in the argv.

    A handler returns the captured stdout (str), an exit status (int; non-zero fails), or None.
    """

    def __init__(self, handlers: Optional[dict[str, Handler]] = None) -> None:
        self.handlers = handlers or {}
        self.calls: list[list[str]] = []
        self.kwargs: list[dict[str, Any]] = []
        self.started: list[FakeProcess] = []

    @staticmethod
    def key(argv: Sequence[str]) -> str:
        if "-m" in argv:
            i = argv.index("-m")
            mod = argv[i + 1]
            if mod in ("build_matrix", "index_site"):
                return f"{mod} {argv[i + 2]}"
            return mod  # venv, pip, causal_conv1d
        return "script"  # python -I smoke.py

    def run(
        self, argv: Sequence[str], *, log: Path, env=None, cwd=None, capture: bool = False, check: bool = True
    ) -> CommandResult:
        argv = [str(a) for a in argv]
        self.calls.append(argv)
        self.kwargs.append({"log": log, "env": env, "cwd": cwd, "capture": capture})
        handler = self.handlers.get(self.key(argv))
        out = handler(argv, {"log": log, "env": env, "cwd": cwd}) if handler else None
        rc = out if isinstance(out, int) else 0
        if check and rc != 0:
            raise CommandFailed(argv, rc, log)
        return CommandResult(tuple(argv), rc, out if isinstance(out, str) else "")

    def start(self, argv: Sequence[str], *, log: Path, env=None, cwd=None) -> FakeProcess:
        proc = FakeProcess([str(a) for a in argv])
        self.started.append(proc)
        self.calls.append(proc.argv)
        self.kwargs.append({"log": log, "env": env, "cwd": cwd, "capture": False})
        return proc

    def keys(self) -> list[str]:
        return [self.key(c) for c in self.calls]


def arg_after(argv: Sequence[str], flag: str) -> str:
    return argv[list(argv).index(flag) + 1]


def write_fake_wheel(directory: Path, variant: str, platform_tag: str = "linux_x86_64") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / contract.wheel_filename(
        contract.PACKAGE_VERSION, contract.parse_build_variant(variant), platform_tag
    )
    path.write_bytes(b"PK fake wheel " + variant.encode())
    return path


def smoke_json(
    variant: str, *, ok: bool = True, module: str = "/venv/lib/site-packages/causal_conv1d/__init__.py"
) -> str:
    v = contract.parse_build_variant(variant)
    return json.dumps(
        {
            "module": module,
            "version": f"{contract.PACKAGE_VERSION}+{contract.local_version(v)}",
            "torch": "2.13.0+cpu",
            "build_record": {"variant": variant},
            "checks": [
                {"dtype": "torch.float32", "activation": None, "max_abs_err": 0.0 if ok else 1.0, "tol": 1e-4, "ok": ok}
            ],
        }
    )


def doctor_json(variant: str, *, status: str = "ok", import_ok: bool = True) -> str:
    """What ``python -m causal_conv1d doctor --json`` prints (the parts the release checks)."""
    return json.dumps({
        "torch": {"version": "2.13.0+cpu", "importable": True},
        "build_record": {"status": status, "record": {"variant": variant},
                         "mismatches": [] if status == "ok" else ["torch 2.14 != 2.13"]},
        "import": {"ok": import_ok, "error": None if import_ok else "ImportError: undefined symbol"},
        "problems": [],
    })  # fmt: skip
