"""causal_conv1d_contract.cli: the tools' shared error base and the arguments -> options step."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from build_matrix.errors import BuildMatrixError, UnknownValue
from causal_conv1d_contract import cli
from index_site.errors import IndexSiteError, PublishConflict
from release.errors import ReleaseError, UsageError


@dataclasses.dataclass(frozen=True)
class _Options:
    out: str
    strict: bool = False
    jobs: int = 1


def test_every_tools_errors_share_the_base_and_its_codes() -> None:
    for family in (BuildMatrixError, IndexSiteError, ReleaseError):
        assert issubclass(family, cli.ToolError) and family.exit_code == cli.EXIT_FAILURE
    assert UsageError.exit_code == cli.EXIT_USAGE == 2
    assert UnknownValue.exit_code == 3 and PublishConflict.exit_code == 3  # families keep their own codes


def test_options_take_the_arguments_of_their_field_names() -> None:
    args = argparse.Namespace(out="site", strict=True, traceback=False, command="build")
    assert cli.options_from_args(_Options, args) == _Options("site", True, 1)  # jobs keeps its default
    assert cli.options_from_args(_Options, args, jobs=4) == _Options("site", True, 4)


def test_bad_uses_are_errors_naming_the_problem() -> None:
    with pytest.raises(TypeError, match="has no field"):
        cli.options_from_args(_Options, argparse.Namespace(out="x"), job=4)  # a typo of a field name
    with pytest.raises(TypeError, match="is not a dataclass"):
        cli.options_from_args(dict, argparse.Namespace())
    with pytest.raises(TypeError):  # a required field the arguments do not name
        cli.options_from_args(_Options, argparse.Namespace(strict=True))
