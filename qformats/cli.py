"""The ``qformats`` command (DESIGN.md §4).

Exit codes: 0 success / valid, 1 invalid input, 2 could not run (bad usage, internal error).
"""

from __future__ import annotations

import argparse
import json
import sys

from . import jsontext
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


PROGRESS_BAR = "[#########.....................] 12/40 model.layers.3.mlp.up_proj"   # --help's example


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


def _json_even_if_could_not_run(command):
    """--json prints one object on stdout for every outcome: when the command could not run (exit 2), the
    could-not-run document (qformats/documents.py); the error then goes on to main's one line on stderr."""
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except Exception as err:
            if getattr(args, "json", False) and not isinstance(err, BrokenPipeError):
                from .documents import could_not_run

                sys.stdout.write(jsontext.dumps(could_not_run(args.path, err), indent=2) + "\n")
            raise
    return run


@_json_even_if_could_not_run
def _cmd_validate(args: argparse.Namespace) -> int:
    from .report import to_json, to_text
    from .validate import validate

    report = validate(args.path, deep=args.deep, fmt=args.format, progress=_progress_bar(sys.stderr), jobs=args.jobs,
                      sample=args.sample)
    if args.strict:
        report = report.strictly()
    sys.stdout.write(to_json(report) + "\n" if args.json else to_text(report, verbose=args.verbose,
                                                                       width=_text_width(args.width)))
    return report.exit_code(strict=args.strict)


def _text_width(asked: int | None) -> int | None:
    """Columns to wrap findings to: --width, else the terminal's when stdout is one, else none (pipes, logs)."""
    if asked is not None:
        return max(asked, 40)
    if not sys.stdout.isatty():
        return None
    import shutil

    return shutil.get_terminal_size((100, 24)).columns


@_json_even_if_could_not_run
def _cmd_inspect(args: argparse.Namespace) -> int:
    from .inspect import empty_reason, render, rows_and_header

    from .report import not_checked, plural, scope

    report, table, header = rows_and_header(args.path, args.format, progress=_progress_bar(sys.stderr),
                                            sample=args.sample)
    pictures = {}
    if args.html:
        report, pictures = _inspect_html(args, report, table, header)
    if args.json:                    # the validate document plus the rows and the header (spec/schemas/report.json)
        doc = {**report.model_dump(), "rows": table, "header": header, **pictures}
        sys.stdout.write(jsontext.dumps(doc, indent=2, default=str) + "\n")
        return report.exit_code()
    if header is not None:
        from .gguf_summary import header_line

        print(header_line(header))
    if not table:
        print(f"{report.path}: {empty_reason(report)}")
        return report.exit_code()
    for line in render(table, args.width):
        print(line)
    s = report.summary                # validate's words for what was checked (CKPT-5.1); inspect has no -v
    checked = scope(s, names="validate -v names them") + not_checked(s)
    print(f"{plural(len(table), 'row')}, {checked}; verdict {report.verdict} ({plural(s['errors'], 'error')}, "
          f"{plural(s['warnings'], 'warning')}: qformats validate for details)")
    return report.exit_code()


def _inspect_html(args: argparse.Namespace, report: object, table: list, header: object) -> tuple[object, dict]:
    """``inspect --html FILE``: the page drawn from the inspect document and its pictures (INSPECT-1); returns
    the report (a remote checkpoint's reads for the pictures counted in it) and ``{"pictures": ...}`` for
    ``--json`` to carry too."""
    from .inspect import with_traffic
    from .pictures.data import collect
    from .pictures.page import inspect_page
    from .tools import write_page

    opened: list = []
    pictures = collect(args.path, table, opened).model_dump()
    if report is not None and opened:
        report = with_traffic(report, getattr(opened[0], "io", None))
    doc = {**report.model_dump(), "rows": table, "header": header, "pictures": pictures}
    page = inspect_page(json.loads(json.dumps(doc, default=str)))
    write_page(args.html, page, inputs=(args.path,))     # a folder that cannot be written: could not run (exit 2)
    return report, {"pictures": pictures}


def _cmd_decode(args: argparse.Namespace) -> int:
    from .report import plural
    from .tools import decode

    notes = decode(args.path, args.tensor or [], args.output, source_version=args.source_version,
                   permuted=args.permuted, reader=args.reader, force=args.force, all_tensors=args.all)
    copied = [name for name, note in notes.items() if note.startswith("copied as stored")]
    for name, note in notes.items():
        if not note.startswith("copied as stored"):
            print(f"{name} -> {args.output}: {note}")
    if copied:
        print(f"{plural(len(copied), 'unquantized tensor')} copied as stored -> {args.output}")
    return 0


def _cmd_convert(args: argparse.Namespace) -> int:
    from .tools import convert

    from .report import plural

    done = convert(args.path, args.output, to=args.to, source_version=args.source_version, reader=args.reader,
                   round_scales=args.round_scales)
    if done.get("against_evidence"):         # GPTQ-7.4: done as told; the output's label now hides it
        told = f"--source-version {args.source_version}" if args.source_version else f"--reader {args.reader}"
        print(f"qformats: warning: read as {told} against the zeros' evidence in "
              f"{plural(len(done['against_evidence']), 'layer')} (e.g. {done['against_evidence'][0]}); "
              "validate cannot see this in the output", file=sys.stderr)
    if "from" in done:                       # across formats (AWQ-4, CT-4)
        from .convert import SOURCE_LABELS

        print(f"converted {plural(done['layers'], SOURCE_LABELS[done['from']] + ' layer')} to {args.to}: {args.output}")
        if "rounded_scales" in done:         # CT-4.6: what rounding the scales to float16 changed
            r = done["rounded_scales"]
            print(f"rounded {plural(r['scales'], 'scale')} to float16 in {plural(len(r['modules']), 'layer')}: "
                  f"{plural(r['weights_changed'], 'weight')} changed, largest absolute change {r['max_abs_change']!r}")
        return 0
    how = f" as {args.reader} reads them" if args.reader else ""
    print(f"converted {plural(done['layers'], 'GPTQ layer')} to {args.to}{how}: {args.output}")
    return 0


def _cmd_conformance_kernel(args: argparse.Namespace) -> int:
    from conformance import load_declaration, run_kernel
    from conformance.html import page
    from conformance.provenance import run_document
    from conformance.report import to_junit, to_text

    from .tools import write_page

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
    inputs = (args.subject_file,) if args.subject_file else ()
    if args.junit:
        write_page(args.junit, to_junit(result), inputs=inputs, option="--junit")
    # one document for --json and --html: `conformance matrix RUN.json --html` then writes the same page
    doc = run_document(result, device=args.device, declaration=declaration) if args.html or args.json else None
    if args.html:
        write_page(args.html, page([doc]), inputs=inputs)
    sys.stdout.write(jsontext.dumps(doc, indent=1) + "\n" if args.json else to_text(result, verbose=args.verbose))
    return 0 if result.conforms else 1


def _cmd_conformance_matrix(args: argparse.Namespace) -> int:
    from conformance.html import page
    from conformance.matrix import Matrix, load_runs

    from .tools import write_page

    runs = load_runs(args.runs)
    if args.html:
        write_page(args.html, page(runs), inputs=tuple(args.runs))
    m = Matrix(runs)
    for group in m.groups:
        cells = [m.cell(group, s) for s in m.subjects]
        sys.stdout.write(f"{group.label:28s} " + "  ".join(f"{s}: {c.counts['pass']}/{c.total}" for s, c in
                                                           zip(m.subjects, cells) if c.total) + "\n")
    return 0


def _cmd_conformance_checkpoint(args: argparse.Namespace) -> int:
    from conformance.checkpoint import check_checkpoint, to_text

    table = check_checkpoint(args.path)
    sys.stdout.write(jsontext.dumps(table, indent=1) + "\n" if args.json else to_text(table))
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
    ker.add_argument("--html", metavar="FILE", help="also write the results page (one self-contained HTML file); "
                     "`qformats conformance matrix RUN.json --html FILE` writes the same page from the --json document")
    ker.add_argument("-v", "--verbose", action="store_true", help="list every non-passing case")
    ker.set_defaults(run=_cmd_conformance_kernel)
    mx = what.add_parser("matrix", help="lay several --json runs side by side: pass / total per subject and case "
                                        "group, failures in one subject, clause coverage",
                         description="Lay conformance runs side by side. With one run, `qformats conformance matrix "
                                     "RUN.json --html FILE` writes the same results page as `qformats conformance "
                                     "kernel ... --json --html FILE` did for that run (the shortcut to a page from "
                                     "a kept JSON report).")
    mx.add_argument("runs", nargs="+", metavar="RUN.json", help="documents of `conformance kernel --json`, or bundles "
                                                                 "{\"runs\": [...]}")
    mx.add_argument("--html", metavar="FILE", help="write the results page (one self-contained HTML file); for one "
                    "RUN.json, the page `conformance kernel --html` writes for that run")
    mx.set_defaults(run=_cmd_conformance_matrix)
    ck = what.add_parser("checkpoint", help="validate a checkpoint and tell which real readers decode it correctly",
                         description="Validate a checkpoint, then judge each real reader qformats emulates or finds "
                         "installed. Exit 0 valid, 1 invalid, 2 could not run: the validity verdict decides, also "
                         "when no reader could be judged (gguf-py not installed, no ggml library set, a format "
                         "without emulated readers); the headline then reads 'VALID; no reader judged', says why "
                         "and gives the command that enables each reader (pip install gguf; make ggml-oracle with "
                         "QFORMATS_GGML_LIB; make llama-cpp with QFORMATS_LLAMA_CPP).")
    ck.add_argument("path")
    ck.add_argument("--json", action="store_true", help="print the table as one JSON object (judged: the readers "
                    "judged; no_reader_judged: why none was, else null; enable: reader -> command)")
    ck.set_defaults(run=_cmd_conformance_checkpoint)


def _scheduler(text: str) -> str:
    """--scheduler's value (spec/audit.md AUDIT-1.1); another is a usage error."""
    from .executor import check_scheduler

    try:
        return check_scheduler(text)
    except QFormatsError as err:
        raise argparse.ArgumentTypeError(err.message) from None


def _scheduler_help() -> str:
    from .executor import SCHEDULER_HELP

    return SCHEDULER_HELP


def _cmd_audit(args: argparse.Namespace) -> int:
    from pathlib import Path

    if args.paths[:1] == ["summarize"]:
        return _audit_summarize(args)
    from .audit import audit
    from .audit.progress import for_stream
    from .audit.units import read_list
    from .errors import fail
    from .findings import plural

    units = list(args.paths) + (read_list(args.list) if args.list else [])
    if not units or not args.out:
        raise fail("argument.invalid", "audit", "units (PATH... or --list FILE) and --out DIR", f"{len(units)} "
                   f"units, --out {args.out}")
    done = audit(units, args.out, resume=args.resume, scheduler=args.scheduler, jobs=args.jobs or 1, deep=args.deep,
                 fmt=args.format, sample=args.sample, reporter=for_stream(sys.stderr))
    v = done["by_verdict"]
    print(f"{plural(done['units'], 'unit')} ({done['run']} run now, {done['skipped']} already in the table): "
          f"{v['valid']} valid, {v['invalid']} invalid, {v['could-not-run']} could not run: {Path(done['out'])}")
    return 0 if v["invalid"] == v["could-not-run"] == 0 else 1


def _audit_summarize(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .audit import page, summarize
    from .audit.summary import to_text
    from .errors import fail
    from .tools import write_page

    if len(args.paths) != 2:
        raise fail("argument.invalid", "summarize", "one directory: qformats audit summarize DIR",
                   " ".join(args.paths[1:]) or "none")
    doc = summarize(args.paths[1])
    html = write_page(args.html or Path(args.paths[1]) / "summary.html", page(doc))
    sys.stdout.write(jsontext.dumps(doc, indent=1) + "\n" if args.json else to_text(doc) + f"page: {html}\n")
    return 0


def _audit_parser(sub) -> None:
    aud = sub.add_parser("audit", help="validate many checkpoints into a resumable Parquet table; "
                         "`audit summarize DIR` counts it", description="Validate each unit (a checkpoint file or "
                         "directory) and write its result as one Parquet part file under --out (spec/audit.md). "
                         "--resume skips the units already written. Exit 0 every unit named is valid in the table, 1 "
                         "one is invalid or could not run, 2 the audit could not run. `qformats audit summarize DIR` "
                         "prints the counts (by verdict, format, finding code) and writes DIR/summary.html (or "
                         "--html FILE). On a terminal a progress bar (units, bytes, ETA) on stderr; else one line per "
                         "unit. Needs qformats[audit] (pyarrow, rich).")
    aud.add_argument("paths", nargs="*", metavar="PATH", help="units to audit; or `summarize DIR`")
    aud.add_argument("--list", metavar="FILE", help="also the units named in FILE, one per line (# comments)")
    aud.add_argument("--out", metavar="DIR", help="the table's directory (made if absent)")
    aud.add_argument("--resume", action="store_true", help="continue the audit in --out: units already written "
                     "are not run again")
    aud.add_argument("--deep", action="store_true", help="validate --deep each unit")
    aud.add_argument("--format", default="auto", choices=FORMATS)
    aud.add_argument("--sample", type=int, default=None, metavar="N", help="remote units: validate --sample N "
                     "(spec/remote.md); part of each unit's key")
    aud.add_argument("--jobs", type=int, default=None, help="units in parallel (processes, or Dask workers with "
                     "--scheduler local; default 1)")
    aud.add_argument("--scheduler", type=_scheduler, default=None, help=_scheduler_help())
    aud.add_argument("--html", metavar="FILE", help="summarize: the page's path (default DIR/summary.html)")
    aud.add_argument("--json", action="store_true", help="summarize: print the summary document")
    aud.set_defaults(run=_cmd_audit)


def _gptq_readers() -> list[str]:
    from .formats.gptq.quirks import READERS

    return list(READERS)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="qformats", description="Quantized weight formats: spec tools.")
    parser.add_argument("--version", action="version", version=f"qformats {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    schema = sub.add_parser("schema", help="print the JSON Schema of a format's models")
    schema.add_argument("format", nargs="?", help="gptq, q4_k, spqr, gguf, awq or compressed_tensors (default: one "
                        "object keyed by format); report: the documents validate --json and inspect --json print")
    schema.set_defaults(run=_cmd_schema)
    val = sub.add_parser("validate", help="check a checkpoint against the spec; exit 0 valid, 1 invalid, 2 could not run",
                         description="Check a checkpoint against the spec. Exit 0 valid (warnings allowed unless "
                         "--strict), 1 invalid, 2 could not run. On a terminal a one-line progress bar "
                         f"({PROGRESS_BAR}) counts the layers on stderr; it is left out when stderr is not a "
                         "terminal (a pipe, a CI log), and results always go to stdout.")
    val.add_argument("path", help=".safetensors file, checkpoint directory (sharded or not) or .gguf file; or "
                     "hf://ORG/REPO[@REV][/FILE] (HF_ENDPOINT as huggingface_hub reads it; needs qformats[hub]) or "
                     "an http(s):// URL of one file, read by ranged requests")
    val.add_argument("--json", action="store_true", help="print one JSON object: path, verdict, format, findings, "
                     "layers, summary (the same summary keys for every format); when it could not run (exit 2), "
                     "{path, verdict: could-not-run, error: {code, clause, message, tensor, file}} "
                     "(schema: qformats schema report)")
    val.add_argument("--strict", action="store_true", help="warnings make the verdict exit 1")
    val.add_argument("--deep", action="store_true", help="decode every layer and check the weights are finite")
    val.add_argument("--format", default="auto", choices=FORMATS)
    val.add_argument("--jobs", type=int, default=None, help="validate in N processes (default: one per CPU with --deep, else 1)")
    val.add_argument("--scheduler", type=_scheduler, default=None, help=_scheduler_help())
    val.add_argument("--sample", type=int, default=None, metavar="N", help="check N quantized layers (GGUF: N "
                     "tensors) spread over the model, the rest named as not checked; for hf:// and http(s):// paths "
                     "the default is 0, headers only, and --deep --sample N fetches just those layers (spec/remote.md)")
    val.add_argument("-v", "--verbose", action="store_true", help="list info findings, fix lines and more examples")
    val.add_argument("--width", type=int, default=None, help="wrap long findings to N columns (default: the "
                     "terminal's when stdout is one; in pipes and logs each finding stays one line)")
    val.set_defaults(run=_cmd_validate)
    ins = sub.add_parser("inspect", help="per-layer table: format, bits, group size, bits/weight, statistics, evidence",
                         description="One row per quantized layer, or per tensor of a GGUF file (with the file's "
                         "header above: architecture, general.file_type, tensors, parameters, bits per weight). "
                         "Exit codes as validate's. On a terminal a one-line progress bar "
                         f"({PROGRESS_BAR}) counts the layers on stderr; not when stderr is a pipe or a log.")
    ins.add_argument("path")
    ins.add_argument("--format", default="auto", choices=FORMATS)
    ins.add_argument("--json", action="store_true", help="print validate --json's object plus rows (the table) and "
                     "header (a GGUF file's header summary, else null); the could-not-run object on exit 2")
    ins.add_argument("--width", type=int, default=None, help="columns to fit (default: the terminal's, or 100)")
    ins.add_argument("--sample", type=int, default=None, metavar="N", help="rows for N layers (GGUF: tensors) spread "
                     "over the model; for hf:// and http(s):// paths the default is 0 (headers only)")
    ins.add_argument("--html", metavar="FILE", default=None, help="also write a self-contained page (no network): "
                     "a layer x module heatmap, each tensor's map of non-finite values and outliers, scale and "
                     "zero-point histograms; with --json, the document carries what it draws as pictures")
    ins.add_argument("--scheduler", type=_scheduler, default=None, help=_scheduler_help())
    ins.set_defaults(run=_cmd_inspect)
    dec = sub.add_parser("decode", help="reference-decode layers into a safetensors file")
    dec.add_argument("path")
    dec.add_argument("--tensor", action="append", help="layer (module) or tensor name, or a shell pattern such as "
                     "'model.layers.0.*' (matching layers decoded, other tensors copied as stored); repeatable")
    dec.add_argument("--all", action="store_true", help="write the whole model: every quantized layer decoded, every "
                     "other tensor copied as stored (one layer in memory at a time)")
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
                                          "between GPTQ, AWQ GEMM and compressed-tensors pack-quantized, and between "
                                          "the FP8 / FP4 layouts where they agree (lossless)")
    conv.add_argument("path", help="a GPTQ, AWQ GEMM or compressed-tensors checkpoint (directory or shard index; "
                                   "a single .safetensors file for GPTQ v1 <-> v2)")
    conv.add_argument("--to", required=True, choices=("gptq_v2", "gptq", "awq_gemm", "compressed_tensors", "modelopt",
                                                      "gpt_oss_mxfp4", "fp8"),
                      help="modelopt: from compressed-tensors NVFP4 / MXFP4; gpt_oss_mxfp4: from compressed-tensors "
                           "MXFP4 experts; fp8: DeepSeek / transformers fp8 from compressed-tensors FP8 block; "
                           "compressed_tensors also from those three (spec/fp8.md FP8-8, spec/fp4.md FP4-8)")
    conv.add_argument("-o", "--output", required=True)
    conv.add_argument("--source-version", choices=("v1", "v2"),
                      help="GPTQ checkpoints: what the stored zeros really are, overriding a wrong checkpoint_format "
                           "label")
    conv.add_argument("--reader", choices=_gptq_readers(),
                      help="--to gptq_v2 only: store the zero points this real reader uses (GPTQ-4.2), e.g. "
                           "gptqmodel to keep a GPTQModel-written v1 checkpoint's zero points 0")
    conv.add_argument("--round-scales", action="store_true",
                      help="compressed-tensors checkpoints: round scales float16 cannot hold (float32 by default) to "
                           "float16, reporting how many weights change and by at most how much (CT-4.6)")
    conv.set_defaults(run=_cmd_convert)
    _audit_parser(sub)
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
        from .executor import scheduling

        with scheduling(getattr(args, "scheduler", None)):   # --scheduler: where validate's parallel work runs
            return args.run(args)
    except BrokenPipeError:       # `qformats schema | head -1`: the reader left; that is not our error
        _quiet_stdout()
        return 0
    except QFormatsError as err:  # only could-not-run problems reach here; findings are in the report
        print(f"qformats: {_one_line(str(err))}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 -- the contract is exit 2, one line, no traceback
        print(f"qformats: internal error: {type(exc).__name__}: {_one_line(str(exc))}", file=sys.stderr)
        return 2


def _one_line(text: str) -> str:
    """The could-not-run message on one line: a name from a hostile file (a GGUF key, a tensor name, a path)
    may hold a newline or other control character, shown escaped."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


if __name__ == "__main__":
    sys.exit(main())
