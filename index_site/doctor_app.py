"""``<site>/doctor.pyz``: ``python -m causal_conv1d doctor`` before causal-conv1d is installed.

A zip application (PEP 441; stdlib only, any Python >= 3.9) holding the doctor (causal_conv1d/doctor.py)
and the import guard it uses (causal_conv1d/_guard.py) as the package ``causal_conv1d_doctor``, the
contracts (causal_conv1d_contract/) and ``causal_conv1d_doctor/site.json`` naming the site that serves
it, which the doctor asks unless ``CAUSAL_CONV1D_INDEX_URL`` is set. A user downloads it and runs
``python doctor.pyz``: torch, GPUs, the variant this machine needs, whether the site has its wheel and
the exact install commands -- with or without causal-conv1d installed. Written byte for byte the same
for the same sources and site URL (fixed timestamps, sorted entries).
"""

from __future__ import annotations

__all__ = ["DOCTOR_APP_NAME", "APP_PACKAGE", "doctor_app", "run_command"]

import io
import json
import zipfile
from pathlib import Path

import causal_conv1d_contract as contract
from index_site.errors import IndexSiteError

#: Its path under the site root.
DOCTOR_APP_NAME = "doctor.pyz"
#: The package the doctor's modules form inside the zip (not ``causal_conv1d``: an installed
#: causal-conv1d must stay the one diagnosed).
APP_PACKAGE = "causal_conv1d_doctor"
_ROOT = Path(contract.__file__).resolve().parent.parent
_MODULES = ("doctor.py", "_guard.py")  # from causal_conv1d/
_STAMP = (2020, 1, 1, 0, 0, 0)  # every entry's time: reproducible bytes

_MAIN = f'''"""causal-conv1d doctor: python doctor.pyz [--json] [--offline] (see {APP_PACKAGE}/doctor.py)."""
import sys

from {APP_PACKAGE}.doctor import main

sys.exit(main(sys.argv[1:]))
'''
_INIT = '''"""The causal-conv1d doctor as served by the site (doctor.pyz): causal_conv1d/doctor.py and _guard.py."""
'''


def run_command(site_url: str) -> str:
    """The command that downloads and runs it (Python only: no curl needed, Windows included)."""
    url = contract.site_base(site_url) + DOCTOR_APP_NAME
    return (
        f"python -c \"import urllib.request as u; u.urlretrieve('{url}', '{DOCTOR_APP_NAME}')\" && "
        f"python {DOCTOR_APP_NAME}"
    )


def _add(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, _STAMP)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data)


def doctor_app(site_url: str) -> bytes:
    """The zip application's bytes, for a site served at ``site_url``."""
    files: dict[str, bytes] = {
        "__main__.py": _MAIN.encode("utf-8"),
        f"{APP_PACKAGE}/__init__.py": _INIT.encode("utf-8"),
        f"{APP_PACKAGE}/site.json": (json.dumps({"site_url": contract.site_base(site_url)}) + "\n").encode("utf-8"),
    }
    try:
        for module in _MODULES:
            files[f"{APP_PACKAGE}/{module}"] = (_ROOT / contract.DIST_NAME / module).read_bytes()
        for path in sorted((_ROOT / "causal_conv1d_contract").glob("*.py")):
            files[f"causal_conv1d_contract/{path.name}"] = path.read_bytes()
    except OSError as exc:
        raise IndexSiteError(
            f"cannot read the doctor's sources for {DOCTOR_APP_NAME} ({exc}); run index_site "
            "from a checkout of causal-conv1d"
        ) from None
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name in sorted(files):
            _add(zf, name, files[name])
    return buf.getvalue()
