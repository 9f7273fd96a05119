"""Build, merge and yank, without ever showing a half-written site (see ``_write_site``).

A run that fails or is killed before its commit point (one atomic swap of the whole site) leaves the
site exactly as it was; after it, the whole new site is live; ``files/`` only ever grows.
"""

from __future__ import annotations

__all__ = ["BuildOptions", "BuildResult", "build_site", "yank_file", "swap_in"]

import contextlib
import ctypes
import dataclasses
import errno
import hashlib
import os
import shutil
import tempfile
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Callable, Optional, Union

import causal_conv1d_contract as contract
from index_site.coverage import COVERAGE_NAME, CoverageRow, read_coverage
from index_site.errors import BadInputError, IndexSiteError, ManifestError, Problem
from index_site.manifest import MANIFEST_NAME, Entry, Manifest, SdistEntry, load_manifest, resolve_now
from index_site.render import render_pages
from index_site.sdists import SdistFile, scan_sdists
from index_site.wheels import WheelFile, WheelProblem, scan_wheels, sha256_file

FILES_DIR = "files"
_RENAME_EXCHANGE = 2  # linux/fs.h


@dataclasses.dataclass(frozen=True)
class BuildOptions:
    wheels_dir: Optional[Path]  # None: re-render from the manifest alone
    out: Path
    files_url: Optional[str] = None  # absolute base URL of the wheels (release assets); None: self-hosted
    site_url: Optional[str] = None  # public URL of the site, for the landing page's commands
    manifest: Optional[Path] = None  # manifest to merge into (default: <out>/manifest.json)
    coverage: Optional[Path] = None
    now: Optional[str] = None  # --now; else SOURCE_DATE_EPOCH; else the clock
    strict: bool = False


@dataclasses.dataclass(frozen=True)
class BuildResult:
    out: Path
    added: list[Entry]
    total: int
    variants: int
    problems: list[Problem]
    added_sdists: list[SdistEntry] = dataclasses.field(default_factory=list)


def _url_for(files_url: Optional[str]) -> Callable[[str], str]:
    if files_url is None:
        return lambda filename: contract.quote_path(f"{FILES_DIR}/{filename}")
    parts = urllib.parse.urlsplit(files_url)
    if parts.scheme not in ("http", "https", "file") or (parts.scheme != "file" and not parts.netloc):
        raise IndexSiteError(f"Invalid --files-url (expected an absolute http(s):// URL): {files_url!r}")
    base = contract.site_base(files_url)
    return lambda filename: base + contract.quote_path(filename)


def _check_out_dir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise IndexSiteError(f"--out {str(out)!r} exists and is not a directory")
    if out.is_dir() and not (out / MANIFEST_NAME).exists() and any(out.iterdir()):
        raise IndexSiteError(
            f"refusing to replace {str(out)!r}: it is not empty and holds no {MANIFEST_NAME}, so it is not a "
            "site written by index_site. Choose an empty or new directory."
        )


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


@contextlib.contextmanager
def _written(dst: Path, *, atomic: bool = True) -> Iterator[IO[bytes]]:
    """The file to write ``dst`` through: a temp file in its directory, moved over ``dst`` (mode 0644)
    when the block ends, or (``atomic=False``) ``dst`` itself; deleted when the block raises."""
    if atomic:
        fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", dir=dst.parent)
    else:
        fd, tmp = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), str(dst)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
        if atomic:
            os.chmod(tmp, 0o644)
            os.replace(tmp, dst)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write_atomic(path: Path, data: bytes) -> None:
    """Replace one file atomically (temp file in the same directory + os.replace)."""
    with _written(path) as f:
        f.write(data)


def _renameat2_exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two directories (Linux renameat2 RENAME_EXCHANGE); False if unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.EOPNOTSUPP):
        return False
    raise OSError(err, f"cannot swap {str(a)!r} and {str(b)!r}: {os.strerror(err)}")


def swap_in(new: Path, out: Path) -> None:
    """Make ``new`` the site at ``out``; the old site is removed afterwards.

    With renameat2 (Linux) the exchange is atomic: a reader sees the old site or the new one.
    Elsewhere there is a moment between two renames where ``out`` does not exist.
    """
    if not out.exists():
        os.rename(new, out)
        return
    if _renameat2_exchange(new, out):
        shutil.rmtree(new, ignore_errors=True)  # now holds the old site; the new one is live
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    os.rmdir(old)
    os.rename(out, old)
    try:
        os.rename(new, out)
    except BaseException:
        os.rename(old, out)  # put the old site back
        raise
    shutil.rmtree(old, ignore_errors=True)


def _copy_verified(wheel: Union[WheelFile, SdistFile], dst: Path, *, atomic: bool = True) -> None:
    """Copy a new wheel into the site (a copy, not a link: the input may be rewritten in place later),
    checking that it is still the file that was hashed; ``atomic``: through a temp file + os.replace."""
    digest = hashlib.sha256()
    with open(wheel.path, "rb") as src, _written(dst, atomic=atomic) as out:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
        if digest.hexdigest() != wheel.sha256:
            raise IndexSiteError(f"{str(wheel.path)!r} changed while it was being published; run the build again")


def _is_file_with(path: Path, sha256: str) -> bool:
    return path.is_file() and sha256_file(path)[0] == sha256


def _add_files(
    files: Path,
    manifest: Manifest,
    new: dict[str, Union[WheelFile, SdistFile]],
    added: set[str],
    *,
    fresh_dir: bool = False,
) -> list[Problem]:
    """Put new wheels and their .metadata into ``files/``. A published file is never changed; a file of
    a wheel published just now that is already there (left by an interrupted run) is checked and replaced
    if it differs; a published file missing from the site is restored from the inputs when they have it."""
    problems: list[Problem] = []
    files.mkdir(parents=True, exist_ok=True)
    for entry in manifest.entries:  # wheels (the sdists have entries of their own)
        found = new.get(entry.filename)
        wheel = found if isinstance(found, WheelFile) else None
        meta = files / (entry.filename + ".metadata")
        target = files / entry.filename
        fresh = entry.filename in added
        if wheel is not None:
            if fresh_dir:  # a directory nobody sees yet: plain writes (much faster than temp + rename)
                meta.write_bytes(wheel.metadata)
                if entry.is_relative:
                    _copy_verified(wheel, target, atomic=False)
                continue
            if not meta.is_file() or (fresh and not _is_file_with(meta, wheel.metadata_sha256)):
                _write_atomic(meta, wheel.metadata)
            if entry.is_relative and (not target.is_file() or (fresh and not _is_file_with(target, wheel.sha256))):
                _copy_verified(wheel, target)
            continue
        if not meta.is_file():
            problems.append(
                Problem(
                    entry.filename,
                    f"{FILES_DIR}/{meta.name} is missing from the site and the wheel is not among the inputs",
                )
            )
        if entry.is_relative and not target.is_file():
            problems.append(
                Problem(
                    entry.filename,
                    f"published but missing from {str(files)!r} and not among the inputs; its link is dead",
                )
            )
    for sd in manifest.sdists:  # the sdists: the file only (no .metadata)
        source = new.get(sd.filename)
        target = files / sd.filename
        if source is not None and sd.is_relative:
            if fresh_dir:
                _copy_verified(source, target, atomic=False)
            elif not target.is_file() or (sd.filename in added and not _is_file_with(target, sd.sha256)):
                _copy_verified(source, target)
        elif sd.is_relative and not target.is_file():
            problems.append(
                Problem(
                    sd.filename, f"published but missing from {str(files)!r} and not among the inputs; its link is dead"
                )
            )
    return problems


def _write_site(
    out: Path,
    manifest: Manifest,
    rows: list[CoverageRow],
    new: dict[str, Union[WheelFile, SdistFile]],
    added: set[str],
) -> list[Problem]:
    """Write the site so that a reader -- and a process killed at any point -- never sees a half-written one.

    The whole new site is written to a temporary directory beside ``out`` and swapped in at once (one
    atomic exchange, :func:`swap_in`): the pages, the manifest, the coverage and ``files/``. For an
    existing site, ``files/`` of the new tree holds hard links to the published files (no copy, and a
    published file is never rewritten) plus the new wheels. Until the swap the live site is untouched;
    after it, the whole new site is live. A temporary tree left by a killed run is removed by the next.
    """
    pages = render_pages(manifest, rows)  # in memory first: a rendering failure changes nothing
    out.parent.mkdir(parents=True, exist_ok=True)
    _recover(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    try:
        os.chmod(tmp, 0o755)
        if out.exists():
            _link_tree(out / FILES_DIR, tmp / FILES_DIR)
        problems = _add_files(tmp / FILES_DIR, manifest, new, added, fresh_dir=not out.exists())
        for rel, data in pages.items():
            _write(tmp / rel, data)
        _fsync_tree(tmp)
        swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return problems


def _link_tree(src: Path, dst: Path) -> None:
    """``dst`` mirrors ``src`` with hard links (a copy where the filesystem has none)."""
    dst.mkdir(parents=True, exist_ok=True)
    if not src.is_dir():
        return
    for entry in os.scandir(src):
        target = dst / entry.name
        if entry.is_dir(follow_symlinks=False):
            _link_tree(Path(entry.path), target)
            continue
        try:
            os.link(entry.path, target)
        except OSError:
            shutil.copy2(entry.path, target)


def _fsync_tree(root: Path) -> None:
    """Flush the new tree's files before it becomes the site (a crash after the swap must not leave empty pages)."""
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.stat().st_nlink == 1:  # linked files were flushed when first published
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())


def _recover(out: Path) -> None:
    """Undo what a killed run left beside ``out``: remove unfinished new trees; where the site itself is
    missing (killed between the two renames of a swap without renameat2), put the old one back."""
    for leftover in sorted(out.parent.glob(f".{out.name}.new-*")):
        shutil.rmtree(leftover, ignore_errors=True)
    olds = sorted(out.parent.glob(f".{out.name}.old-*"))
    if not out.exists() and olds:
        os.rename(olds[-1], out)
        olds = olds[:-1]
    for old in olds:
        shutil.rmtree(old, ignore_errors=True)


def build_site(opts: BuildOptions) -> BuildResult:
    """Merge the wheels of ``opts.wheels_dir`` into the manifest and write the site."""
    out = opts.out.resolve()
    _check_out_dir(out)
    url_for = _url_for(opts.files_url)
    now = resolve_now(opts.now)
    manifest, problems = load_manifest(opts.manifest or out / MANIFEST_NAME)
    rows = _coverage(out, opts.coverage, problems)
    if opts.site_url is not None:
        manifest = dataclasses.replace(manifest, site_url=_normalise_site_url(opts.site_url))
    wheels: list[WheelFile] = []
    sdists: list[SdistFile] = []
    if opts.wheels_dir is not None:
        try:
            wheels, wheel_problems = scan_wheels(opts.wheels_dir)
        except WheelProblem as exc:
            raise IndexSiteError(str(exc)) from None
        sdists, sdist_problems = scan_sdists(opts.wheels_dir)
        problems += wheel_problems + sdist_problems
    if opts.strict and problems:
        raise BadInputError(problems)
    if opts.wheels_dir is not None and not wheels and not sdists:
        raise IndexSiteError(_no_wheels_message(opts.wheels_dir, problems, out))
    merged, added = manifest.merge(wheels, url_for, now)
    merged, added_sdists = merged.merge_sdists(sdists, url_for, now)
    new: dict[str, Union[WheelFile, SdistFile]] = {w.filename: w for w in wheels}
    new.update((sd.filename, sd) for sd in sdists)
    fresh = {e.filename for e in added} | {e.filename for e in added_sdists}
    site_problems = _write_site_checked(out, merged, rows, opts, new, fresh)
    problems += site_problems
    return BuildResult(
        out, added, len(merged.entries), len({e.variant for e in merged.entries}), problems, added_sdists
    )


def _no_wheels_message(wheels_dir: Path, problems: list[Problem], out: Path) -> str:
    """WHEELS_DIR holds no usable wheel: a wrong path or a failed build step, not a publish of nothing."""
    why = f" ({len(problems)} file(s) skipped: {problems[0]}{', ...' if len(problems) > 1 else ''})" if problems else ""
    return (
        f"no wheels to publish in {str(wheels_dir)!r} (searched recursively for *.whl and *.tar.gz){why}; the site was not "
        f"changed. Check the path, or omit WHEELS_DIR to write the site from its manifest alone: "
        f"python -m index_site build --out {out}"
    )


def _write_site_checked(
    out: Path,
    manifest: Manifest,
    rows: list[CoverageRow],
    opts: BuildOptions,
    new: dict[str, Union[WheelFile, SdistFile]],
    added: set[str],
) -> list[Problem]:
    if opts.strict:
        # dry check first, so that --strict never swaps in a site with dead links
        missing = _missing_files(out, manifest, new)
        if missing:
            raise BadInputError(missing)
    return _write_site(out, manifest, rows, new, added)


def _normalise_site_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https", "file") or (parts.scheme != "file" and not parts.netloc):
        raise IndexSiteError(f"Invalid --site-url (expected an absolute http(s):// or file:// URL): {url!r}")
    return contract.site_base(url)


def _coverage(out: Path, path: Optional[Path], problems: list[Problem]) -> list[CoverageRow]:
    """Rows from --coverage, else the coverage kept in the existing site, else none (manifest only)."""
    if path is not None:
        return read_coverage(path)
    kept = out / COVERAGE_NAME
    if not kept.is_file():
        return []
    try:
        return read_coverage(kept)
    except IndexSiteError as exc:
        problems.append(Problem(str(kept), f"{exc}; the table is derived from the manifest alone"))
        return []


def _missing_files(out: Path, manifest: Manifest, new: dict[str, Union[WheelFile, SdistFile]]) -> list[Problem]:
    problems = [
        Problem(sd.filename, "published but missing from the site and not among the inputs")
        for sd in manifest.sdists
        if sd.filename not in new and sd.is_relative and not (out / FILES_DIR / sd.filename).is_file()
    ]
    for entry in manifest.entries:
        if entry.filename in new:
            continue
        if not (out / FILES_DIR / (entry.filename + ".metadata")).is_file():
            problems.append(
                Problem(
                    entry.filename,
                    f"{FILES_DIR}/{entry.filename}.metadata is missing from the site and the wheel is not among the inputs",
                )
            )
        if entry.is_relative and not (out / FILES_DIR / entry.filename).is_file():
            problems.append(Problem(entry.filename, "published but missing from the site and not among the inputs"))
    return problems


def yank_file(
    out: Path, filename: str, reason: str, *, strict: bool = False
) -> tuple[Union[Entry, SdistEntry], list[Problem]]:
    """Mark a published file yanked and rewrite the pages (atomically); returns the entry and problems."""
    out = out.resolve()
    manifest_path = out / MANIFEST_NAME
    if not manifest_path.is_file():
        raise ManifestError(f"{str(out)!r} is not a site written by index_site (no {MANIFEST_NAME})")
    manifest, problems = load_manifest(manifest_path)
    name = urllib.parse.unquote(Path(filename).name)
    yanked = manifest.yank(name, reason)
    rows = _coverage(out, None, problems)
    if strict and problems:
        raise BadInputError(problems)
    problems += _write_site(out, yanked, rows, {}, set())
    entry = yanked.by_name().get(name) or {e.filename: e for e in yanked.sdists}[name]
    return entry, problems
