"""Load ``causal_conv1d/_contract.py`` without importing the ``causal_conv1d`` package.

Importing the package would import torch and the compiled extension; the tools that share the
contract (setup.py, build_matrix, index_site) must work without either. Use::

    from build_support.contract import contract
    contract.Variant.parse("torch2.7-cu128")
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parent.parent
CONTRACT_PATH = REPO_ROOT / "causal_conv1d" / "_contract.py"
_MODULE_NAME = "_causal_conv1d_contract"


def load_by_path(module_name: str, path: Path) -> ModuleType:
    """Execute ``path`` as module ``module_name`` once per process (without importing its package)."""
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses need the module registered while executing
    spec.loader.exec_module(module)
    return module


contract = load_by_path(_MODULE_NAME, CONTRACT_PATH)
