"""``python -m index_site build | yank | serve | verify`` (see docs/index_site.md)."""

from __future__ import annotations

__all__ = ["main"]

import argparse
import sys
from pathlib import Path
from typing import Optional

from causal_conv1d_contract.cli import add_command, options_from_args
from index_site.errors import IndexSiteError, Problem, VerifyFailed

_EPILOG = """exit codes: 0 success; 1 bad input under --strict, or verify found problems; 2 usage error;
3 publish refused (a published file name with different contents); 4 the existing manifest is unreadable"""


def _warn(problems: list[Problem]) -> None:
    for p in problems:
        print(f"index_site: warning: {p}", file=sys.stderr)


def _cmd_build(args: argparse.Namespace) -> int:
    """write the site, merging new wheels into its manifest

    Write SITE_DIR from the wheels in WHEELS_DIR (searched recursively) and the site's existing manifest.json.
    Publishing is append-only: a published file is never dropped or replaced. The whole new site (pages,
    manifest, files) is written to a temporary directory and swapped in at once, so a failure -- or a kill at
    any point -- leaves the old site or the new one, never a mix. A WHEELS_DIR without any usable wheel is an
    error.
    """
    from index_site.site import BuildOptions, build_site

    result = build_site(options_from_args(BuildOptions, args))
    _warn(result.problems)
    for entry in result.added:
        print(f"published {entry.filename} ({entry.variant}, sha256 {entry.sha256})")
    for sd in result.added_sdists:
        print(f"published {sd.filename} (sdist, source/ index, sha256 {sd.sha256})")
    print(
        f"site written to {result.out}: {result.total} wheel(s) in {result.variants} variant index(es), "
        f"{len(result.added)} new" + (f", {len(result.problems)} warning(s)" if result.problems else "")
    )
    return 0


def _cmd_yank(args: argparse.Namespace) -> int:
    """mark a published file yanked (PEP 592)

    Mark FILE yanked: pip and uv skip it unless pinned exactly. It stays listed.
    """
    from index_site.site import yank_file

    entry, problems = yank_file(args.site, args.file, args.reason, strict=args.strict)
    _warn(problems)
    print(f"yanked {entry.filename}" + (f" ({entry.yanked})" if entry.yanked else ""))
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    """serve a site on 127.0.0.1

    Serve SITE_DIR over HTTP, answering PEP 691 JSON to clients that ask for it.
    """
    from index_site.serve import make_server

    try:
        server = make_server(args.site, args.port, args.host)
    except FileNotFoundError as exc:
        raise IndexSiteError(str(exc)) from None
    except OSError as exc:
        raise IndexSiteError(f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc})") from None
    host, port = str(server.server_address[0]), server.server_address[1]
    print(f"serving {args.site} at http://{host}:{port}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    """check every link, hash, size and .metadata of a site

    Check a site (a folder or an http(s):// URL): every link resolves, hashes and sizes match the manifest,
    every .metadata is its wheel's METADATA, the JSON pages agree.
    """
    from index_site.verify import verify_site

    checked, problems = verify_site(args.site)
    if problems:
        raise VerifyFailed(problems)
    print(f"verified {checked} file(s): every link resolves and matches its hash, size and metadata")
    return 0


def _site_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("site", type=Path, metavar="SITE_DIR")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m index_site",
        description="A static package index with one PEP 503/691 index per causal-conv1d variant.",
        epilog=_EPILOG,
    )
    parser.add_argument("--traceback", action="store_true", help="show a traceback on errors (for bug reports)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    b = add_command(sub, "build", _cmd_build, epilog=_EPILOG)
    b.add_argument(
        "wheels_dir",
        type=Path,
        nargs="?",
        metavar="WHEELS_DIR",
        help="directory of wheels to publish (omit to re-render from the manifest alone)",
    )
    b.add_argument("--out", type=Path, required=True, metavar="SITE_DIR", help="the site directory (created or merged)")
    b.add_argument(
        "--files-url",
        metavar="URL",
        help="absolute base URL where new wheels are hosted (e.g. a release's assets); upload "
        "SITE_DIR/files/*.metadata next to them. Default: self-hosted under SITE_DIR/files/",
    )
    b.add_argument(
        "--site-url",
        metavar="URL",
        help="public URL of the site, used in the landing page's commands (kept for later builds; "
        "default: the project's published site)",
    )
    b.add_argument(
        "--manifest",
        type=Path,
        metavar="FILE",
        help="manifest to merge into instead of SITE_DIR/manifest.json (e.g. the live site's)",
    )
    b.add_argument(
        "--coverage",
        type=Path,
        metavar="FILE",
        help="coverage JSON from build_matrix, for the landing page's table (kept for later builds)",
    )
    b.add_argument(
        "--now",
        metavar="TIME",
        help="upload time recorded for new wheels: Unix time or ISO 8601 (default: $SOURCE_DATE_EPOCH, else the clock)",
    )
    b.add_argument("--strict", action="store_true", help="fail (and change nothing) on any bad input")

    y = add_command(sub, "yank", _cmd_yank)
    _site_dir(y)
    y.add_argument("file", metavar="FILE", help="the wheel's file name (or a path ending in it)")
    y.add_argument("--reason", default="", help="why it is yanked (shown by pip)")
    y.add_argument("--strict", action="store_true", help="fail on unreadable manifest entries")

    s = add_command(sub, "serve", _cmd_serve)
    _site_dir(s)
    s.add_argument("--port", type=int, default=8000, help="port (0: any free port; default 8000)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")

    v = add_command(sub, "verify", _cmd_verify)
    v.add_argument("site", metavar="SITE", help="site folder or URL")
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except IndexSiteError as exc:
        if args.traceback:
            raise
        print(f"index_site: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("index_site: interrupted; a site being written was left as it was", file=sys.stderr)
        return 130
    except OSError as exc:  # disk full, permissions: report, the old site is untouched
        if args.traceback:
            raise
        print(f"index_site: error: {exc}", file=sys.stderr)
        return 1
