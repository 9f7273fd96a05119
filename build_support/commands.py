"""Load ``causal_conv1d/_commands.py`` (the install commands every part prints) without importing the
``causal_conv1d`` package (which needs torch): index_site renders the landing page's commands with it.

    from build_support.commands import commands
    commands.install_commands(contract, site_url, variant, "==2.13.*")
"""

from __future__ import annotations

from build_support.contract import REPO_ROOT, load_by_path

COMMANDS_PATH = REPO_ROOT / "causal_conv1d" / "_commands.py"

commands = load_by_path("_causal_conv1d_commands", COMMANDS_PATH)
