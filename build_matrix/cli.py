"""``python -m build_matrix``: plan, emit, coverage, diff, refresh, validate, build, check.

Every subcommand has ``--help``. Errors print one line (``error: ...``) and exit with the code of
their family (``build_matrix.errors``); ``--traceback`` or ``BUILD_MATRIX_TRACEBACK=1`` adds the
traceback. ``build`` and ``check`` live in ``build_matrix.native`` / ``build_matrix.wheelcheck``
and are imported only when used, so the other subcommands work even if those modules cannot load.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import time
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Callable, NoReturn, Optional

import causal_conv1d_contract as contract
from build_matrix import errors
from build_matrix.errors import BuildMatrixError, perhaps
from causal_conv1d_contract.cli import add_command, bounded_int

if TYPE_CHECKING:
    from build_matrix.plan import Plan

__all__ = ["main", "build_parser", "TRACEBACK_ENV"]

TRACEBACK_ENV = "BUILD_MATRIX_TRACEBACK"

#: Subcommands whose implementation is imported lazily: name -> (module, one-line help).
_LAZY = {
    "build": ("build_matrix.native", "build one job's wheel (--native: on this machine, no containers)"),
    "check": ("build_matrix.wheelcheck", "check that wheels are what their names say"),
}


def _all_options(parser: argparse.ArgumentParser) -> set[str]:
    """Option strings of a parser and of all its subcommands (unknown options surface at the top)."""
    found: set[str] = set()
    for action in parser._actions:  # noqa: SLF001 - argparse has no public accessor
        found.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for sub in action.choices.values():
                found |= _all_options(sub)
    return found


class _Parser(argparse.ArgumentParser):
    """argparse with "Perhaps you meant ...?" for unknown options and subcommands."""

    def error(self, message: str) -> NoReturn:
        hint = ""
        m = re.search(r"unrecognized arguments: (.+)$", message)
        if m:
            options = sorted(_all_options(self))
            for token in m.group(1).split():
                if token.startswith("-"):
                    hint += perhaps(token.split("=", 1)[0], options)
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.+)\)", message)
        if m:
            choices = re.findall(r"'([^']*)'", m.group(2)) or [c.strip() for c in m.group(2).split(",")]
            hint += perhaps(m.group(1), choices)
        self.print_usage(sys.stderr)
        self.exit(errors.EXIT_USAGE, f"{self.prog}: error: {message}{hint}\n")


_shard_size = bounded_int(
    1,
    256,
    "invalid shard size (expected an integer 1..256): {text!r}",
    "invalid shard size (GitHub allows 1..256 jobs per matrix): {value}",
)


def _common(parser: argparse.ArgumentParser) -> None:
    """--data and --traceback on every subcommand (skipped where the subcommand defines them)."""
    existing = set(parser._option_string_actions)  # noqa: SLF001 - argparse has no public accessor
    if "--data" not in existing:
        parser.add_argument(
            "--data",
            metavar="FILE",
            default=argparse.SUPPRESS,
            help="compatibility data file (default: $BUILD_MATRIX_DATA, else the packaged data/compat.toml)",
        )
    if "--traceback" not in existing:
        parser.add_argument(
            "--traceback",
            action="store_true",
            default=argparse.SUPPRESS,
            help=f"show tracebacks of errors (also ${TRACEBACK_ENV}=1)",
        )


def _output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", "-o", metavar="FILE", help="write here (atomically) instead of stdout")


def _filters(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("filters (comma-separated; repeatable)")
    g.add_argument("--torch", metavar="SPEC", help="torch minors: '2.7', '2.6-2.9', '2.10-', '>=2.6,<2.10'")
    g.add_argument("--accel", action="append", metavar="LIST", help="accelerators, e.g. cpu,cu128")
    g.add_argument(
        "--platform", action="append", metavar="LIST", help="platforms: linux-x86_64, linux-aarch64, windows-amd64"
    )
    g.add_argument("--python", action="append", metavar="LIST", help="CPythons, e.g. 3.10,3.13t")
    parser.add_argument(
        "--index-url",
        metavar="URL",
        help="PyTorch wheel index base (default: $BUILD_MATRIX_TORCH_INDEX, else the data's torch_index_base)",
    )
    parser.add_argument(
        "--no-stable-abi",
        dest="stable_abi",
        action="store_false",
        help="one job per torch minor for torch >= 2.10 too (the matrix before the stable ABI; "
        "per-minor legacy builds to compare with)",
    )


def _plan(args: argparse.Namespace) -> Plan:
    from build_matrix import compat
    from build_matrix.plan import make_plan

    data = compat.load(getattr(args, "data", None))
    return make_plan(
        data,
        torch=args.torch,
        accels=args.accel,
        platforms=args.platform,
        pythons=args.python,
        torch_index_base=args.index_url,
        stable_abi=getattr(args, "stable_abi", True),
    )


def _write(args: argparse.Namespace, text: str) -> None:
    out = getattr(args, "output", None)
    if out:
        from build_matrix.compat_write import write_atomic

        write_atomic(out, text)
    else:
        sys.stdout.write(text)


# --- handlers -------------------------------------------------------------------------------


def _cmd_plan(args: argparse.Namespace) -> int:
    """every combination, the build jobs, and which job covers which combination

    Enumerate torch x accel x CPython x ABI x platform, classify each combination as covered (by a build job) or
    unavailable (with the reason). Jobs are abi3: one per (variant, platform), serving all of that torch's
    CPythons.
    """
    start = time.perf_counter()
    plan = _plan(args)
    elapsed = time.perf_counter() - start
    if args.format == "json":
        text = json.dumps(plan.to_dict(), indent=None if args.compact else 2) + "\n"
    elif args.format == "jobs":
        text = "".join(f"{j.id}\n" for j in plan.jobs)
    else:
        s = plan.summary()
        lines = [
            f"combinations: {s['combinations']} (covered {s['covered']}, unavailable {s['unavailable']})",
            f"build jobs:   {s['jobs']} (abi3; per-CPython wheels would need {s['per_python_jobs']}: "
            f"{s['jobs_saved_ratio']}x as many)",
            s["abi3"],
        ]
        stable = [j for j in plan.jobs if j.stable_abi]
        if stable:
            lines.insert(
                2,
                f"              {len(stable)} stable-ABI jobs ({', '.join(sorted({j.variant.name for j in stable}))}) "
                f"serve every torch >= {stable[0].variant.torch}",
            )
        if args.format == "text":
            lines.append("")
            for j in plan.jobs:
                lines.append(
                    f"{j.id:40} torch=={j.torch_version:8}{' stable' if j.stable_abi else '':7} py{j.python:5} {j.wheel_platform:24} "
                    f"serves {','.join(j.covers_pythons)}"
                )
        text = "\n".join(lines) + "\n"
    _write(args, text)
    if args.time:
        print(f"planned in {elapsed * 1000:.0f} ms", file=sys.stderr)
    return 0


def _cmd_emit_matrix(args: argparse.Namespace) -> int:
    """GitHub Actions matrix shards (<= 256 jobs each)

    The build jobs as GitHub Actions matrix 'include' lists, cut into shards of at most 256 jobs (GitHub's
    limit); job ids are the plan's and never change with the sharding.
    """
    from build_matrix import emit

    shard_list = emit.shards(_plan(args), size=args.shard_size)
    if args.format == "github-output":
        _write(args, emit.github_output(shard_list))
    else:
        _write(args, json.dumps({"shards": shard_list, "count": sum(s["count"] for s in shard_list)}, indent=2) + "\n")
    return 0


def _cmd_emit_env(args: argparse.Namespace) -> int:
    """one job's complete cibuildwheel environment

    Print the CIBW_* variables of one build job.
    """
    from build_matrix import compat, emit
    from build_matrix.plan import make_plan

    plan = make_plan(compat.load(getattr(args, "data", None)), torch_index_base=args.index_url)
    job = plan.job(args.job)
    _write(args, emit.format_env(job.environment, args.format))
    return 0


def _cmd_coverage(args: argparse.Namespace) -> int:
    """coverage table: torch x accel rows, platform columns

    Which wheel serves each torch x accel x platform, or why there is none.
    """
    from build_matrix import coverage

    plan = _plan(args)
    if args.format == "json":
        _write(args, json.dumps(coverage.table(plan), indent=2, ensure_ascii=False) + "\n")
    else:
        _write(args, coverage.markdown(plan))
    return 0


def _cmd_diff(args: argparse.Namespace) -> int:
    """what changes between two plans

    Compare two plans. Each side is a plan JSON file, a compatibility data .toml, or 'current'. Exit 0; with
    --exit-code, 7 when they differ.
    """
    from build_matrix import diff

    data = getattr(args, "data", None)
    result = diff.diff_plans(diff.load_side(args.old, data_path=data), diff.load_side(args.new, data_path=data))
    if args.format == "json":
        _write(args, json.dumps(result, indent=2) + "\n")
    else:
        _write(args, diff.format_text(result))
    return errors.EXIT_DIFFERENT if (args.exit_code and not result["identical"]) else 0


def _cmd_refresh(args: argparse.Namespace) -> int:
    """rebuild the availability data from PyTorch's wheel index

    Fetch <index>/<accel>/torch/ for every accelerator, derive which torch builds exist for which CPython and
    platform, and rewrite the data file atomically. A failed or partial fetch writes nothing.
    """
    from build_matrix import refresh

    accels: list[str] = []
    for item in args.accel or ():
        accels.extend(a.strip() for a in item.split(",") if a.strip())
    result = refresh.refresh(
        getattr(args, "data", None),
        base=args.index_url,
        extra_accels=accels,
        since=args.since,
        output=args.output,
        dry_run=args.dry_run,
        allow_removals=args.allow_removals,
        timeout=(args.connect_timeout, args.timeout),
        retries=args.retries,
    )
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"fetched {result.pages} index pages, {result.wheels} torch wheels")
    if result.changes:
        print("changes:")
        for line in result.changes:
            print(f"  {line}")
    else:
        print("no changes")
    target = args.output or result.old.path
    if result.written:
        print(f"wrote {target}")
    elif args.dry_run:
        print("dry run: nothing written")
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    """validate the compatibility data file

    Load and validate the compatibility data; print what it covers.
    """
    from build_matrix import compat

    data = compat.load(getattr(args, "data", None))
    low = [f"{m} ({r.note or r.source})" for m, r in data.torch.items() if r.confidence == "low"]
    print(
        f"{data.path}: valid (schema {compat.SCHEMA}); torch {', '.join(data.torch)}; "
        f"accels {', '.join(data.accels())}; CUDA arch lists for {', '.join(data.cuda)}"
    )
    for line in low:
        print(f"  low confidence: torch {line}")
    return 0


def _lazy_handler(name: str, module: str, exc: BaseException) -> Callable[[argparse.Namespace], int]:
    def handler(_args: argparse.Namespace) -> int:
        raise BuildMatrixError(
            f"The '{name}' command is unavailable: importing {module} failed ({exc.__class__.__name__}: {exc}). "
            "The other commands still work; rerun with --traceback for details."
        ) from exc

    return handler


# --- parser ---------------------------------------------------------------------------------


def _first_command(argv: Sequence[str]) -> Optional[str]:
    for token in argv:
        if not token.startswith("-"):
            return token
    return None


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The argument parser; ``argv`` decides whether the lazy ``build``/``check`` modules are imported."""
    parser = _Parser(
        prog="python -m build_matrix",
        description="Plan, emit and check the causal-conv1d wheel builds (see docs/build_matrix.md).",
    )
    _common(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = add_command(sub, "plan", _cmd_plan)
    _filters(p)
    p.add_argument(
        "--format",
        choices=("json", "summary", "text", "jobs"),
        default="summary",
        help="json: the full plan (schema in docs/build_matrix.md); summary: counts; text: counts and "
        "jobs; jobs: job ids, one a line (default: summary)",
    )
    p.add_argument("--compact", action="store_true", help="json on one line")
    _output(p)
    p.add_argument("--time", action="store_true", help="print the planning time on stderr")

    p = add_command(
        sub,
        "emit",
        None,
        help="GitHub Actions matrix shards, or one job's cibuildwheel environment",
        description="Emit CI inputs from the plan.",
    )
    esub = p.add_subparsers(dest="what", metavar="WHAT", parser_class=_Parser)
    esub.required = True
    e = add_command(esub, "matrix", _cmd_emit_matrix)
    _filters(e)
    e.add_argument(
        "--shard-size", type=_shard_size, default=256, metavar="N", help="jobs per shard, 1..256 (default 256)"
    )
    e.add_argument(
        "--format",
        choices=("json", "github-output"),
        default="json",
        help="json (default) or lines for $GITHUB_OUTPUT (shards=N, names=[...], shard-K={...})",
    )
    _output(e)
    _common(e)
    e = add_command(esub, "env", _cmd_emit_env)
    e.add_argument("--job", required=True, metavar="ID", help="job id, e.g. torch2.13-cpu-linux-x86_64")
    e.add_argument(
        "--format",
        choices=("json", "shell", "github", "dotenv"),
        default="json",
        help="json (default); shell: export lines; github: $GITHUB_ENV multiline syntax; dotenv",
    )
    e.add_argument("--index-url", metavar="URL", help="PyTorch wheel index base")
    _output(e)
    _common(e)

    p = add_command(sub, "coverage", _cmd_coverage)
    _filters(p)
    p.add_argument(
        "--format", choices=("markdown", "json"), default="markdown", help="markdown (README) or json (landing page)"
    )
    _output(p)

    p = add_command(sub, "diff", _cmd_diff)
    p.add_argument("old", metavar="OLD", help="plan JSON, data .toml or 'current'")
    p.add_argument("new", metavar="NEW", help="plan JSON, data .toml or 'current'")
    p.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json")
    p.add_argument("--exit-code", action="store_true", help="exit 7 when the plans differ")
    _output(p)

    p = add_command(sub, "refresh", _cmd_refresh)
    p.add_argument(
        "--index-url",
        metavar="URL",
        help="index base (default: $BUILD_MATRIX_TORCH_INDEX, else https://download.pytorch.org/whl)",
    )
    p.add_argument("--accel", action="append", metavar="LIST", help="also fetch these accelerators, e.g. cu132")
    p.add_argument("--since", metavar="X.Y", help="only rewrite torch minors >= X.Y (default: the oldest in the data)")
    p.add_argument("--output", "-o", metavar="FILE", help="write the new data here instead of over the data file")
    p.add_argument("--dry-run", action="store_true", help="print the changes, write nothing")
    p.add_argument("--allow-removals", action="store_true", help="accept torch builds disappearing from the index")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S", help="read timeout per request (default 60)")
    p.add_argument("--connect-timeout", type=float, default=10.0, metavar="S", help="connect timeout (default 10)")
    p.add_argument("--retries", type=int, default=3, metavar="N", help="retries per page with backoff (default 3)")

    add_command(sub, "validate", _cmd_validate)

    for name, choice in sub.choices.items():
        if name != "emit":  # emit's own subcommands got theirs
            _common(choice)

    selected = _first_command(argv)
    for name, (module, help_text) in _LAZY.items():
        mod = None
        failure: Optional[BaseException] = None
        if name == selected:
            try:
                mod = importlib.import_module(module)
            except Exception as exc:  # noqa: BLE001 - a broken module must not break the other commands
                failure = exc
        if mod is not None:
            p = add_command(sub, name, mod.run, help=help_text)
            mod.configure_parser(p)
            _common(p)
        else:
            # Not selected (never parsed), or broken: take every argument as-is ('+' is no prefix
            # anyone uses), so that the handler can say why the command is unavailable.
            handler = _lazy_handler(name, module, failure) if failure is not None else None
            p = add_command(sub, name, handler, help=help_text, add_help=False, prefix_chars="+")
            p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the CLI; returns the exit code (see build_matrix.errors)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:  # the one settings parser (TRUE/FALSE, 1/0, ON/OFF, YES/NO; anything else names the variable)
        show_tb = "--traceback" in args_list or contract.env_flag(TRACEBACK_ENV) is True
    except contract.InvalidSetting as exc:
        print(f"error: {exc}", file=sys.stderr)
        return errors.EXIT_USAGE
    try:
        parser = build_parser(args_list)
        args = parser.parse_args(args_list)
        show_tb = show_tb or bool(getattr(args, "traceback", False))
        return int(args.handler(args) or 0)
    except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else errors.EXIT_USAGE)
    except BuildMatrixError as exc:
        if show_tb:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return errors.EXIT_INTERRUPTED
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return 0
    except Exception as exc:  # noqa: BLE001 - one place turns bugs into a short message
        if show_tb:
            traceback.print_exc()
        print(
            f"error: internal error: {exc.__class__.__name__}: {exc} (rerun with --traceback and report it)",
            file=sys.stderr,
        )
        return errors.EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
