"""What the command-line tools share: the base class of their user-facing errors with its exit codes,
the declaration of a subcommand with its handler, the step from parsed arguments to an options dataclass,
and integer arguments within bounds.

``python -m build_matrix``, ``python -m index_site`` and ``python -m release`` each define their
error families as subclasses of :class:`ToolError` (``build_matrix/errors.py``, ``index_site/errors.py``,
``release/errors.py``), catch them once in ``main()`` and exit with the error's ``exit_code``.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from typing import Any, Callable, Optional, TypeVar

__all__ = [
    "EXIT_OK",
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "EXIT_INTERRUPTED",
    "ToolError",
    "Handler",
    "add_command",
    "options_from_args",
    "bounded_int",
]

EXIT_OK = 0
EXIT_FAILURE = 1  #: a failure with a message (a tool's families may use codes of their own)
EXIT_USAGE = 2  #: bad options or input (argparse exits with 2 as well)
EXIT_INTERRUPTED = 130  #: Ctrl-C

T = TypeVar("T")

#: What a subcommand runs: the parsed arguments in, the exit status out.
Handler = Callable[[argparse.Namespace], int]


class ToolError(Exception):
    """Base class of a tool's user-facing failures: the message says what failed and what to do;
    ``exit_code`` is the process's exit status, given where a family is declared:
    ``class FetchError(BuildMatrixError, exit_code=5)`` (a family without one keeps its base's)."""

    exit_code = EXIT_FAILURE

    def __init_subclass__(cls, *, exit_code: Optional[int] = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if exit_code is not None:
            cls.exit_code = exit_code


def add_command(
    subparsers: argparse._SubParsersAction[Any],  # what add_subparsers returns
    name: str,
    handler: Optional[Handler],
    help: Optional[str] = None,
    **kwargs: Any,
) -> argparse.ArgumentParser:
    """The subcommand ``name``; its parsed arguments carry ``handler`` as ``args.handler`` (None: a group
    of subcommands). Without ``help``, the handler's docstring is the text: its first paragraph the
    one-line help, the rest (unless ``description`` is given) the description. ``kwargs`` go to
    ``add_parser``."""
    if help is None and handler is not None:
        help, _, rest = inspect.cleandoc(handler.__doc__ or "").partition("\n\n")
        kwargs.setdefault("description", rest or None)
    parser: argparse.ArgumentParser = subparsers.add_parser(name, help=help, **kwargs)
    if handler is not None:
        parser.set_defaults(handler=handler)
    return parser


def options_from_args(cls: type[T], args: argparse.Namespace, **overrides: object) -> T:
    """An instance of the dataclass ``cls`` whose fields take the parsed arguments of the same name
    (``overrides`` first: a field whose value needs converting); fields the arguments do not name
    keep their defaults."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"options_from_args: {cls!r} is not a dataclass")
    parsed = vars(args)
    unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
        raise TypeError(f"options_from_args: {cls.__name__} has no field(s) {', '.join(unknown)}")
    values: dict[str, object] = {f.name: parsed[f.name] for f in dataclasses.fields(cls) if f.init and f.name in parsed}
    values.update(overrides)
    return cls(**values)


def bounded_int(low: int, high: Optional[int], not_an_int: str, out_of_range: str) -> Callable[[str], int]:
    """An argparse ``type``: an integer from ``low`` to ``high`` (None: no upper bound). The messages are
    formatted with ``text`` (the argument as given) and ``value`` (the integer read)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(not_an_int.format(text=text)) from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(out_of_range.format(value=value))
        return value

    return parse
