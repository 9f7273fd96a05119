"""The exception types of the ops' argument errors, in both op-layer builds.

The legacy (ATen) op layer raises TypeError / ValueError / RuntimeError itself. The LibTorch stable
ABI carries only a std::runtime_error's message across to Python (a RuntimeError whose message
starts with STD_TORCH_CHECK's "function, file:line, " prefix), so the stable op layer tags each
message with its type, ``[TypeError] x must be ...`` (csrc/torch_api.h). The Python API catches
RuntimeError around each op call and :func:`reraise` raises the tagged type with the text after
the tag: the same type and message as the legacy build. The ``try`` costs nothing when no error is
raised. Calls through ``torch.ops.causal_conv1d.*`` directly (no Python in between) keep torch's
RuntimeError, with the tag in the message.

The run-time switches (csrc/switch_on.h, no torch there) throw std::invalid_argument: torch up to
2.14 turns it into a ValueError, torch 2.15 into a RuntimeError. Its message has a fixed form
("Invalid value for CAUSAL_CONV1D_..."), so :func:`untag` maps that RuntimeError back to ValueError.
"""

from __future__ import annotations

import re
from typing import NoReturn

__all__ = ["reraise", "untag"]

_TAG = re.compile(r"\[(TypeError|ValueError|RuntimeError)\] ")
_TYPES = {"TypeError": TypeError, "ValueError": ValueError, "RuntimeError": RuntimeError}
_SETTING = re.compile(r"Invalid value for CAUSAL_CONV1D_\w+ \(expected TRUE or FALSE\): .*", re.S)


def untag(exc: BaseException) -> BaseException:
    """The exception the op layer meant: a new TypeError/ValueError/RuntimeError with the message
    after the tag; ``exc`` itself when its message has no tag."""
    msg = str(exc)
    m = _TAG.search(msg)
    if m is not None:
        return _TYPES[m.group(1)](msg[m.end() :])
    if type(exc) is RuntimeError:  # a settings error that torch did not turn into a ValueError
        s = _SETTING.search(msg)
        if s is not None:
            return ValueError(s.group(0))
    return exc


def reraise(exc: BaseException) -> NoReturn:
    """Raise :func:`untag` of ``exc`` (call it inside ``except RuntimeError as exc``)."""
    meant = untag(exc)
    if meant is exc:
        raise exc
    raise meant from None
