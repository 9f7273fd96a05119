"""The torch a build compiles against: probed in this interpreter or another one (a subprocess).

Stdlib only at import time; torch is imported inside the probe."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from typing import Optional

__all__ = ["TorchInfo", "torch_info"]


@dataclasses.dataclass
class TorchInfo:
    importable: bool
    version: Optional[str] = None
    cuda: Optional[str] = None
    hip: Optional[str] = None
    cxx11_abi: Optional[bool] = None
    location: Optional[str] = None
    error: Optional[str] = None

    @property
    def build(self) -> str:
        if not self.importable:
            return "none"
        return "rocm" if self.hip else ("cuda" if self.cuda else "cpu")


_TORCH_PROBE = r"""
import json, sys
try:
    import torch
except Exception as exc:
    print(json.dumps({"importable": False, "error": f"{type(exc).__name__}: {exc}"}))
    sys.exit(0)
print(json.dumps({"importable": True, "version": str(torch.__version__), "cuda": torch.version.cuda,
    "hip": getattr(torch.version, "hip", None), "cxx11_abi": bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", False)),
    "location": str(torch.__file__)}))
"""


#: Reads torch's version.py and scans libc10 for ``__cxx11`` symbols instead of importing torch
#: (seconds saved on every sdist install); anything unexpected -> the full import above.
_TORCH_FAST_PROBE = r"""
import importlib.util, json, os, sys
spec = importlib.util.find_spec("torch")
if spec is None or not spec.submodule_search_locations:
    print(json.dumps({"importable": False, "error": "ModuleNotFoundError: No module named 'torch'"}))
    sys.exit(0)
root = list(spec.submodule_search_locations)[0]
ns = {}
with open(os.path.join(root, "version.py"), encoding="utf-8") as fh:
    exec(compile(fh.read(), "torch/version.py", "exec"), ns)
abi = None
for name in ("libc10.so", "libtorch_cpu.so"):
    path = os.path.join(root, "lib", name)
    if os.path.isfile(path):
        with open(path, "rb") as fh:
            abi = b"NSt7__cxx11" in fh.read()  # std::__cxx11:: types appear only with the cxx11 ABI
        break
if abi is None:
    sys.exit(3)
print(json.dumps({"importable": True, "version": str(ns["__version__"]), "cuda": ns.get("cuda"),
    "hip": ns.get("hip"), "cxx11_abi": abi, "location": os.path.join(root, "__init__.py")}))
"""


def torch_info(
    executable: Optional[str] = None, env: Optional[dict[str, str]] = None, timeout: float = 120, fast: bool = False
) -> TorchInfo:
    """The torch of this interpreter (in-process), or of ``executable`` run with ``env``.

    ``fast`` (other interpreters on Linux): read torch's files instead of importing it.
    """
    if executable is None:
        try:
            import torch  # noqa: PLC0415
        except Exception as exc:  # noqa: BLE001  (a broken torch raises more than ImportError)
            return TorchInfo(False, error=f"{type(exc).__name__}: {exc}")
        return TorchInfo(
            True,
            str(torch.__version__),
            torch.version.cuda,
            getattr(torch.version, "hip", None),
            bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", False)),
            str(torch.__file__),
        )
    if fast and sys.platform.startswith("linux"):
        try:
            out = subprocess.run(
                [executable, "-c", _TORCH_FAST_PROBE],
                capture_output=True,
                text=True,
                env=env,
                timeout=timeout,
                check=False,
            )
            if out.returncode == 0:
                return TorchInfo(**json.loads(out.stdout.strip().splitlines()[-1]))
        except (OSError, subprocess.SubprocessError, ValueError, IndexError, TypeError, KeyError):
            pass  # the full import below decides
    try:
        out = subprocess.run(
            [executable, "-c", _TORCH_PROBE], capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
        data = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        return TorchInfo(False, error=f"could not run {executable}: {exc}")
    return TorchInfo(**data)
