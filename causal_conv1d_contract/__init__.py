"""The contracts every part of the project shares (see docs/ARCHITECTURE.md), one module each:

- :mod:`.project`: the distribution and import names, the version, the wheel tags;
- :mod:`.environment`: every environment variable and the TRUE/FALSE settings parser;
- :mod:`.variants`: variants (one torch minor, or a stable-ABI family), their names and labels;
- :mod:`.wheels`: wheel file names and the torch pin of a wheel's metadata;
- :mod:`.layout`: the site's URL layout and the index base;
- :mod:`.build_record`: the build record's file name and keys;
- :mod:`.commands`: the install commands every part prints;
- :mod:`.cli`: what the command-line tools share (the error base class, exit codes, arguments -> options);
- :mod:`.net`: the network code (the PEP 503/691 index client, index reachability).

This module only re-exports the names of the first six, so ``import causal_conv1d_contract as
contract; contract.Variant`` keeps working; ``commands``, ``cli`` and ``net`` are imported by name.

A top-level package of its own, shipped in the wheel and the sdist next to ``causal_conv1d``:
importing it runs no ``causal_conv1d/__init__.py`` (which imports torch and the compiled
extension), so setup.py and ``build_support`` (inside pip's isolated build environment, maybe
without torch), ``build_matrix``, ``index_site`` and the release rehearsal import it as they import
anything else, and so do the import guard and doctor. It must stay stdlib-only and importable on
Python 3.9: no torch, no compiled code, and no ``packaging`` at import (not a runtime requirement;
only :func:`parse_wheel_name` imports it).
"""

from __future__ import annotations

from causal_conv1d_contract import build_record, environment, layout, project, variants, wheels
from causal_conv1d_contract.build_record import *  # noqa: F403
from causal_conv1d_contract.environment import *  # noqa: F403
from causal_conv1d_contract.layout import *  # noqa: F403
from causal_conv1d_contract.project import *  # noqa: F403
from causal_conv1d_contract.variants import *  # noqa: F403
from causal_conv1d_contract.wheels import *  # noqa: F403

__all__: list[str] = []
__all__ += project.__all__
__all__ += environment.__all__
__all__ += variants.__all__
__all__ += wheels.__all__
__all__ += layout.__all__
__all__ += build_record.__all__
