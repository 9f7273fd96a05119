"""The install commands every part of the project prints (doctor, the import guard, the landing page,
the README), made in one place.

Each command installs torch and causal-conv1d *together*: torch comes from PyTorch's index of the
variant's accelerator (``https://download.pytorch.org/whl/cpu/`` ...), causal-conv1d from the
variant's index of our site. Without the torch index, a venv without torch gets PyPI's default torch
(a CUDA build) next to, say, a ``+cpu.torch2.13`` wheel, and the import guard refuses the pair.

- pip: ``--index-url`` = PyTorch's index of the accelerator (it mirrors torch's dependencies),
  ``--extra-index-url`` = the variant's index, ``--only-binary causal-conv1d`` (never the sdist).
- uv: ``--index NAME=URL`` for the variant's index, then for PyTorch's (both ahead of the default
  index, which stays for anything else); uv's default ``first-index`` strategy takes causal-conv1d
  from the variant's index and torch (which that index does not have) from PyTorch's only.
- a uv project: both indexes ``explicit = true`` and pinned in ``[tool.uv.sources]``.

From source (no wheel for the combination, or a build for this very machine): the sdist of *this*
project, pinned to its exact version and taken from the site's ``source/`` index
(``causal_conv1d_contract.layout``) -- never an unpinned ``causal-conv1d``, which resolves to
whatever PyPI holds under the name (upstream's 1.7.0 sdist) -- with ``--force-reinstall --no-deps``,
so that it also repairs an install whose version already satisfies the pin and never touches torch.

``torch_spec`` is what to pin torch to: ``==2.13.*`` on the landing page, the running torch's exact
public version (``==2.13.0``) in doctor and the guard, so the command never swaps an installed torch.

Stdlib only, and no import of torch or the ``causal_conv1d`` package: the import guard, doctor (no
``packaging`` in a user's venv), index_site and the README's tests all use it.
"""

from __future__ import annotations

from typing import Optional

from causal_conv1d_contract.layout import UV_SOURCE_INDEX_NAME, source_index_url, uv_index_name, variant_index_url
from causal_conv1d_contract.project import PACKAGE_VERSION, PROJECT_NAME
from causal_conv1d_contract.variants import BuildVariant

__all__ = [
    "PYTORCH_INDEX_URL",
    "torch_index_url",
    "install_commands",
    "sdist_commands",
    "source_commands",
    "repair_commands",
    "no_torch_advice",
]

#: PyTorch's package index; ``<this><accel>/`` holds the torch builds of one accelerator.
PYTORCH_INDEX_URL = "https://download.pytorch.org/whl/"


def torch_index_url(accel: str, pytorch_index: str = PYTORCH_INDEX_URL) -> str:
    """``cu128`` -> ``https://download.pytorch.org/whl/cu128/``."""
    base = pytorch_index if pytorch_index.endswith("/") else pytorch_index + "/"
    return f"{base}{accel}/"


def install_commands(
    base: str,
    variant: BuildVariant,
    torch_spec: str,
    *,
    version: Optional[str] = None,
    torch_accel: Optional[str] = None,
    pytorch_index: str = PYTORCH_INDEX_URL,
) -> dict[str, str]:
    """pip / uv / uv-project commands installing torch ``torch_spec`` and causal-conv1d of ``variant``.

    ``version``: pin causal-conv1d to this exact version (``1.7.0+cpu.torch2.13``); None: the newest.
    ``variant`` may be a stable-ABI build (``stable2.10-cu13``: its family page, one wheel for every
    torch >= 2.10 of a CUDA major), which has no single accelerator: ``torch_accel`` names the torch
    build (``cu130``) whose PyTorch index the command uses. For a per-minor variant it defaults to the
    variant's own accelerator.
    """
    accel = torch_accel or getattr(variant, "accel", None)
    if not accel:
        raise ValueError(f"install_commands: {variant.name} has no single torch build; pass torch_accel")
    url = variant_index_url(base, variant)
    torch_url = torch_index_url(accel, pytorch_index)
    name = uv_index_name(variant)
    torch_name = f"pytorch-{accel}"
    ours = f'"{PROJECT_NAME}=={version}"' if version else PROJECT_NAME
    torch = f'"torch{torch_spec}"'
    return {
        "pip": (
            f"pip install {torch} {ours} --only-binary {PROJECT_NAME} --index-url {torch_url} --extra-index-url {url}"
        ),
        "uv": f"uv pip install {torch} {ours} --index {name}={url} --index {torch_name}={torch_url}",
        "uv_pyproject": (
            f'[project]\ndependencies = ["torch{torch_spec}", "{PROJECT_NAME}"]\n\n'
            f'[[tool.uv.index]]\nname = "{torch_name}"\nurl = "{torch_url}"\nexplicit = true\n\n'
            f'[[tool.uv.index]]\nname = "{name}"\nurl = "{url}"\nexplicit = true\n\n'
            f'[tool.uv.sources]\ntorch = {{ index = "{torch_name}" }}\n'
            f'{PROJECT_NAME} = {{ index = "{name}" }}'
        ),
    }


def sdist_commands(base: str, *, version: str = PACKAGE_VERSION) -> dict[str, str]:
    """pip / uv commands that build and install this project's sdist ``version`` from the site's
    ``source/`` index next to the torch already installed (the sdist looks up a prebuilt wheel first,
    else compiles against that torch). ``--force-reinstall`` (uv: ``--reinstall-package``) replaces an
    installed build of the same version; ``--no-deps`` keeps torch as it is; ``--no-cache-dir`` skips a
    wheel pip built for another torch. uv builds without isolation (setuptools and packaging must be
    installed) so that the build sees that torch."""
    url = source_index_url(base)
    pin = f'"{PROJECT_NAME}=={version}"'
    return {
        "pip": (
            f"pip install --no-cache-dir --force-reinstall --no-deps --no-binary {PROJECT_NAME} {pin} "
            f"--extra-index-url {url}"
        ),
        "uv": (
            f"uv pip install --reinstall-package {PROJECT_NAME} --no-deps --no-binary {PROJECT_NAME} "
            f"--no-build-isolation-package {PROJECT_NAME} {pin} --index {UV_SOURCE_INDEX_NAME}={url}"
        ),
    }


def source_commands(
    accel: str, torch_spec: str, *, base: str, version: str = PACKAGE_VERSION, pytorch_index: str = PYTORCH_INDEX_URL
) -> dict[str, str]:
    """No wheel for the combination: the matching torch first, then this project's sdist
    (:func:`sdist_commands`), which looks up the index and else compiles against that torch."""
    torch_url = torch_index_url(accel, pytorch_index)
    sdist = sdist_commands(base, version=version)
    return {
        "torch": f'pip install "torch{torch_spec}" --index-url {torch_url}',
        "pip": sdist["pip"],
        "uv_torch": f'uv pip install "torch{torch_spec}" --index-url {torch_url} && uv pip install setuptools packaging',
        "uv": sdist["uv"],
    }


def repair_commands(base: str, variant: BuildVariant, version: str) -> dict[str, str]:
    """Replace an installed causal-conv1d by the wheel ``version`` of ``variant`` (``1.7.0.post1+cpu.stable2.10``),
    torch untouched: what repairs a venv where a wheel of the same public version but for another torch
    is installed (a plain install says "Requirement already satisfied" there)."""
    url = variant_index_url(base, variant)
    pin = f'"{PROJECT_NAME}=={version}"'
    return {
        "pip": (f"pip install --force-reinstall --no-deps {pin} --only-binary {PROJECT_NAME} --extra-index-url {url}"),
        "uv": f"uv pip install --reinstall-package {PROJECT_NAME} --no-deps {pin} --index {uv_index_name(variant)}={url}",
    }


def no_torch_advice(base: str, *, pytorch_index: str = PYTORCH_INDEX_URL) -> str:
    """What to do without torch (the import guard and doctor say it): torch from PyTorch's index of the
    build wanted -- a plain ``pip install torch`` gets PyPI's torch, a CUDA build on Linux -- then
    causal-conv1d for it (the landing page and doctor print the exact commands)."""
    return (
        f"Install torch first, from PyTorch's index of the build you want: pip install torch --index-url "
        f"{torch_index_url('cpu', pytorch_index)} (CPU) or --index-url {torch_index_url('cu130', pytorch_index)} "
        f"(CUDA 13.0), not a plain `pip install torch` (on Linux PyPI's torch is a CUDA build); then "
        f"python -m causal_conv1d doctor, or the chooser at {base}index.html, prints the causal-conv1d command"
    )
