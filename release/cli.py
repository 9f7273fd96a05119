"""``python -m release …``: the local release rehearsal and the helpers release.yml runs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional

from causal_conv1d_contract.cli import Handler, add_command, bounded_int, options_from_args
from release import gha
from release.errors import EXIT_STEP, ReleaseError, UsageError

__all__ = ["main"]


def _csv(value: str) -> tuple[str, ...]:
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    if not items:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {value!r}")
    return items


_port = bounded_int(0, 65535, "not a port number: {text!r}", "port out of range 0..65535: {value}")
_positive = bounded_int(1, None, "not a number: {text!r}", "must be at least 1: {value}")


def _command(
    sub: argparse._SubParsersAction[Any], name: str, handler: Handler, **kwargs: Any
) -> argparse.ArgumentParser:
    """A subcommand that, like the top level, takes no abbreviated options."""
    return add_command(sub, name, handler, allow_abbrev=False, **kwargs)


def _parser() -> argparse.ArgumentParser:
    from release.local import DEFAULT_CUDA_ARCHS, DEFAULT_WORK_DIR
    from release.select import DEFAULT_CPU_VARIANT, DEFAULT_CUDA_VARIANT

    p = argparse.ArgumentParser(prog="python -m release", description=__doc__, allow_abbrev=False)
    p.add_argument("--traceback", action="store_true", help="show a traceback on errors (for bug reports)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    loc = _command(
        sub,
        "local",
        _cmd_local,
        help="rehearse the release on this machine: plan, build, check, publish, serve, install, run",
        description=(
            "Rehearse the whole release on this machine. With no options: build the stable-ABI CPU wheel "
            f"({DEFAULT_CPU_VARIANT}, every torch >= 2.10; compiled against this machine's CPU torch, "
            "--cpu-torch-spec) and, when nvcc 13 is present, the stable-ABI CUDA 13 wheel "
            f"({DEFAULT_CUDA_VARIANT}, for sm {DEFAULT_CUDA_ARCHS} only); publish them into a local site with "
            "the build matrix's coverage; serve it on 127.0.0.1; pip-install the CPU wheel from the page of "
            "this machine's torch minor (whl/torch2.13-cpu/) into a fresh venv; run the op against the reference."
        ),
    )
    loc.add_argument(
        "--work-dir",
        type=Path,
        default=DEFAULT_WORK_DIR,
        help=f"where wheels, site, venv, logs and report.json go (default {DEFAULT_WORK_DIR})",
    )
    loc.add_argument(
        "--variants",
        type=_csv,
        metavar="LIST",
        help="comma-separated variants to build instead of the defaults, e.g. stable2.10-cpu or torch2.9-cpu",
    )
    loc.add_argument(
        "--cpu-torch-spec",
        default="torch==2.13.*",
        metavar="SPEC",
        help="the torch a stable-ABI CPU wheel is compiled against and installed with (default 'torch==2.13.*': "
        "the CPU torch of this machine; '' = the plan's build torch)",
    )
    loc.add_argument(
        "--cuda-torch-spec",
        metavar="SPEC",
        help="the torch a stable-ABI CUDA wheel is compiled against, e.g. 'torch==2.14.1+cu130' "
        "(default: the plan's build torch)",
    )
    loc.add_argument("--no-cuda", dest="cuda", action="store_false", help="never build a CUDA variant")
    loc.add_argument(
        "--cuda-archs",
        default=DEFAULT_CUDA_ARCHS,
        metavar="LIST",
        help=f"CUDA architectures for CUDA builds (default {DEFAULT_CUDA_ARCHS}; e.g. '8.0;9.0;12.0')",
    )
    loc.add_argument(
        "--wheels-from",
        type=Path,
        metavar="DIR",
        help="take the selected variants' wheels from DIR instead of building them",
    )
    loc.add_argument(
        "--install-variant", metavar="VARIANT", help="which built variant to install and run (default: the CPU one)"
    )
    loc.add_argument(
        "--torch-index-url",
        metavar="URL",
        help="index for torch in the builds and the install (default: PyTorch's index of the variant "
        "when it answers, else pip's configured indexes; '' = pip's configured indexes only)",
    )
    loc.add_argument("--port", type=_port, default=0, help="port for the local index server (default: a free one)")
    loc.add_argument(
        "--max-jobs", type=_positive, metavar="N", help="MAX_JOBS for the builds (default: the build driver's)"
    )
    loc.add_argument("--quiet", action="store_true", help="keep command output in the logs only")

    tw = _command(sub, "test-wheel", _cmd_test_wheel)
    tw.add_argument("wheel", type=Path, metavar="WHEEL")
    tw.add_argument("--torch-index-url", metavar="URL", help="PyTorch's index for the wheel's accelerator")
    tw.add_argument(
        "--torch-spec",
        metavar="SPEC",
        help="the torch to install with the wheel, e.g. 'torch==2.10.*' (a stable-ABI wheel on the oldest torch it serves)",
    )
    tw.add_argument(
        "--tests",
        action="append",
        metavar="PATH",
        help="test file or folder (relative to the repository) to run against the wheel; repeatable",
    )
    tw.add_argument("--work-dir", type=Path, metavar="DIR", help="where the venv and logs go (default: a temp dir)")

    fs = _command(sub, "fetch-site", _cmd_fetch_site)
    fs.add_argument("url", metavar="URL", help="the published site, e.g. https://OWNER.github.io/REPO/")
    fs.add_argument("--out", type=Path, required=True, metavar="DIR", help="an empty or new directory")

    rr = _command(sub, "record-result", _cmd_record_result)
    rr.add_argument("--job", required=True, metavar="ID")
    rr.add_argument("--stage", required=True, choices=("build", "test"))
    rr.add_argument("--outcome", required=True, metavar="OUTCOME", help="success, failure, cancelled or skipped")
    rr.add_argument("--wheel-dir", type=Path, metavar="DIR", help="where the job's wheels are (recorded by name)")
    rr.add_argument("--out", type=Path, required=True, metavar="DIR")

    cv = _command(sub, "check-version", _cmd_check_version)
    cv.add_argument(
        "--index-url",
        default=None,
        metavar="URL",
        help="the index's simple API root (default https://pypi.org/simple/)",
    )

    sm = _command(sub, "summary", _cmd_summary)
    sm.add_argument("--plan", type=Path, required=True, metavar="FILE")
    sm.add_argument("--results", type=Path, required=True, metavar="DIR")
    sm.add_argument("--out", metavar="FILE", help="default: $GITHUB_STEP_SUMMARY, else stdout")
    sm.add_argument("--fail-on-failure", action="store_true", help="exit 1 when a job failed or has no result")
    return p


def _cmd_local(args: argparse.Namespace) -> int:
    from release import machine
    from release.commands import SubprocessRunner
    from release.local import LocalOptions, LocalRelease

    options = options_from_args(
        LocalOptions, args, cpu_torch_spec=args.cpu_torch_spec or None, cuda_torch_spec=args.cuda_torch_spec or None
    )
    result = LocalRelease(options, SubprocessRunner(echo=not args.quiet), machine.detect()).run()
    return 0 if result.ok else EXIT_STEP


def _cmd_test_wheel(args: argparse.Namespace) -> int:
    """install a wheel with its torch into a fresh venv and test it"""
    from release.commands import SubprocessRunner
    from release.wheeltest import WheelTest, WheelTestOptions, parse_tests

    opts = options_from_args(WheelTestOptions, args, tests=parse_tests(args.tests))
    return 0 if WheelTest(opts, SubprocessRunner()).run().ok else EXIT_STEP


def _cmd_fetch_site(args: argparse.Namespace) -> int:
    """download a published site's manifest and .metadata files to publish on top of"""
    from release.fetch import fetch_site

    print(f"{args.url}: {fetch_site(args.url, args.out)}", file=sys.stderr)
    return 0


def _cmd_record_result(args: argparse.Namespace) -> int:
    """write one job's build/test outcome for the run summary"""
    rec = gha.result_record(args.job, args.stage, args.outcome, wheel_dir=args.wheel_dir)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.stage}-{args.job}.json"
    path.write_text(json.dumps(rec, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{path}: {args.job} {args.stage} {args.outcome}", file=sys.stderr)
    return 0


def _cmd_summary(args: argparse.Namespace) -> int:
    """Markdown table of built/failed jobs ($GITHUB_STEP_SUMMARY)"""
    plan = gha.read_json(args.plan, what="plan")
    results = gha.load_results(args.results)
    text = gha.summary_markdown(plan, results)
    gha.append_lines(gha.env_path(args.out, "GITHUB_STEP_SUMMARY"), text.splitlines(), what="summary")
    if args.fail_on_failure:
        ids = [str(j["id"]) for j in gha.plan_jobs(plan)]
        bad = [
            i
            for i in ids
            if gha.outcome(results, i, "build") != "success" or gha.outcome(results, i, "test") == "failure"
        ]
        if bad:
            print(f"{len(bad)} job(s) failed or have no result: {', '.join(bad[:10])}", file=sys.stderr)
            return EXIT_STEP
    return 0


def _cmd_check_version(args: argparse.Namespace) -> int:
    """refuse to release a version the package index (PyPI) already holds under this project's name"""
    from release import version_check

    print(version_check.check_version(args.index_url or version_check.PYPI_SIMPLE))
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except ReleaseError as exc:
        if args.traceback:
            raise
        kind = "error" if isinstance(exc, UsageError) else "failed"
        print(f"{kind}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
