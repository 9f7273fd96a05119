"""Small real wheels for testing the wheel checks, compiled here with g++ in about a second.

Each wheel holds a genuine abi3 extension (``causal_conv1d/_C.abi3.so``) that uses
``std::string`` (so its C++ ABI shows in its symbols), a METADATA, a build record and a RECORD.
Keyword arguments break one thing at a time.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sysconfig
import zipfile
from pathlib import Path
from typing import Optional

import causal_conv1d_contract as contract

_SOURCE = r"""
#include <Python.h>
#include <string>
#include <stdexcept>

std::string causal_conv1d_describe(const std::string& what) {
    if (what.empty()) throw std::invalid_argument("causal_conv1d: empty " + what);
    return "causal_conv1d:" + what;
}

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
extern "C" PyObject* PyInit__C(void) { return PyModule_Create(&module_def); }
"""

_NON_ABI3_SOURCE = r"""
extern "C" int causal_conv1d_peek(void* obj) { return PyFrame_GetLineNumber((PyFrameObject*)obj); }
"""

_CUDA_STUB = 'extern "C" int cuInit(unsigned int flags) { return (int)flags; }\n'

#: Imports of torch's API, left undefined in the library (resolved by torch's libraries at load):
#: "c_shims" as a stable-ABI build makes them (C functions only), "torch_cxx" as an ATen build does.
_IMPORTS = {
    "": "",
    "c_shims": (
        'extern "C" bool aoti_torch_grad_mode_is_enabled();\n'
        'extern "C" int torch_get_num_threads(unsigned int* out);\n'
        'extern "C" int causal_conv1d_uses_shims() { unsigned int n = 0; torch_get_num_threads(&n);'
        " return aoti_torch_grad_mode_is_enabled() + (int)n; }\n"
    ),
    "torch_cxx": (
        "namespace c10 { struct TensorImpl; void causal_conv1d_probe(TensorImpl*); }\n"
        "namespace at { int causal_conv1d_threads(); }\n"
        'extern "C" int causal_conv1d_uses_aten() { c10::causal_conv1d_probe(nullptr); return at::causal_conv1d_threads(); }\n'
    ),
}


_COMPILED: dict[tuple[bool, bool, bool, str], Path] = {}


def compile_extension(
    workdir: Path, *, cxx11_abi: bool = True, link_libcuda: bool = False, non_abi3: bool = False, imports: str = ""
) -> Path:
    """Compile ``_C.abi3.so`` into ``workdir``; returns its path (one compile per flavour per session).
    ``imports``: a key of _IMPORTS (torch symbols the library imports)."""
    key = (cxx11_abi, link_libcuda, non_abi3, imports)
    workdir.mkdir(parents=True, exist_ok=True)
    if key in _COMPILED and _COMPILED[key].exists():
        import shutil

        (workdir / "ext.cpp").write_bytes((_COMPILED[key].parent / "ext.cpp").read_bytes())
        return Path(shutil.copy2(_COMPILED[key], workdir / "_C.abi3.so"))
    src = workdir / "ext.cpp"
    body = _SOURCE
    defines = ["-DPy_LIMITED_API=0x03090000"]
    if non_abi3:
        # PyFrame_GetLineNumber is outside the 3.9 limited API: compile without Py_LIMITED_API.
        defines = []
        body = "#include <Python.h>\n#include <frameobject.h>\n" + body + _NON_ABI3_SOURCE
    src.write_text(body + _IMPORTS[imports])
    out = workdir / "_C.abi3.so"
    cmd = [
        "g++",
        "-shared",
        "-fPIC",
        "-O0",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(cxx11_abi)}",
        *defines,
        f"-I{sysconfig.get_paths()['include']}",
        str(src),
        "-o",
        str(out),
    ]
    if link_libcuda:
        stub_dir = workdir / "stub"
        stub_dir.mkdir(exist_ok=True)
        (stub_dir / "cuda.c").write_text(_CUDA_STUB.replace('extern "C" ', ""))
        subprocess.run(
            [
                "gcc",
                "-shared",
                "-fPIC",
                "-Wl,-soname,libcuda.so.1",
                str(stub_dir / "cuda.c"),
                "-o",
                str(stub_dir / "libcuda.so"),
            ],
            check=True,
        )
        cmd += [f"-L{stub_dir}", "-Wl,--no-as-needed", "-lcuda"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    _COMPILED[key] = out
    return out


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def make_wheel(
    dest_dir: Path,
    *,
    variant: str = "torch2.13-cpu",
    platform: str = "linux_x86_64",
    filename: Optional[str] = None,
    cxx11_abi: Optional[bool] = None,
    link_libcuda: bool = False,
    non_abi3: bool = False,
    requires: Optional[list[str]] = None,
    record_overrides: Optional[dict] = None,
    drop_record: bool = False,
    extra_files: Optional[dict[str, bytes]] = None,
    imports: str = "",
    build_torch: Optional[str] = None,
) -> Path:
    """A wheel of this project for ``variant`` (``torch2.13-cpu`` or a stable one, ``stable2.10-cu13``,
    whose record says it was built against ``build_torch``); every keyword breaks one aspect on purpose."""
    v = contract.parse_build_variant(variant)
    stable = isinstance(v, contract.StableVariant)
    if stable:  # the torch a stable wheel was compiled against: the newest of its family we plan
        build = contract.Variant.parse(
            build_torch or {"cpu": "torch2.13-cpu", "cu12": "torch2.11-cu128"}.get(v.family, "torch2.14-cu130")
        )
    else:
        build = v
    abi = build.abi if cxx11_abi is None else cxx11_abi
    version = f"{contract.PACKAGE_VERSION}+{contract.local_version(v)}"
    name = filename or contract.wheel_filename(version, v, platform)
    so = compile_extension(
        dest_dir / f"build-{name[: -len('.whl')]}",
        cxx11_abi=abi,
        link_libcuda=link_libcuda,
        non_abi3=non_abi3,
        imports=imports,
    )
    pin = contract.torch_requirement(v.target, stable=True) if stable else contract.torch_requirement(v.torch_minor)
    reqs = [pin] if requires is None else requires
    dist_info = f"{contract.DIST_NAME}-{version}.dist-info"
    metadata = "\n".join(
        [
            "Metadata-Version: 2.1",
            f"Name: {contract.PROJECT_NAME}",
            f"Version: {version}",
            f"Requires-Python: {contract.REQUIRES_PYTHON}",
            *[f"Requires-Dist: {r}" for r in reqs],
            "",
            "",
        ]
    )
    record = {
        "version": version,
        "variant": v.name,
        "torch_version": f"{build.torch}.0+{build.accel}",
        "cuda_version": build.cuda,
        "cxx11_abi": build.abi,
        "cuda_archs": [] if build.cuda is None else ["9.0"],
        "with_cuda": build.cuda is not None,
        "platform": "linux_x86_64",
        "source_commit": None,
        "stable_abi_target": v.torch if stable else None,
        "cuda_major": None if build.cuda is None else int(build.cuda.split(".")[0]),
    }
    record.update(record_overrides or {})
    wheel_meta = f"Wheel-Version: 1.0\nGenerator: synthetic\nRoot-Is-Purelib: false\nTag: cp39-abi3-{platform}\n\n"
    files: dict[str, bytes] = {
        f"{contract.DIST_NAME}/__init__.py": b'"""synthetic test package"""\n',
        f"{contract.DIST_NAME}/_C.abi3.so": so.read_bytes(),
        f"{dist_info}/METADATA": metadata.encode(),
        f"{dist_info}/WHEEL": wheel_meta.encode(),
        f"{dist_info}/top_level.txt": f"{contract.DIST_NAME}\n".encode(),
    }
    for entry in contract.TOPLEVEL_ENTRIES:  # the wheel's other top-level modules (upstream's names)
        if entry.endswith(".py"):
            files[entry] = b'"""synthetic top-level module"""\n'
        elif entry != contract.DIST_NAME:
            files[f"{entry}/__init__.py"] = b'"""synthetic top-level package"""\n'
    if not drop_record:
        files[f"{contract.DIST_NAME}/{contract.BUILD_INFO_FILENAME}"] = json.dumps(record, indent=1).encode()
    files.update(extra_files or {})
    lines = [_record_line(k, data) for k, data in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(lines) + "\n").encode()
    path = dest_dir / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in files.items():
            zf.writestr(arcname, data)
    return path
