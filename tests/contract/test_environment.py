"""The contract lists every environment variable the project reads, and nothing it does not read.

Readers: the compiled extension (csrc/: ``switch_on("NAME")`` / ``env_flag("NAME")`` / ``getenv("NAME")``,
and the kernel paths' switches in csrc/kernel_paths.h: ``{"path", KernelOp::k..., "NAME"}``),
Python (``contract.ENV_*`` constants or literal names), the shell scripts and the workflows. Names that
appear in csrc/ only as preprocessor macros (``CAUSAL_CONV1D_WITH_CUDA``, tuning constants) are not
environment variables.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import causal_conv1d_contract as contract
import causal_conv1d_contract.environment

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"\bCAUSAL_CONV1D_[A-Z0-9_]*[A-Z0-9]\b")
CSRC_READ = re.compile(
    r"\b(?:switch_on|env_flag|getenv)\(\s*\"(CAUSAL_CONV1D_[A-Z0-9_]+)\"|KernelOp::k\w+,\s*\"(CAUSAL_CONV1D_[A-Z0-9_]+)\"\}"
)
#: Where the names are defined (environment.py) and re-exported (__init__.py): not readers.
CONTRACT_FILES = {Path(contract.__file__).resolve(), Path(causal_conv1d_contract.environment.__file__).resolve()}
MACRO_LINE = re.compile(r"^\s*#\s*(?:if|ifdef|ifndef|elif|define|undef)\b")


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--", *patterns], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / p for p in out.stdout.split() if (ROOT / p).is_file()]


def csrc_reads() -> set[str]:
    return {a or b for p in tracked("csrc/*") for a, b in CSRC_READ.findall(p.read_text(encoding="utf-8"))}


def csrc_macros() -> set[str]:
    names: set[str] = set()
    for p in tracked("csrc/*"):
        for line in p.read_text(encoding="utf-8").splitlines():
            if MACRO_LINE.match(line):
                names.update(NAME.findall(line))
    return names - csrc_reads()


def script_names() -> dict[str, set[str]]:
    """Every CAUSAL_CONV1D_* name in Python, shell, workflow and config files (the contract excluded)."""
    files = tracked("*.py", "*.sh", "*.yml", "*.yaml", "*.toml", ".ci/*")
    found: dict[str, set[str]] = {}
    for p in files:
        if p.resolve() in CONTRACT_FILES or p.resolve() == Path(__file__).resolve():
            continue
        for name in NAME.findall(p.read_text(encoding="utf-8", errors="replace")):
            found.setdefault(name, set()).add(str(p.relative_to(ROOT)))
    return found


def test_kernel_switches_are_the_names_csrc_reads() -> None:
    assert csrc_reads() == set(contract.KERNEL_SWITCHES)
    assert set(contract.KERNEL_SWITCHES) <= set(contract.ENVIRONMENT)


def test_every_name_read_is_in_the_contract() -> None:
    known = set(contract.ENVIRONMENT) | set(contract.DEV_ENVIRONMENT) | csrc_macros()
    unknown = {n: sorted(where) for n, where in script_names().items() if n not in known}
    assert not unknown, f"environment variables read but not listed in causal_conv1d_contract/environment.py: {unknown}"


def test_every_name_listed_is_read_somewhere() -> None:
    constants = {getattr(contract, a): a for a in dir(contract) if a.startswith("ENV_")}
    assert set(constants) <= set(contract.ENVIRONMENT), "every ENV_* constant is in ENVIRONMENT"
    used_attrs = set()
    for p in tracked("*.py"):
        if p.resolve() not in CONTRACT_FILES:
            used_attrs.update(re.findall(r"\b(ENV_[A-Z0-9_]+)\b", p.read_text(encoding="utf-8")))
    literal = set(script_names()) | csrc_reads()
    for name in [*contract.ENVIRONMENT, *contract.DEV_ENVIRONMENT]:
        assert name in literal or constants.get(name) in used_attrs, f"{name} is listed but nothing reads it"


def test_no_name_is_both_a_setting_and_a_dev_variable() -> None:
    assert not set(contract.ENVIRONMENT) & set(contract.DEV_ENVIRONMENT)
    for name in [*contract.ENVIRONMENT, *contract.DEV_ENVIRONMENT]:
        assert NAME.fullmatch(name), name
