"""``python -m release local``: the release pipeline rehearsed on this machine.

plan -> build (native) -> check -> publish (index_site) -> serve -> install (fresh venv, pip)
-> run the op against the reference; the server is always stopped at the end.

The default wheels are the stable-ABI ones (``stable2.10-cpu``, and ``stable2.10-cu13`` with nvcc 13):
the CPU one is built against the CPU torch this machine has (``--cpu-torch-spec``, default
``torch==2.13.*``; the plan's build torch is 2.14.1), published with build_matrix's coverage so that
the per-minor pages link it, and installed from the page of that torch minor (``whl/torch2.13-cpu/``,
the command users already have) with that torch pinned. Every command's
output lands in ``<work-dir>/logs/NN-step.log``; ``<work-dir>/report.json`` records the steps,
their timings and the result.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import sys
import time
import urllib.error
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Callable, Optional

import causal_conv1d_contract as contract
from causal_conv1d_contract import net
from causal_conv1d_contract.net import index_reachable
from release import install as inst
from release.commands import CommandResult, Process, Runner
from release.errors import CommandFailed, StepFailed, UsageError
from release.machine import Machine, wheel_job_platform
from release.pipeline import PipelineResult, Step, format_seconds, run_pipeline
from release.select import DEFAULT_CPU_VARIANT, PlanJob, PlanJSON, Selection, plan_summary, select_jobs

__all__ = ["LocalOptions", "LocalRelease", "REPO_ROOT", "DEFAULT_WORK_DIR", "DEFAULT_CUDA_ARCHS", "free_port"]

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WORK_DIR = Path("out/local-release")
#: One architecture keeps a CUDA 13 build within minutes on 2 cores; sm_90 is the H200's.
DEFAULT_CUDA_ARCHS = "9.0"
#: The subdirectories a run owns and recreates (nothing else in the work dir is touched).
#: PyTorch's package index; ``/<accel>/`` is a variant's torch.
PYTORCH_INDEX = "https://download.pytorch.org/whl"
_OWNED = ("logs", "build", "wheels", "site", "venv", "scratch", "coverage.json")


@dataclasses.dataclass(frozen=True)
class LocalOptions:
    work_dir: Path = DEFAULT_WORK_DIR
    variants: Optional[tuple[str, ...]] = None  # None: the defaults for this machine
    cuda: bool = True
    cuda_archs: str = DEFAULT_CUDA_ARCHS
    wheels_from: Optional[Path] = None  # take prebuilt wheels from here instead of building
    port: int = 0  # 0: a free port
    python: Path = Path(sys.executable)  # runs build_matrix / index_site and creates the venv
    install_variant: Optional[str] = None  # which wheel to install; default: the CPU one
    torch_index_url: Optional[str] = None  # torch's index for builds and the install; None: auto, "": pip's own
    max_jobs: Optional[int] = None
    server_timeout: float = 30.0
    #: The torch a stable-ABI CPU job compiles against (and the venv installs): the one on this machine.
    cpu_torch_spec: Optional[str] = "torch==2.13.*"
    #: The torch a stable-ABI CUDA job compiles against; None: the plan's (torch_version from its index).
    cuda_torch_spec: Optional[str] = None


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (bound and released: the server binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _reachable(url: str, timeout: float = 5.0) -> bool:
    return index_reachable(url, timeout)


def _cuda_job(job: PlanJob) -> bool:
    """Whether a plan job (its JSON) builds CUDA kernels."""
    return bool(job.get("cuda"))


def _pinned_minor(spec: Optional[str]) -> Optional[str]:
    """``torch==2.13.*`` -> ``2.13``; None when the spec pins no minor."""
    import re

    m = re.match(r"^\s*torch\s*==\s*(\d+)\.(\d+)", spec or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _local_env() -> dict[str, str]:
    """Environment for commands that talk to the local server: never through a proxy."""
    hosts = "127.0.0.1,localhost"
    env = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONUNBUFFERED": "1"}
    for var in ("NO_PROXY", "no_proxy"):
        current = os.environ.get(var, "")
        env[var] = f"{current},{hosts}" if current else hosts
    return env


class LocalRelease:
    """The local release; ``run()`` returns the pipeline result (it never raises for a step)."""

    def __init__(
        self,
        options: LocalOptions,
        runner: Runner,
        machine: Machine,
        *,
        stream: IO[str] = sys.stdout,
        http_get: Optional[Callable[[str], str]] = None,
        port_picker: Callable[[], int] = free_port,
        reachable: Optional[Callable[[str], bool]] = None,
    ) -> None:
        self.o = options
        self.runner = runner
        self.machine = machine
        self.stream = stream
        self.http_get = http_get or self._http_get
        self.port_picker = port_picker
        self.reachable = reachable or _reachable
        self.work = options.work_dir.resolve()  # commands run in other folders (the smoke test's scratch)
        # the work folder's layout
        self.wheels_dir, self.site_dir, self.venv_dir = self.work / "wheels", self.work / "site", self.work / "venv"
        self.report_path, self.coverage_path = self.work / "report.json", self.work / "coverage.json"
        self.plan: Optional[PlanJSON] = None
        self.selection: Optional[Selection] = None
        self.wheels: dict[str, Path] = {}  # job id -> wheel in work/wheels
        self.server: Optional[Process] = None
        self.port: Optional[int] = None
        self.installed: Optional[dict[str, object]] = None  # where pip took the wheel from, and which
        self.smoke: Optional[dict[str, object]] = None  # the smoke script's result
        self.compile_seconds: dict[str, float] = {}
        self._step_no = 0

    # -- paths ---------------------------------------------------------------------------------
    def _log(self, key: str) -> Path:
        return self.work / "logs" / f"{self._step_no:02d}-{key}.log"

    def _say(self, text: str) -> None:
        self.stream.write(f"      {text}\n")
        self.stream.flush()

    def _tool(self, module: str, *args: str | Path) -> list[str]:
        return [str(self.o.python), "-m", module, *[str(a) for a in args]]

    def _run(
        self, key: str, argv: Sequence[str], *, env: Optional[Mapping[str, str]] = None, capture: bool = False
    ) -> CommandResult:
        return self.runner.run(argv, log=self._log(key), cwd=REPO_ROOT, env=env, capture=capture)

    # -- the steps -------------------------------------------------------------------------------
    def steps(self) -> list[Step]:
        def numbered(key: str, fn: Callable[[], Optional[str]]) -> Callable[[], Optional[str]]:
            def action() -> Optional[str]:
                self._step_no = [s.key for s in steps].index(key) + 1
                return fn()

            return action

        build_title = "take prebuilt wheels" if self.o.wheels_from else "build the wheels (native mode)"
        specs = [
            ("plan", "plan the build matrix and pick this machine's jobs", self.step_plan),
            ("build", build_title, self.step_build),
            ("check", "check the wheels", self.step_check),
            ("publish", "publish into a local index site", self.step_publish),
            ("serve", "serve the site on 127.0.0.1 and verify it over HTTP", self.step_serve),
            ("install", "install from the local index into a fresh venv", self.step_install),
            ("run", "import and run the op against the reference", self.step_run),
        ]
        steps = [Step(k, t, numbered(k, fn)) for k, t, fn in specs]
        return steps

    def run(self) -> PipelineResult:
        self.stream.write(
            f"local release of {contract.PROJECT_NAME} {contract.PACKAGE_VERSION} on {self.machine.platform} "
            f"({self.machine.cores} cores, nvcc: {self.machine.cuda_version or 'none'}); work dir {self.work}\n"
        )
        self.stream.flush()
        self._prepare_work_dir()
        result = run_pipeline(self.steps(), name="local release", stream=self.stream, finally_=self.stop_server)
        self._write_report(result)
        self._summary()
        return result

    def serve_command(self) -> str:
        """The command that serves the site again, on the port its landing page's commands name; from the
        checkout, where ``index_site`` imports (the tools venv does not install it)."""
        port = self.port or 8000
        return f"cd {REPO_ROOT} && {self.o.python} -m index_site serve {self.site_dir} --port {port}"

    def _summary(self) -> None:
        """The last lines: where the site and the report are, and how to look at the site."""
        written = (self.site_dir / "index.html").is_file()
        site = self.site_dir if written else f"{self.site_dir} (not written: nothing to serve)"
        # the serve line only for a site this run wrote: a command for a missing site fails when tried
        serve = f"serve:   {self.serve_command()}   (then open {self._url_for_port()})\n" if written else ""
        self.stream.write(f"\nsite:    {site}\nreport:  {self.report_path}\n{serve}")
        self.stream.flush()

    def _url_for_port(self) -> str:
        return f"http://127.0.0.1:{self.port or 8000}/"

    def _prepare_work_dir(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        for name in _OWNED:
            inst.remove_tree(self.work / name)
        (self.work / "logs").mkdir()

    def _per_minor_requested(self) -> bool:
        """Whether --variants names a per-minor variant of a torch the stable ABI serves (torch2.13-cpu):
        the plan is then the per-minor one (``plan --no-stable-abi``), a legacy rehearsal."""
        for name in self.o.variants or ():
            try:
                v = contract.parse_build_variant(name)
            except contract.InvalidVariant:
                continue  # select_jobs names the problem
            if isinstance(v, contract.Variant) and v.torch_minor >= contract.STABLE_TARGET:
                return True
        return False

    def step_plan(self) -> str:
        args = ["plan", "--format", "json"]
        if self._per_minor_requested():
            args.append("--no-stable-abi")
            self._say(
                "--variants names a per-minor variant of torch >= 2.10: planning without stable-ABI jobs "
                "(a legacy build, as before the stable ABI)"
            )
        out = self._run("plan", self._tool("build_matrix", *args), capture=True).stdout
        try:
            plan = json.loads(out)
        except json.JSONDecodeError as exc:
            raise StepFailed("plan", f"`build_matrix plan --format json` printed invalid JSON ({exc})") from None
        self.plan = plan
        _atomic_write(self.work / "plan.json", json.dumps(plan, indent=2, sort_keys=True) + "\n")
        self._say(plan_summary(plan))
        try:
            self.selection = select_jobs(
                plan, self.machine, variants=list(self.o.variants) if self.o.variants else None, cuda=self.o.cuda
            )
        except UsageError as exc:
            raise StepFailed("plan", str(exc)) from None
        for note in self.selection.notes:
            self._say(note)
        # The landing page's coverage grid: the whole project's, as the release workflow publishes it.
        self._run("plan", self._tool("build_matrix", "coverage", "--format", "json", "--output", self.coverage_path))
        return f"{len(self.selection.jobs)} job(s) for this machine: {', '.join(self.selection.ids)}"

    def step_build(self) -> str:
        assert self.selection is not None
        self.wheels_dir.mkdir(parents=True, exist_ok=True)
        done = []
        for job in self.selection.jobs:
            job_id, variant = str(job["id"]), str(job["variant"])
            start = time.monotonic()
            if self.o.wheels_from is not None:
                wheel = self._prebuilt(job)
                how = f"taken from {self.o.wheels_from}"
            else:
                wheel = self._build_one(job)
                how = "built"
            target = self.wheels_dir / wheel.name
            if wheel.resolve() != target.resolve():
                shutil.copy2(wheel, target)
            self.wheels[job_id] = target
            took = format_seconds(time.monotonic() - start)
            self._say(f"{job_id}: {how} {wheel.name} ({target.stat().st_size / 1e6:.1f} MB) in {took}")
            done.append(variant)
        return f"{len(done)} wheel(s): {', '.join(done)}"

    def _build_one(self, job: PlanJob) -> Path:
        job_id = str(job["id"])
        out = self.work / "build" / job_id
        report = self.work / "build" / f"{job_id}.report.json"
        args: list[str | Path] = ["build", "--job", job_id, "--native", "--out", out, "--report", report]
        if _cuda_job(job):
            args += ["--cuda-archs", self.o.cuda_archs]
        spec = self._build_torch_spec(job)
        if spec:
            args += ["--torch-spec", spec]
            self._say(
                f"{job_id}: compiling against {spec} (a stable-ABI wheel builds against any torch >= 2.10 of its family)"
            )
        if self.o.max_jobs:
            args += ["--max-jobs", str(self.o.max_jobs)]
        if self.o.torch_index_url is not None:
            args += ["--torch-index-url", self.o.torch_index_url]
        self._say(f"{job_id}: building (log: {self._log('build')})")
        try:
            self._run("build", self._tool("build_matrix", *args))
        except CommandFailed as exc:
            raise StepFailed("build", f"{job_id}: {exc}") from None
        try:
            compile_s = json.loads(report.read_text(encoding="utf-8")).get("compile_s")
        except (OSError, ValueError):
            compile_s = None
        if isinstance(compile_s, (int, float)):
            self.compile_seconds[job_id] = float(compile_s)
            self._say(f"{job_id}: compile time {format_seconds(float(compile_s))}")
        return self._one_wheel(out, job)

    def _build_torch_spec(self, job: PlanJob) -> Optional[str]:
        """The torch a stable-ABI job compiles against on this machine (None: the plan's)."""
        if not job.get("stable_abi"):
            return None
        return self.o.cuda_torch_spec if _cuda_job(job) else self.o.cpu_torch_spec

    def _one_wheel(self, directory: Path, job: PlanJob) -> Path:
        variant, platform = str(job["variant"]), str(job["platform"])
        matches = []
        for path in sorted(directory.glob("*.whl")):
            try:
                parsed = contract.parse_wheel_name(path.name)
            except contract.InvalidWheelName:
                continue
            if parsed.variant.name == variant and any(wheel_job_platform(p) == platform for p in parsed.platforms):
                matches.append(path)
        if len(matches) != 1:
            found = ", ".join(p.name for p in sorted(directory.glob("*.whl"))) or "no wheels"
            raise StepFailed(
                "build", f"expected one {variant} wheel for {platform} in {directory}, found {len(matches)} ({found})"
            )
        return matches[0]

    def _prebuilt(self, job: PlanJob) -> Path:
        assert self.o.wheels_from is not None
        if not self.o.wheels_from.is_dir():
            raise StepFailed("build", f"--wheels-from {self.o.wheels_from} is not a directory")
        return self._one_wheel(self.o.wheels_from, job)

    def step_check(self) -> str:
        """``build_matrix check --job ID`` per wheel: the name, metadata, build record, contents,
        ABI and (CUDA) the embedded archs -- the archs we built for, when we built it here."""
        assert self.selection is not None
        for job in self.selection.jobs:
            job_id = str(job["id"])
            args: list[str | Path] = ["check", "--job", job_id]
            if _cuda_job(job) and self.o.wheels_from is None:
                args += ["--cuda-archs", self.o.cuda_archs]
            self._run("check", self._tool("build_matrix", *args, self.wheels[job_id]))
        return f"{len(self.wheels)} wheel(s) passed build_matrix check"

    def step_publish(self) -> str:
        # The port is chosen now so that the landing page's commands name the local site it is served from.
        self.port = self.port or self.o.port or self.port_picker()
        # build_matrix's coverage (the plan step writes it): the landing page's grid, and the torch minors
        # whose pages link a stable wheel.
        if not self.coverage_path.is_file():
            self._run(
                "publish", self._tool("build_matrix", "coverage", "--format", "json", "--output", self.coverage_path)
            )
        args: list[str | Path] = [
            "build",
            self.wheels_dir,
            "--out",
            self.site_dir,
            "--site-url",
            self.base_url,
            "--coverage",
            self.coverage_path,
        ]
        self._run("publish", self._tool("index_site", *args))
        missing = []
        for wheel in self.wheels.values():
            variant = contract.parse_wheel_name(wheel.name).variant
            pages = [variant.name]
            if (
                isinstance(variant, contract.StableVariant)
                and variant.family == "cpu"
                and _pinned_minor(self.o.cpu_torch_spec)
            ):
                pages.append(f"torch{_pinned_minor(self.o.cpu_torch_spec)}-cpu")  # the page we install from
            for name in pages:
                page = self.site_dir / contract.project_path(name) / "index.html"
                if not page.is_file():
                    missing.append(str(page))
                elif contract.quote_path(wheel.name) not in page.read_text(encoding="utf-8"):
                    missing.append(f"{page} (does not link {wheel.name})")
        if missing:
            raise StepFailed("publish", f"index_site build wrote no project page at {', '.join(missing)}")
        variants = sorted({contract.parse_wheel_name(w.name).variant.name for w in self.wheels.values()})
        pages = sorted(p.name for p in (self.site_dir / contract.WHEELS_DIR).iterdir() if p.is_dir())
        return (
            f"site at {self.site_dir}: {len(variants)} variant(s) ({', '.join(variants)}) on {len(pages)} "
            f"page(s) ({', '.join(pages)})"
        )

    @property
    def base_url(self) -> str:
        assert self.port is not None
        return f"http://127.0.0.1:{self.port}/"

    def step_serve(self) -> str:
        self.port = self.port or self.o.port or self.port_picker()
        argv = self._tool("index_site", "serve", self.site_dir, "--port", str(self.port))
        self.server = self.runner.start(argv, log=self._log("serve"), cwd=REPO_ROOT)
        deadline = time.monotonic() + self.o.server_timeout
        url = contract.project_page_url(self.base_url, self._install_page())
        while True:
            if self.server.poll() is not None:
                raise StepFailed(
                    "serve", f"the server exited with status {self.server.poll()} (log: {self._log('serve')})"
                )
            try:
                page = self.http_get(url)
                break
            except (OSError, urllib.error.URLError, net.IndexClientError):
                if time.monotonic() > deadline:
                    raise StepFailed("serve", f"no answer from {url} within {self.o.server_timeout:.0f} s") from None
                time.sleep(0.2)
        wheel = self.wheels[self._install_job_id()]
        try:
            listed = {link.filename for link in net.parse_page(page, "text/html", url).links}
        except net.IndexClientError as exc:
            raise StepFailed("serve", f"{url} is not a project page ({exc})") from None
        if wheel.name not in listed:
            raise StepFailed("serve", f"{url} does not list {wheel.name}")
        self._run("serve", self._tool("index_site", "verify", self.base_url), env=_local_env())
        return f"{self.base_url} answers and verifies (pid {getattr(self.server, 'pid', '?')})"

    def _install_page(self) -> contract.BuildVariant:
        """The variant whose index pip installs from: the wheel's; for the stable CPU wheel the torch
        minor it is installed with (``whl/torch2.13-cpu/``): existing commands keep working."""
        variant = contract.parse_wheel_name(self.wheels[self._install_job_id()].name).variant
        minor = _pinned_minor(self.o.cpu_torch_spec)
        if isinstance(variant, contract.StableVariant) and variant.family == "cpu" and minor:
            return contract.Variant.parse(f"torch{minor}-cpu")
        return variant

    def _install_index(self) -> str:
        """The index pip installs from (``<site>/whl/<variant>/``, see :meth:`_install_page`)."""
        return contract.variant_index_url(self.base_url, self._install_page())

    def _install_job_id(self) -> str:
        assert self.selection is not None
        wanted = self.o.install_variant
        if wanted is None:
            cpu = [j for j in self.selection.jobs if str(j["variant"]) == DEFAULT_CPU_VARIANT]
            cpu = cpu or [j for j in self.selection.jobs if str(j["variant"]).endswith("-cpu")]
            chosen = (cpu or list(self.selection.jobs))[0]
            return str(chosen["id"])
        for job in self.selection.jobs:
            if str(job["variant"]) == wanted:
                return str(job["id"])
        raise StepFailed(
            "install", f"--install-variant {wanted!r} is not among the built variants {self.selection.ids}"
        )

    def step_install(self) -> str:
        job_id = self._install_job_id()
        variant = contract.parse_wheel_name(self.wheels[job_id].name).variant
        self._run("install", [str(self.o.python), "-m", "venv", str(self.venv_dir)])
        py = inst.venv_python(self.venv_dir)
        report_path = self.work / "install-report.json"
        index = self._install_index()
        argv = [
            str(py),
            "-m",
            "pip",
            "install",
            "--report",
            str(report_path),
            "--only-binary",
            contract.PROJECT_NAME,
            "--extra-index-url",
            index,
        ]
        job = next(j for j in self.selection.jobs if str(j["id"]) == job_id) if self.selection else {}
        torch_index = self._torch_index(str(job.get("accel") or "cpu"))
        if torch_index:
            argv += ["--extra-index-url", torch_index]
        argv.append(contract.PROJECT_NAME)
        if isinstance(variant, contract.StableVariant) and variant.family == "cpu" and self.o.cpu_torch_spec:
            argv.append(self.o.cpu_torch_spec)  # the torch it was built against: the one on this machine
        self._say(
            f"pip install {contract.PROJECT_NAME} --only-binary {contract.PROJECT_NAME} --extra-index-url {index}"
        )
        self._run("install", argv, env=_local_env())
        try:
            report = json.loads(report_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise StepFailed("install", f"pip wrote no readable --report at {report_path}: {exc}") from None
        origin = inst.install_origin(report, step="install")
        filename = inst.check_origin(origin, index_root=self.base_url, variant=variant.name, step="install")
        self.installed = {**origin, "filename": filename, "variant": variant.name}
        torch = next(
            (
                i["metadata"]["version"]
                for i in report.get("install", [])
                if i.get("metadata", {}).get("name") == "torch"
            ),
            "already present",
        )
        return f"{filename} from {origin['url']} (torch {torch})"

    def _torch_index(self, accel: str) -> str:
        """Where torch comes from: --torch-index-url; else PyTorch's index of the job's accelerator when it
        answers (so a CPU wheel gets the CPU torch); else pip's configured indexes."""
        if self.o.torch_index_url is not None:
            return self.o.torch_index_url
        url = f"{PYTORCH_INDEX}/{accel}/"
        if self.reachable(url):
            return url
        self._say(f"{url} is unreachable from here: torch comes from pip's configured indexes")
        return ""

    def step_run(self) -> str:
        assert self.installed is not None
        scratch = self.work / "scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        script = scratch / "smoke.py"
        _atomic_write(script, inst.SMOKE_SCRIPT)
        py = inst.venv_python(self.venv_dir)
        out = self.runner.run([str(py), "-I", str(script)], log=self._log("run"), cwd=scratch, capture=True).stdout
        data = inst.check_smoke_output(
            out, variant=str(self.installed["variant"]), step="run", forbidden_root=REPO_ROOT / "causal_conv1d"
        )
        self.smoke = data
        doctor = self.runner.run(
            [str(py), "-I", *inst.DOCTOR_ARGS], log=self._log("run"), cwd=scratch, capture=True, check=False
        ).stdout
        guard = inst.check_doctor_output(doctor, step="run")
        return f"{data['version']} with torch {data['torch']}: {inst.summarize_checks(data['checks'])}; {guard}"

    def stop_server(self) -> None:
        if self.server is not None:
            status = self.server.stop()
            self.stream.write(f"\nstopped the index server on port {self.port} (exit status {status})\n")
            self.server = None

    def _http_get(self, url: str) -> str:
        """The page (the local server: no proxy, one short attempt; the caller retries until its deadline)."""
        page = net.fetch_page(url, accept=net.ACCEPT_HTML, timeout=5, retries=1, proxies={})
        return page.body.decode("utf-8", "replace")

    def _write_report(self, result: PipelineResult) -> None:
        report = {
            **result.to_json(),
            "machine": dataclasses.asdict(self.machine)
            | {"nvcc": str(self.machine.nvcc) if self.machine.nvcc else None},
            "jobs": self.selection.ids if self.selection else [],
            "wheels": {k: str(v) for k, v in self.wheels.items()},
            "site": str(self.site_dir),
            "index_url": self.base_url if self.port else None,
            "installed": self.installed,
            "smoke": self.smoke,
            "compile_seconds": self.compile_seconds,
        }
        _atomic_write(self.report_path, json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
