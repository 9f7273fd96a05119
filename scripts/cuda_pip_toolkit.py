#!/usr/bin/env python3
"""Install a CUDA toolkit from NVIDIA's pip packages and assemble a CUDA_HOME torch accepts.

Works anywhere pip does (no root, no dnf/apt, no NVIDIA installer): CUDA 13 ships its compiler
as wheels (``nvidia-cuda-nvcc``, ``nvidia-cuda-runtime``, ``nvidia-cuda-cccl``,
``nvidia-cuda-crt``, ``nvidia-nvvm``; ``cuda-toolkit[...]`` is the meta package that pins one
release of them together). They all unpack into ``site-packages/nvidia/cu13/{bin,include,lib,nvvm}``,
which is almost a CUDA_HOME; torch's build helpers additionally want ``lib64/libcudart.so``
(the wheels carry only ``libcudart.so.13``). Sources that include ``ATen/cuda/CUDAContext.h``
also need the cuBLAS/cuSPARSE/cuSOLVER headers: a CUDA torch's own dependencies
(``nvidia-cublas`` ...) already put them in its site-packages, and those roots are merged in
(``--python``'s ``nvidia/cuXX``); ``--math-headers`` installs the wheels (hundreds of MB) for a
build environment without a CUDA torch.

    python scripts/cuda_pip_toolkit.py 13.0 --prefix /opt/cuda-pip        # prints the CUDA_HOME
    export CUDA_HOME=$(python scripts/cuda_pip_toolkit.py 13.0 --prefix /opt/cuda-pip --quiet)

``--assemble-only ROOT...`` skips pip and merges existing ``nvidia/cuXX``-style roots (e.g. the
nvcc of /usr/local/cuda plus the headers a CUDA torch already installed) into a CUDA_HOME.

The CUDA_HOME made is symlinks only: ``bin`` and ``nvvm`` point at the nvcc package's tree (nvcc
finds cicc/libdevice relative to its real path), ``include`` and ``lib64`` merge every root.
Stdlib only; Python 3.9+.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

#: cuda-toolkit meta-package release pinned per CUDA major.minor (PyPI ``cuda-toolkit``):
#: each release pins one exact version of every component wheel.
PINNED_META = {
    "13.0": "13.0.2",
}
#: The extras of ``cuda-toolkit`` needed to compile a torch extension.
COMPILE_EXTRAS = ("nvcc", "cudart", "cccl", "crt")
#: Headers torch's ATen/cuda/CUDAContext.h includes (cublas_v2.h, cusparse.h, cusolverDn.h).
MATH_EXTRAS = ("cublas", "cusparse", "cusolver")
#: nvcc's device compiler (cicc) and libdevice; a dependency the nvcc wheel does not always pull.
EXTRA_PACKAGES = ("nvidia-nvvm",)


class ToolkitError(RuntimeError):
    """Something this script cannot do; the message says what to do instead."""


def requirements(cuda: str, *, math_headers: bool) -> list[str]:
    """The pip requirements for CUDA ``major.minor``."""
    if not re.match(r"^\d+\.\d+$", cuda):
        raise ToolkitError(f"Invalid CUDA version (expected MAJOR.MINOR, e.g. 13.0): {cuda!r}")
    major = int(cuda.split(".")[0])
    if major < 13:
        raise ToolkitError(
            f"CUDA {cuda}: the pip toolkit path is for CUDA 13+ (CUDA 12 wheels are named nvidia-*-cu12 and lack a "
            "complete nvcc); install the toolkit with scripts/install-cuda-manylinux.sh or NVIDIA's installer instead"
        )
    meta = PINNED_META.get(cuda)
    extras = COMPILE_EXTRAS + (MATH_EXTRAS if math_headers else ())
    pin = f"=={meta}" if meta else f"=={cuda}.*"
    reqs = [f"cuda-toolkit[{','.join(extras)}]{pin}"]
    reqs += [f"{pkg}=={cuda}.*" for pkg in EXTRA_PACKAGES]
    return reqs


def pip_install(reqs: list[str], target: Path, python: str) -> None:
    cmd = [
        python,
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
        "--upgrade",
        "--target",
        str(target),
        *reqs,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise ToolkitError(f"pip could not install {' '.join(reqs)} (exit {proc.returncode}):\n{tail}")


def find_roots(site: Path, major: int) -> list[Path]:
    """``site/nvidia/cu<major>`` (CUDA 13 layout) and the per-component roots of older layouts."""
    nv = site / "nvidia"
    roots = [nv / f"cu{major}"] + sorted(p for p in nv.glob("cuda_*") if p.is_dir())
    return [r for r in roots if r.is_dir()]


def interpreter_sites(python: str) -> list[Path]:
    """The site-packages directories of ``python`` (where a CUDA torch put its nvidia-* wheels)."""
    code = "import json, site, sysconfig; print(json.dumps(sorted({sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib'], *site.getsitepackages()})))"
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return []
    import json

    return [Path(p) for p in json.loads(out.stdout) if Path(p).is_dir()]


def _link(target: Path, name: Path) -> None:
    if name.is_symlink() or name.exists():
        if name.is_symlink() and os.readlink(name) == str(target):
            return
        if name.is_dir() and not name.is_symlink():
            shutil.rmtree(name)
        else:
            name.unlink()
    name.symlink_to(target)


def assemble(roots: list[Path], dest: Path) -> Path:
    """Merge toolkit roots into ``dest`` (a CUDA_HOME of symlinks); returns ``dest``."""
    nvcc_roots = [r for r in roots if (r / "bin" / "nvcc").is_file()]
    if not nvcc_roots:
        raise ToolkitError(f"no bin/nvcc under any of {[str(r) for r in roots]}: install nvidia-cuda-nvcc")
    top = nvcc_roots[0]
    dest.mkdir(parents=True, exist_ok=True)
    _link(top / "bin", dest / "bin")
    if (top / "nvvm").is_dir():
        _link(top / "nvvm", dest / "nvvm")
    for sub in ("include", "lib64"):
        d = dest / sub
        if d.is_symlink():
            d.unlink()
        d.mkdir(exist_ok=True)
    # Merge: the first root that has an entry wins (the nvcc root first).
    ordered = [top] + [r for r in roots if r != top]
    for root in ordered:
        for inc in (root / "include",):
            if inc.is_dir():
                for entry in inc.iterdir():
                    if not (dest / "include" / entry.name).exists():
                        _link(entry.resolve(), dest / "include" / entry.name)
        for lib in (root / "lib64", root / "lib"):
            if lib.is_dir():
                for entry in lib.iterdir():
                    if not (dest / "lib64" / entry.name).exists():
                        _link(entry.resolve(), dest / "lib64" / entry.name)
    if not (dest / "include" / "cuda_runtime.h").exists():
        raise ToolkitError("cuda_runtime.h not found in any root: install nvidia-cuda-runtime")
    cudart = sorted((dest / "lib64").glob("libcudart.so.*"))
    if not (dest / "lib64" / "libcudart.so").exists():
        if not cudart:
            raise ToolkitError("libcudart.so.* not found in any root: install nvidia-cuda-runtime")
        _link(cudart[-1].resolve(), dest / "lib64" / "libcudart.so")
    (dest / "lib").exists() or _link(dest / "lib64", dest / "lib")
    return dest


def nvcc_version(home: Path) -> Optional[str]:
    try:
        out = subprocess.run([str(home / "bin" / "nvcc"), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+\.\d+)", out.stdout)
    return m.group(1) if m else None


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cuda", help="CUDA major.minor, e.g. 13.0")
    parser.add_argument(
        "--prefix",
        type=Path,
        required=True,
        help="where to install (PREFIX/site) and assemble the CUDA_HOME (PREFIX/cuda)",
    )
    parser.add_argument("--python", default=sys.executable, help="interpreter whose pip installs the wheels")
    parser.add_argument(
        "--math-headers",
        action="store_true",
        help="also install the cuBLAS/cuSPARSE/cuSOLVER wheels (large; a CUDA torch already brings them)",
    )
    parser.add_argument(
        "--assemble-only",
        nargs="+",
        type=Path,
        metavar="ROOT",
        help="no pip: merge these existing toolkit roots (each with bin/include/lib) into PREFIX/cuda",
    )
    parser.add_argument("--quiet", action="store_true", help="print only the CUDA_HOME")
    args = parser.parse_args(argv)
    try:
        home = args.prefix.resolve() / "cuda"
        if args.assemble_only:
            roots = [r.resolve() for r in args.assemble_only]
        else:
            site = args.prefix.resolve() / "site"
            reqs = requirements(args.cuda, math_headers=args.math_headers)
            if not args.quiet:
                print(f"pip install --target {site} {' '.join(reqs)}", file=sys.stderr)
            pip_install(reqs, site, args.python)
            major = int(args.cuda.split(".")[0])
            roots = find_roots(site, major) + [r for s in interpreter_sites(args.python) for r in find_roots(s, major)]
        assemble(roots, home)
        got = nvcc_version(home)
        if got != args.cuda:
            raise ToolkitError(f"assembled {home} but its nvcc reports CUDA {got}, not {args.cuda}")
    except ToolkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(
            f"CUDA {args.cuda} toolkit assembled; use: export CUDA_HOME={home} PATH={home}/bin:$PATH", file=sys.stderr
        )
    print(home)
    return 0


if __name__ == "__main__":
    sys.exit(main())
