"""Build script for causal-conv1d.

Kept thin: the contracts live in causal_conv1d_contract/, the extension definition in
build_support/extension.py, the machine diagnosis in build_support/toolchain.py and the
index-first wheel step in build_support/prebuilt.py. See README.md ("Installing") for the
environment variables this honours.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from setuptools import find_packages, setup  # noqa: E402

import causal_conv1d_contract as contract  # noqa: E402
from build_support import build_info, extension, toolchain  # noqa: E402

#: setup.py commands that compile: only these diagnose the machine and need torch. Metadata and
#: sdist commands (egg_info, dist_info, sdist) work without torch.
BUILD_COMMANDS = {"build", "build_ext", "bdist_wheel", "install", "develop", "editable_wheel", "bdist_egg"}


def prepare_build() -> tuple[list, dict]:
    """(ext_modules, cmdclass). For a compiling command, diagnose the machine first and export
    CUDA_HOME/CPATH/TORCH_CUDA_ARCH_LIST/MAX_JOBS -- before extension.* imports
    torch.utils.cpp_extension, which reads CUDA_HOME at import."""
    if not BUILD_COMMANDS.intersection(sys.argv[1:]):
        return [], build_info.wrap_cmdclass({})
    try:
        diagnosis = toolchain.diagnose(ROOT / "build")
    except contract.InvalidSetting as exc:
        raise SystemExit(f"causal-conv1d: {exc}") from None
    print(
        "causal-conv1d: local build\n" + toolchain.format_report(diagnosis, with_fatal=False),
        file=sys.stderr,
        flush=True,
    )
    if diagnosis.fatal:  # each error once, as the stop message
        raise SystemExit("causal-conv1d: cannot build:\n" + "\n".join(p.text() for p in diagnosis.fatal))
    toolchain.apply(diagnosis)
    return extension.ext_modules(), build_info.wrap_cmdclass(extension.cmdclass())


def package_version() -> str:
    """The package version, with the local label the build driver stamps (if any)."""
    label = os.environ.get(contract.ENV_LOCAL_VERSION, "").strip()
    if not label:
        return contract.PACKAGE_VERSION
    contract.build_variant_from_local_version(label)  # validates (cu128.torch2.7, cu13.stable2.10)
    return f"{contract.PACKAGE_VERSION}+{label}"


EXT_MODULES, CMDCLASS = prepare_build()

setup(
    name=contract.PROJECT_NAME,
    version=package_version(),
    # causal_conv1d_contract: the shared contracts, torch-free and stdlib-only (this build, build_matrix,
    # index_site, the import guard and doctor all import it), shipped next to the package.
    packages=find_packages(include=["causal_conv1d", "causal_conv1d.*", "causal_conv1d_contract"]),
    py_modules=["causal_conv1d_cuda"],  # upstream's extension-module name, kept for `import causal_conv1d_cuda`
    package_data={"causal_conv1d": [contract.BUILD_INFO_FILENAME], "causal_conv1d_contract": ["py.typed"]},
    # The sdist's PKG-INFO must not pin the torch of the machine that made it (uv reads it as static
    # metadata): unpinned there; wheels and prepared metadata pin the torch they are built against.
    install_requires=["torch"] if "sdist" in sys.argv[1:] else extension.install_requires(),
    ext_modules=EXT_MODULES,
    cmdclass=CMDCLASS,
    options={"bdist_wheel": {"py_limited_api": contract.PYTHON_TAG}},
    zip_safe=False,
)
