"""Indented JSON for documents that carry a checkpoint's own values, bounded in time and size (QF-1.1).

``json.dumps(obj, indent=n)`` fails a hostile config twice. Its pure-Python encoder is one generator per nesting
level with every chunk passed up through all of them, so its time grows with depth x length; and the indented
text itself grows with depth squared (each line carries its depth in spaces). A config.json that ``json.loads``
reads in milliseconds (722 KB holding 900-deep nests) became 158 MB of text and over 5 s of CPU when ``convert``
wrote it back (found by the fuzz, ``convert`` case 243,767); the 4,194,304 values a config may hold
(``MAX_JSON_VALUES``) could have become gigabytes.

:func:`dumps` lets the C encoder write the compact text and indents it in one pass over its structural characters
(strings skipped whole), laying out only the outer ``max_depth`` levels: deeper containers stay on one line. Every
real config and report is shallower than that, so for them the text is byte for byte ``json.dumps(obj,
indent=indent)``; for any input the indentation adds at most ``1 + indent * max_depth`` characters per comma or
bracket.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["dumps", "MAX_DEPTH"]

MAX_DEPTH = 8          # levels laid out; compressed-tensors' deepest real key (config_groups.*.weights.*) is 5

# a JSON string as the encoder writes it (quotes, backslashes and control characters escaped), or one structural
# character; what lies between two matches is a number, a literal or the ": " after a key
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},]')
_CLOSE = {"[": "]", "{": "}"}


def dumps(obj: Any, *, indent: int, max_depth: int = MAX_DEPTH, **options: Any) -> str:
    """``json.dumps(obj, indent=indent, **options)`` down to ``max_depth`` levels, deeper ones compact (options:
    sort_keys, ensure_ascii, allow_nan, default)."""
    text = json.dumps(obj, separators=(",", ": "), **options)
    out: list[str] = []
    depth, at = 0, 0                                        # depth: containers open at ``at``
    while (match := _TOKEN.search(text, at)) is not None:
        token = match.group()
        out.append(text[at:match.start()])
        at = match.end()
        if token[0] == '"':
            out.append(token)
        elif token in _CLOSE:
            if text.startswith(_CLOSE[token], at):          # an empty container stays "[]" / "{}"
                out.append(token + _CLOSE[token])
                at += 1
                continue
            depth += 1
            out.append(token + _newline(indent, depth, max_depth))
        elif token == ",":
            out.append("," + _newline(indent, depth, max_depth))
        else:
            depth -= 1
            out.append(_newline(indent, depth, max_depth - 1) + token)   # laid out iff opened at <= max_depth
    out.append(text[at:])
    return "".join(out)


def _newline(indent: int, depth: int, max_depth: int) -> str:
    """A line break indented to ``depth`` while ``depth`` <= max_depth, else nothing (the compact depths)."""
    return "\n" + " " * (indent * depth) if depth <= max_depth else ""
