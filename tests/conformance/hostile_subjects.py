"""Subjects that misbehave, for the runner's robustness tests: each must cost one case, never the run."""

import os
import sys
import time

import numpy as np

from qformats.formats import gptq


def _right(**kw):
    return gptq.dequantize({k: kw[k] for k in ("qweight", "qzeros", "scales", "g_idx")}, bits=kw["bits"],
                           version="v2", group_size=kw["group_size"])


def raises(**kw):
    raise RuntimeError("kernel exploded")


def hangs(**kw):
    time.sleep(3600)


def hangs_once(**kw):
    """Hangs on the first call in each process, answers right afterwards (restart recovers)."""
    flag = "/tmp/qformats-hangs-once-" + str(os.getppid())
    if not os.path.exists(flag):
        open(flag, "w").close()
        time.sleep(3600)
    return _right(**kw)


def crashes(**kw):
    os._exit(7)


def wrong_shape(**kw):
    return _right(**kw).T


def wrong_dtype(**kw):
    return _right(**kw).astype(np.int32)


def returns_none(**kw):
    return None


def returns_object(**kw):
    return np.array([object()])


def chatty(**kw):
    print("debug: decoding", flush=True)
    sys.stdout.write("x" * 100000)
    return _right(**kw)


def float16_result(**kw):
    return _right(**kw).astype(np.float16)


def bfloat16_truncated(**kw):
    """Truncates to bfloat16 instead of rounding: not the correctly rounded value."""
    w = np.ascontiguousarray(_right(**kw), np.float32)
    return (w.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32).astype(np.float16)


def modifies_inputs(**kw):
    """Answers right, then scribbles over its inputs: the next case must still get fresh ones."""
    w = _right(**kw)
    kw["qweight"][...] = 0
    kw["scales"][...] = np.nan
    return w


ANSWER = None  # not callable


def not_implemented(**kw):
    """A library that has not implemented this format or op yet: the page shows it as "not implemented"."""
    raise NotImplementedError("this format is not supported yet")
