"""``python -m release test-wheel WHEEL``: a built wheel, installed with its torch into a fresh venv.

What release.yml's test job runs on CPU runners for every built wheel: a fresh venv; pip installs
the wheel (torch from the variant's PyTorch index); the op is run against the reference; the
build record and the import guard are checked (``python -m causal_conv1d doctor --json``); then
the CPU test suite runs from a scratch copy of the tests, so the source tree is never imported.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Optional

import causal_conv1d_contract as contract
from release import install as inst
from release.commands import Runner
from release.errors import StepFailed, UsageError
from release.pipeline import PipelineResult, Step, run_pipeline

__all__ = ["WheelTestOptions", "WheelTest", "TEST_REQUIREMENTS"]

REPO_ROOT = Path(__file__).resolve().parent.parent
#: A test module importing one of these tests the build tooling of the source tree, not the wheel.
_TOOLING_IMPORT = re.compile(r"^\s*(?:from|import)\s+(?:build_support|build_matrix|index_site|release)\b", re.M)
#: What the CPU test suite needs besides torch and the wheel.
TEST_REQUIREMENTS = ("pytest>=8", "numpy", "expecttest", "hypothesis")


@dataclasses.dataclass(frozen=True)
class WheelTestOptions:
    wheel: Path
    work_dir: Optional[Path] = None  # default: a temporary directory, removed afterwards
    torch_index_url: Optional[str] = None  # PyTorch's index of the wheel's accel
    torch_spec: Optional[str] = (
        None  # install this torch with the wheel ("torch==2.10.*": a stable wheel on another torch)
    )
    tests: tuple[Path, ...] = ()  # test files/folders (relative to the repo root) to run
    pytest_args: tuple[str, ...] = ("-m", "not gpu and not slow", "-q")
    python: Path = Path(sys.executable)


class WheelTest:
    def __init__(self, options: WheelTestOptions, runner: Runner, *, stream: IO[str] = sys.stdout) -> None:
        self.o = options
        self.runner = runner
        self.stream = stream
        try:
            self.name = contract.parse_wheel_name(options.wheel.name)
        except contract.InvalidWheelName as exc:
            raise UsageError(str(exc)) from None
        if not options.wheel.is_file():
            raise UsageError(f"Invalid wheel path (no such file): {options.wheel}")
        for t in options.tests:
            if not (REPO_ROOT / t).exists():
                raise UsageError(f"Invalid --tests path (not in the repository): {t}")
        self.work = options.work_dir or Path(tempfile.mkdtemp(prefix="causal-conv1d-wheeltest-"))

    @property
    def venv(self) -> Path:
        return self.work / "venv"

    def _log(self, key: str) -> Path:
        return self.work / "logs" / f"{key}.log"

    def steps(self) -> list[Step]:
        steps = [
            Step("venv", "create a fresh venv", self.step_venv),
            Step("install", f"install {self.o.wheel.name} with its torch", self.step_install),
            Step("run", "run the op against the reference", self.step_run),
            Step("guard", "check the build record and the import guard (doctor)", self.step_guard),
        ]
        if self.o.tests:
            steps.append(Step("tests", "run the CPU test suite against the installed wheel", self.step_tests))
        return steps

    def run(self) -> PipelineResult:
        self.work.mkdir(parents=True, exist_ok=True)
        inst.remove_tree(self.venv)
        return run_pipeline(self.steps(), name=f"wheel test of {self.o.wheel.name}", stream=self.stream)

    def step_venv(self) -> str:
        self.runner.run([str(self.o.python), "-m", "venv", str(self.venv)], log=self._log("venv"))
        return str(self.venv)

    def step_install(self) -> str:
        py = str(inst.venv_python(self.venv))
        argv = [py, "-m", "pip", "install", "--disable-pip-version-check", str(self.o.wheel.resolve())]
        if self.o.torch_index_url:
            argv += ["--extra-index-url", self.o.torch_index_url]
        if self.o.torch_spec:
            argv.append(self.o.torch_spec)
        if self.o.tests:
            argv += list(TEST_REQUIREMENTS)
        self.runner.run(argv, log=self._log("install"))
        pin = _torch_pin(self.name.variant)
        return f"torch requirement {pin}" + (f", with {self.o.torch_spec}" if self.o.torch_spec else "")

    def _scratch(self) -> Path:
        scratch = self.work / "scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        return scratch

    def step_run(self) -> str:
        script = self._scratch() / "smoke.py"
        script.write_text(inst.SMOKE_SCRIPT, encoding="utf-8")
        out = self.runner.run(
            [str(inst.venv_python(self.venv)), "-I", str(script)],
            log=self._log("run"),
            cwd=self._scratch(),
            capture=True,
        ).stdout
        data = inst.check_smoke_output(
            out, variant=self.name.variant.name, step="run", forbidden_root=REPO_ROOT / "causal_conv1d"
        )
        if data["version"] != str(self.name.version):
            raise StepFailed("run", f"installed version {data['version']} is not the wheel's {self.name.version}")
        return inst.summarize_checks(data["checks"])

    def step_guard(self) -> str:
        out = self.runner.run(
            [str(inst.venv_python(self.venv)), "-I", *inst.DOCTOR_ARGS],
            log=self._log("guard"),
            cwd=self._scratch(),
            capture=True,
            check=False,  # doctor exits 1 for any problem it lists; the verdict below decides
        ).stdout
        return inst.check_doctor_output(out, step="guard")

    def step_tests(self) -> str:
        root = self._scratch() / "suite"
        inst.remove_tree(root)
        root.mkdir(parents=True)
        for name in ("pyproject.toml", "tests/conftest.py"):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, root / name)
        targets = []
        for t in self.o.tests:
            src, dst = REPO_ROOT / t, root / t
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(src, dst)
            targets.append(str(t))
        # Tests of the build tooling import it from the source tree, which is not here on purpose.
        tooling = sorted(
            str(p.relative_to(root))
            for p in root.glob("tests/**/test_*.py")
            if _TOOLING_IMPORT.search(p.read_text("utf-8"))
        )
        ignores = [f"--ignore={t}" for t in tooling]
        argv = [str(inst.venv_python(self.venv)), "-m", "pytest", *self.o.pytest_args, *ignores, *targets]
        self.runner.run(argv, log=self._log("tests"), cwd=root)
        left_out = f" (left out, they test the source tree's build tools: {', '.join(tooling)})" if tooling else ""
        return f"pytest {' '.join(targets)} passed{left_out}"


def _torch_pin(variant: contract.BuildVariant) -> str:
    """``torch>=2.7,<2.8``; a stable-ABI wheel's ``torch>=2.10`` (no upper bound)."""
    if isinstance(variant, contract.StableVariant):
        return contract.torch_requirement(variant.target, stable=True)
    return contract.torch_requirement(variant.torch_minor)


def parse_tests(values: Optional[Sequence[str]]) -> tuple[Path, ...]:
    return tuple(Path(v) for v in (values or ()))
