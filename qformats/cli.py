"""The ``qformats`` command (DESIGN.md §4).

Exit codes: 0 success / valid, 1 invalid input, 2 could not run (bad usage, internal error).
"""

from __future__ import annotations

import argparse
import sys

from .errors import QFormatsError

__all__ = ["main"]


def _cmd_schema(args: argparse.Namespace) -> int:
    from .schema import available_formats, schema_text

    names = [args.format] if args.format else available_formats()
    for name in names:
        sys.stdout.write(schema_text(name))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="qformats", description="Quantized weight formats: spec tools.")
    sub = parser.add_subparsers(dest="command", required=True)
    schema = sub.add_parser("schema", help="print the JSON Schema of a format's models")
    schema.add_argument("format", nargs="?", help="gptq, q4_k, spqr or gguf (default: all)")
    schema.set_defaults(run=_cmd_schema)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage, 0 on --help
        return int(exc.code or 0)
    try:
        return args.run(args)
    except QFormatsError as err:
        print(f"qformats: {err}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 -- the contract is exit 2, one line, no traceback
        print(f"qformats: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
