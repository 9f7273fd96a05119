"""Load ``causal_conv1d/_commands.py`` (the install commands every part prints) without importing the
``causal_conv1d`` package (which needs torch): index_site renders the landing page's commands with it.

    from build_support.commands import commands
    commands.install_commands(contract, site_url, variant, "==2.13.*")
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from build_support.contract import REPO_ROOT

COMMANDS_PATH = REPO_ROOT / "causal_conv1d" / "_commands.py"
_MODULE_NAME = "_causal_conv1d_commands"


def _load() -> ModuleType:
    if _MODULE_NAME in sys.modules:
        return sys.modules[_MODULE_NAME]
    spec = importlib.util.spec_from_file_location(_MODULE_NAME, COMMANDS_PATH)
    assert spec is not None and spec.loader is not None, COMMANDS_PATH
    module = importlib.util.module_from_spec(spec)
    sys.modules[_MODULE_NAME] = module
    spec.loader.exec_module(module)
    return module


commands = _load()
