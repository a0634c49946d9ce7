"""Run under .venv/real (compressed-tensors 0.20.0, transformers 5.24, nvidia-modelopt 0.47.0): each FP4 real
subject judged on every case of its format (spec/fp4.md FP4-7.3) by the conformance runner's own judge
(``conformance.runner.judge_case``), the subjects called in this one process so that torch and the three
libraries are imported once; prints a JSON object per subject: counts, level, and each case's status, clause
and misreading."""

from __future__ import annotations

import json
import sys

from conformance.catalog import pinned_digests
from conformance.runner import RunResult, judge_case, select_cases
from conformance.subject import Answer, SubjectDeclaration
from conformance.wire import pack_arrays, unpack_arrays
from conformance.worker import _answer, load_entry
from qformats.formats.registry import subject_format

SUBJECTS = (("conformance.adapters.ct_fp4:nvfp4_dequantize", "nvfp4_packed"),
            ("conformance.adapters.ct_fp4:mxfp4_dequantize", "mxfp4_packed"),
            ("conformance.adapters.transformers_mxfp4:dequantize", "mxfp4_packed"),
            ("conformance.adapters.modelopt_fp4:nvfp4_dequantize", "nvfp4_packed"),
            ("conformance.adapters.modelopt_fp4:mxfp4_dequantize", "mxfp4_packed"))


class InProcess:
    """The worker's call (conformance.worker._answer) without its process: the same conversions both ways."""

    def __init__(self, entry: str) -> None:
        self.fn = load_entry(entry)

    def call(self, arrays, scalars) -> Answer:
        descs, blob = pack_arrays(arrays)
        header, payload = _answer(self.fn, {"arrays": descs, "scalars": scalars}, blob, "numpy")
        if header["status"] == "raised":
            return Answer("raised", message=f"{header['type']}: {header['message']}")
        if header["status"] != "ok":
            return Answer("bad_result", message=header["message"])
        return Answer("ok", arrays=unpack_arrays(header["arrays"], payload), dtypes=header["dtypes"],
                      kind=header["kind"])


def main() -> int:
    digests, out = pinned_digests(), {}
    for entry, fmt in SUBJECTS:
        face, decl, proc = subject_format(fmt), SubjectDeclaration(), InProcess(entry)
        results = [judge_case(c, "dequantize", face, decl, proc, digests) for c in select_cases(fmt, "dequantize")]
        run = RunResult(subject=entry, format=fmt, op="dequantize", cases=results, declaration=decl)
        out[entry] = {"counts": run.counts, "level": run.level(),
                      "cases": {r.id.split("/read/")[1]: [r.status, r.clause, r.misreading] for r in results}}
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
