"""``python -m causal_conv1d doctor [--json] [--offline]``.

Works on installs whose compiled extension does not load (that is what doctor is for):
causal_conv1d/__init__.py keeps the import error instead of raising while ``-m`` runs, and this
module imports only the doctor (which needs neither ``_C`` nor ``build_support``).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "usage: python -m causal_conv1d doctor [--json] [--offline]\n\n"
            "  doctor   diagnose torch, CUDA, compiler, this build and print the install commands"
        )
        return 0 if argv else 2
    if argv[0] != "doctor":
        print(f"python -m causal_conv1d: unknown command {argv[0]!r} (expected: doctor)", file=sys.stderr)
        return 2
    from causal_conv1d import doctor

    return doctor.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
