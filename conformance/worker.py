"""The subject process: imports one kernel or writer entry point and answers calls over a pipe.

    python -m conformance.worker MODULE:FUNC DEVICE MEMORY_BYTES

Runs apart from the runner so that a subject that raises, hangs, crashes or allocates without
bound costs one case, never the run: the runner kills and restarts it. Its own stdout is the
channel, so anything the subject prints is moved to stderr first. Inputs arrive as NumPy arrays
and are handed over as NumPy (DEVICE "numpy") or as torch tensors on DEVICE ("cpu", "cuda");
results go back as NumPy, bfloat16 widened exactly to float32 with the original dtype named.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .wire import pack_arrays, receive, send, unpack_arrays

__all__ = ["load_entry", "main"]


def load_entry(entry: str) -> Callable[..., Any]:
    """``module:function`` (dots allowed after the colon) -> the callable."""
    module_name, sep, attr = entry.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"subject must be MODULE:FUNCTION (got {entry!r})")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"{entry} is a {type(target).__name__}, not a callable")
    return target


def _to_subject(arrays: Mapping[str, np.ndarray], device: str) -> dict[str, Any]:
    if device == "numpy":
        return {k: v.copy() for k, v in arrays.items()}
    import torch

    return {k: torch.from_numpy(v.copy()).to(device) for k, v in arrays.items()}


def _to_numpy(value: Any) -> tuple[np.ndarray, str, str]:
    """(array, dtype name as the subject returned it, type name)."""
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    if type(value).__module__.startswith("torch"):
        import torch

        t = value.detach()
        name = str(t.dtype).removeprefix("torch.")
        if t.dtype == torch.bfloat16:
            t = t.float()                        # exact: bfloat16 is the top half of a float32
        return t.cpu().numpy(), name, kind
    a = np.asarray(value)
    return a, a.dtype.name, kind


def _answer(fn: Callable[..., Any], header: dict[str, Any], payload: bytes, device: str) -> tuple[dict, bytes]:
    kwargs = _to_subject(unpack_arrays(header["arrays"], payload), device) | header["scalars"]
    try:
        result = fn(**kwargs)
    except BaseException as exc:  # noqa: BLE001 - any exception is the subject's answer
        tb = traceback.extract_tb(exc.__traceback__)
        where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""
        return {"status": "raised", "type": type(exc).__name__, "message": str(exc)[:2000], "where": where}, b""
    mapping = isinstance(result, Mapping)
    items = result.items() if mapping else [("result", result)]
    arrays, dtypes, kinds = {}, {}, {}
    for name, value in items:
        a, dtypes[str(name)], kinds[str(name)] = _to_numpy(value)
        if a.dtype.kind not in "biuf":
            return {"status": "bad_result", "message": f"{name!s} is {kinds[str(name)]} of dtype {a.dtype}"}, b""
        arrays[str(name)] = a
    descs, blob = pack_arrays(arrays)
    return {"status": "ok", "kind": "mapping" if mapping else "array", "arrays": descs, "dtypes": dtypes,
            "types": kinds}, blob


def main(argv: list[str]) -> int:
    entry, device, memory = argv[0], argv[1], int(argv[2])
    channel_in = os.fdopen(os.dup(0), "rb")
    channel_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)                                 # the subject's prints must not corrupt the channel
    sys.stdout = sys.stderr
    if memory > 0:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    try:
        fn = load_entry(entry)
    except BaseException as exc:  # noqa: BLE001 - reported to the runner as a load error
        send(channel_out, {"status": "load_error", "message": f"{type(exc).__name__}: {exc}"[:2000]})
        return 1
    send(channel_out, {"status": "ready"})
    while True:
        try:
            header, payload = receive(channel_in)
        except Exception:  # noqa: BLE001 - the runner closed the pipe: done
            return 0
        response, blob = _answer(fn, header, payload, device)
        send(channel_out, response, blob)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
