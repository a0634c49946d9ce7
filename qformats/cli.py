"""The ``qformats`` command (DESIGN.md §4).

Exit codes: 0 success / valid, 1 invalid input, 2 could not run (bad usage, internal error).
"""

from __future__ import annotations

import argparse
import json
import sys

from .errors import QFormatsError
from .formats.registry import SUBJECT_FORMATS
from .validate import FORMATS

__all__ = ["main"]


def _cmd_schema(args: argparse.Namespace) -> int:
    from .schema import available_formats, schema_for, schema_text

    if args.format:
        sys.stdout.write(schema_text(args.format))
    else:                                        # one JSON document: {format: schema}
        sys.stdout.write(json.dumps({name: schema_for(name) for name in available_formats()}, indent=2) + "\n")
    return 0


def _progress_bar(stream):
    """A one-line progress bar on a TTY (stderr); None elsewhere so logs stay clean."""
    if not stream.isatty():
        return None

    def show(i: int, total: int, name: str) -> None:
        width = 30
        done = int(width * (i + 1) / max(total, 1))
        stream.write(f"\r[{'#' * done}{'.' * (width - done)}] {i + 1}/{total} {name[-40:]:<40}")
        if i + 1 == total:
            stream.write("\n")
        stream.flush()

    return show


def _cmd_validate(args: argparse.Namespace) -> int:
    from .report import to_json, to_text
    from .validate import validate

    report = validate(args.path, deep=args.deep, fmt=args.format, progress=_progress_bar(sys.stderr), jobs=args.jobs)
    if args.strict:
        report = report.strictly()
    sys.stdout.write(to_json(report) + "\n" if args.json else to_text(report, verbose=args.verbose))
    return report.exit_code(strict=args.strict)


def _cmd_inspect(args: argparse.Namespace) -> int:
    from .inspect import empty_reason, render, rows

    from .report import not_checked, plural

    report, table = rows(args.path, args.format)
    if not table:
        print(f"{report.path}: {empty_reason(report)}")
        return report.exit_code()
    for line in render(table, args.width):
        print(line)
    s = report.summary
    checked = f", {s['tensors_checked']} of {s['tensors']} tensors checked" if "tensors" in s else not_checked(s)
    print(f"{plural(len(table), 'row')}{checked}; verdict {report.verdict} ({plural(s['errors'], 'error')}, "
          f"{plural(s['warnings'], 'warning')}: qformats validate for details)")
    return report.exit_code()


def _cmd_decode(args: argparse.Namespace) -> int:
    from .tools import decode

    for name, note in decode(args.path, args.tensor, args.output, source_version=args.source_version,
                             permuted=args.permuted, reader=args.reader, force=args.force).items():
        print(f"{name} -> {args.output}: {note}")
    return 0


def _cmd_convert(args: argparse.Namespace) -> int:
    from .tools import convert

    from .report import plural

    done = convert(args.path, args.output, to=args.to, source_version=args.source_version, reader=args.reader)
    if "from" in done:                       # across formats (AWQ-4, CT-4)
        from .convert import SOURCE_LABELS

        print(f"converted {plural(done['layers'], SOURCE_LABELS[done['from']] + ' layer')} to {args.to}: {args.output}")
        return 0
    how = f" as {args.reader} reads them" if args.reader else ""
    print(f"converted {plural(done['layers'], 'GPTQ layer')} to {args.to}{how}: {args.output}")
    return 0


def _cmd_conformance_kernel(args: argparse.Namespace) -> int:
    from conformance import load_declaration, run_kernel
    from conformance.report import to_html, to_json, to_junit, to_text

    total = [0]

    def tick(_case) -> None:
        total[0] += 1
        sys.stderr.write(f"\r{total[0]} cases run")
        sys.stderr.flush()

    declaration = load_declaration(args.subject_file)
    result = run_kernel(args.entry, fmt=args.format, op=args.op, device=args.device,
                        declaration=declaration, jobs=args.jobs, timeout=args.timeout,
                        pattern=args.cases, progress=tick if sys.stderr.isatty() else None)
    if total[0]:
        sys.stderr.write("\n")
    if args.junit:
        with open(args.junit, "w", encoding="utf-8") as fh:
            fh.write(to_junit(result))
    if args.html:
        with open(args.html, "w", encoding="utf-8") as fh:
            fh.write(to_html(result, device=args.device, declaration=declaration))
    sys.stdout.write(to_json(result, device=args.device, declaration=declaration) + "\n" if args.json
                     else to_text(result, verbose=args.verbose))
    return 0 if result.conforms else 1


def _cmd_conformance_matrix(args: argparse.Namespace) -> int:
    from conformance.html import page
    from conformance.matrix import Matrix, load_runs

    runs = load_runs(args.runs)
    if args.html:
        with open(args.html, "w", encoding="utf-8") as fh:
            fh.write(page(runs))
    m = Matrix(runs)
    for group in m.groups:
        cells = [m.cell(group, s) for s in m.subjects]
        sys.stdout.write(f"{group.label:28s} " + "  ".join(f"{s}: {c.counts['pass']}/{c.total}" for s, c in
                                                           zip(m.subjects, cells) if c.total) + "\n")
    return 0


def _cmd_conformance_checkpoint(args: argparse.Namespace) -> int:
    from conformance.checkpoint import check_checkpoint, to_text

    table = check_checkpoint(args.path)
    sys.stdout.write(json.dumps(table, indent=1) + "\n" if args.json else to_text(table))
    return 0 if table["verdict"] == "valid" else 1


def _cmd_fixtures(args: argparse.Namespace) -> int:
    from pathlib import Path

    from . import fixtures

    root = Path(args.root) if args.root else fixtures.DEFAULT_ROOT
    if args.action == "generate":
        print(f"{fixtures.generate(root)} generated cases pinned in {root / 'manifest.json'}")
        return 0
    return fixtures.main([str(root)])


def _conformance_parser(sub) -> None:
    conf = sub.add_parser("conformance", help="judge a kernel, writer or checkpoint against the spec's cases")
    what = conf.add_subparsers(dest="subject", required=True)
    ker = what.add_parser("kernel", help="run MODULE:FUNC through the case matrix of a format and op; "
                                         "exit 0 conforms, 1 a case failed or errored, 2 could not run")
    ker.add_argument("entry", help="the subject, MODULE:FUNCTION (importable from the current environment)")
    ker.add_argument("--format", required=True, choices=list(SUBJECT_FORMATS))
    ker.add_argument("--op", default="dequantize", choices=("dequantize", "matmul", "pack", "quantize"))
    ker.add_argument("--device", default=None, help="pass torch tensors on this device (cpu, cuda); "
                                                     "default: NumPy arrays")
    ker.add_argument("--subject-file", help="JSON declaration: supported features, expected failures with reasons")
    ker.add_argument("--cases", help="only cases whose id matches this regular expression")
    ker.add_argument("--jobs", type=int, default=1, help="subject processes in parallel")
    ker.add_argument("--timeout", type=float, default=60.0, help="seconds per case before the subject is "
                                                                 "called hung and restarted")
    ker.add_argument("--json", action="store_true", help="print the JSON report")
    ker.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report")
    ker.add_argument("--html", metavar="FILE", help="also write the results page (one self-contained HTML file)")
    ker.add_argument("-v", "--verbose", action="store_true", help="list every non-passing case")
    ker.set_defaults(run=_cmd_conformance_kernel)
    mx = what.add_parser("matrix", help="lay several --json runs side by side: pass / total per subject and case "
                                        "group, failures in one subject, clause coverage")
    mx.add_argument("runs", nargs="+", metavar="RUN.json", help="documents of `conformance kernel --json`, or bundles "
                                                                 "{\"runs\": [...]}")
    mx.add_argument("--html", metavar="FILE", help="write the results page (one self-contained HTML file)")
    mx.set_defaults(run=_cmd_conformance_matrix)
    ck = what.add_parser("checkpoint", help="validate a checkpoint and tell which real readers decode it correctly")
    ck.add_argument("path")
    ck.add_argument("--json", action="store_true")
    ck.set_defaults(run=_cmd_conformance_checkpoint)


def _gptq_readers() -> list[str]:
    from .formats.gptq.quirks import READERS

    return list(READERS)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="qformats", description="Quantized weight formats: spec tools.")
    parser.add_argument("--version", action="version", version=f"qformats {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    schema = sub.add_parser("schema", help="print the JSON Schema of a format's models")
    schema.add_argument("format", nargs="?", help="gptq, q4_k, spqr or gguf (default: one object keyed by format)")
    schema.set_defaults(run=_cmd_schema)
    val = sub.add_parser("validate", help="check a checkpoint against the spec; exit 0 valid, 1 invalid, 2 could not run")
    val.add_argument("path", help=".safetensors file, checkpoint directory (sharded or not) or .gguf file")
    val.add_argument("--json", action="store_true", help="print one JSON object: path, verdict, format, findings, "
                     "layers, summary")
    val.add_argument("--strict", action="store_true", help="warnings make the verdict exit 1")
    val.add_argument("--deep", action="store_true", help="decode every layer and check the weights are finite")
    val.add_argument("--format", default="auto", choices=FORMATS)
    val.add_argument("--jobs", type=int, default=None, help="validate in N processes (default: one per CPU with --deep, else 1)")
    val.add_argument("-v", "--verbose", action="store_true", help="list info findings and more examples")
    val.set_defaults(run=_cmd_validate)
    ins = sub.add_parser("inspect", help="per-layer table: format, bits, group size, bits/weight, statistics, evidence")
    ins.add_argument("path")
    ins.add_argument("--format", default="auto", choices=FORMATS)
    ins.add_argument("--width", type=int, default=None, help="columns to fit (default: the terminal's, or 100)")
    ins.set_defaults(run=_cmd_inspect)
    dec = sub.add_parser("decode", help="reference-decode layers into a safetensors file")
    dec.add_argument("path")
    dec.add_argument("--tensor", action="append", required=True, help="layer (module) or tensor name; repeatable")
    dec.add_argument("-o", "--output", required=True)
    dec.add_argument("--source-version", choices=("v1", "v2"),
                     help="GPTQ: what the stored zeros really are, for a checkpoint whose label contradicts them")
    dec.add_argument("--permuted", action="store_true",
                     help="SpQR: keep the permuted column order (as spqr_quant's dequantize()); default: original")
    dec.add_argument("--reader", choices=_gptq_readers(),
                     help="GPTQ: decode as this real reader does (spec/gptq.md GPTQ-4.2), e.g. gptqmodel for a "
                          "GPTQModel-written v1 checkpoint with zero points 0; default: the spec reader")
    dec.add_argument("--force", action="store_true", help="replace OUT if it exists (default: refuse)")
    dec.set_defaults(run=_cmd_decode)
    conv = sub.add_parser("convert", help="rewrite a GPTQ checkpoint's zeros as v2 (lossless) or v1; convert "
                                          "between GPTQ, AWQ GEMM and compressed-tensors pack-quantized (lossless)")
    conv.add_argument("path", help="a GPTQ, AWQ GEMM or compressed-tensors checkpoint (directory or shard index; "
                                   "a single .safetensors file for GPTQ v1 <-> v2)")
    conv.add_argument("--to", required=True, choices=("gptq_v2", "gptq", "awq_gemm", "compressed_tensors"))
    conv.add_argument("-o", "--output", required=True)
    conv.add_argument("--source-version", choices=("v1", "v2"),
                      help="GPTQ checkpoints: what the stored zeros really are, overriding a wrong checkpoint_format "
                           "label")
    conv.add_argument("--reader", choices=_gptq_readers(),
                      help="--to gptq_v2 only: store the zero points this real reader uses (GPTQ-4.2), e.g. "
                           "gptqmodel to keep a GPTQModel-written v1 checkpoint's zero points 0")
    conv.set_defaults(run=_cmd_convert)
    _conformance_parser(sub)
    fix = sub.add_parser("fixtures", help="check the fixture manifest, or pin the generated conformance cases")
    fix.add_argument("action", choices=("check", "generate"))
    fix.add_argument("root", nargs="?", help="the fixtures directory (default: this checkout's fixtures/)")
    fix.set_defaults(run=_cmd_fixtures)
    return parser


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so Python's exit-time flush does not raise on the closed pipe again."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage, 0 on --help
        return int(exc.code or 0)
    try:
        return args.run(args)
    except BrokenPipeError:       # `qformats schema | head -1`: the reader left; that is not our error
        _quiet_stdout()
        return 0
    except QFormatsError as err:  # only could-not-run problems reach here; findings are in the report
        print(f"qformats: {err}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 -- the contract is exit 2, one line, no traceback
        print(f"qformats: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
