"""Is the checkpoint whole? Layers against the config, modules across layers, partners of a module
(spec/checkpoints.md CKPT-5.4 .. CKPT-5.6).

A reader that finds a tensor missing does not always say so: transformers initialises a missing
weight at random with a log line, vLLM's loaders skip names they do not see. A validator can see it
from the names alone, without reading a byte:

    findings = completeness(names, config, partners)

``names`` are module-level names (a safetensors tensor name without its last component, a GGUF
tensor name without ``.weight``/``.bias``), so both containers use the same rules.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from .findings import Finding, finding, plural

__all__ = ["layer_stacks", "completeness", "partial_modules", "LAYER"]

# The first ``<stack>.<index>.`` of a name: Hugging Face ``model.layers.3.``, ``transformer.h.3.``,
# ``...blocks.3.``; GGUF ``blk.3.``.
LAYER = re.compile(r"^(?P<stack>(?:.*?\.)?(?:layers|layer|h|blocks|block|blk))\.(?P<index>\d{1,9})\.(?P<rest>.+)$")
SHOWN = 8


def layer_stacks(modules: list[str]) -> dict[str, dict[int, set[str]]]:
    """stack -> layer index -> the module names inside that layer (relative to it)."""
    stacks: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for name in modules:
        m = LAYER.match(name)
        if m:
            stacks[m["stack"]][int(m["index"])].add(m["rest"])
    return stacks


def _decoder_stack(stacks: dict[str, Any]) -> str | None:
    """The stack ``num_hidden_layers`` counts: the only one, or the language model's."""
    if len(stacks) == 1:
        return next(iter(stacks))
    for stack in stacks:
        if stack in ("model.layers", "blk") or stack.endswith("language_model.layers") \
                or stack.endswith("language_model.model.layers"):
            return stack
    return None


def _ranges(indices: list[int]) -> str:
    """``1, 4-6, 9`` (the first few runs)."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return _runs_text(runs)


def _runs_text(runs: list) -> str:
    text = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:SHOWN]]
    return ", ".join(text) + (", ..." if len(runs) > SHOWN else "")


def _gaps(present: set[int], top: int) -> list[tuple[int, int]]:
    """The runs of 0 .. top-1 that ``present`` lacks, from the gaps between its members: never the indices
    one by one, since a hostile config or tensor name may say 2^63 layers."""
    runs, nxt = [], 0
    for i in sorted(i for i in present if i < top):
        if i > nxt:
            runs.append((nxt, i - 1))
        nxt = i + 1
    if nxt < top:
        runs.append((nxt, top - 1))
    return runs


def _layer_count_findings(stack: str, layers: dict[int, set[str]], expected: int | None, source: str,
                          extra_allowed: int) -> list[Finding]:
    """CKPT-5.4: indices 0 .. n-1 present; beyond n only the config's extra (MTP) layers."""
    present = set(layers)
    top = expected if expected is not None else max(present) + 1
    findings: list[Finding] = []
    gaps = _gaps(present, top)
    missing = sum(b - a + 1 for a, b in gaps)
    if missing:
        said = f"{source} says {expected}" if expected is not None else f"layer {max(present)} is present"
        findings.append(finding(
            "ckpt.layer.missing", "error",
            f"{plural(missing, 'layer')} of '{stack}' {'has' if missing == 1 else 'have'} no tensor at "
            f"all: {_runs_text(gaps)} ({said}; {len(present)} present)", tensor=f"{stack}.{gaps[0][0]}",
            count=missing))
    if expected is not None:
        beyond = sorted(i for i in present if i >= expected + extra_allowed)
        if beyond:
            findings.append(finding(
                "ckpt.layer.extra", "warning",
                f"'{stack}' holds {plural(len(beyond), 'layer')} past the {source}'s {expected}: {_ranges(beyond)}; "
                "readers that build the model from the config never load them", tensor=f"{stack}.{beyond[0]}",
                count=len(beyond)))
    return findings


def _present_ancestor(module: str, modules: set[str]) -> str:
    """The longest dotted prefix of ``module`` under which the layer holds something ('' for the layer itself)."""
    parts = module.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:cut]) + "."
        if any(m.startswith(prefix) for m in modules):
            return prefix[:-1]
    return ""


def _module_set_findings(stack: str, layers: dict[int, set[str]]) -> list[Finding]:
    """CKPT-5.5: a layer whose modules are a strict subset of another layer's misses the difference.

    Inside a sub-block the layer holds (``mlp.up_proj`` beside ``mlp.gate_proj``, an expert beside its
    siblings) or directly under the layer (a norm): an error. A whole sub-block absent (``self_attn``
    where other layers have one): a warning, as hybrid architectures legitimately differ by blocks."""
    errors: dict[str, list[int]] = defaultdict(list)
    warnings: dict[str, list[int]] = defaultdict(list)
    families = sorted({frozenset(s) for s in layers.values()}, key=len, reverse=True)
    for index, modules in sorted(layers.items()):
        fuller = [f for f in families if modules < f]
        if not fuller:
            continue
        for module in sorted(fuller[0] - modules):
            ancestor = _present_ancestor(module, modules)
            (errors if ancestor or "." not in module else warnings)[module].append(index)
    found: list[Finding] = []
    for module, indices in errors.items():
        found.append(finding(
            "ckpt.module.missing", "error",
            f"'{stack}.{indices[0]}.{module}' is missing: other layers of '{stack}' hold '{module}' beside the "
            f"modules this layer has (missing from {plural(len(indices), 'layer')}: {_ranges(indices)})",
            tensor=f"{stack}.{indices[0]}.{module}", count=len(indices)))
    blocks: dict[tuple[str, tuple[int, ...]], list[str]] = defaultdict(list)
    for module, indices in warnings.items():
        blocks[(module.split(".")[0], tuple(indices))].append(module)
    for (block, indices), modules in blocks.items():
        found.append(finding(
            "ckpt.block.absent", "warning",
            f"'{stack}.{indices[0]}.{block}' is absent ({plural(len(modules), 'module')} other layers of '{stack}' "
            f"hold: {', '.join(modules[:SHOWN])}{', ...' if len(modules) > SHOWN else ''}; absent from "
            f"{plural(len(indices), 'layer')}: {_ranges(list(indices))}); a hybrid architecture may mean it, "
            "a lost block looks the same", tensor=f"{stack}.{indices[0]}.{block}", count=len(indices)))
    return found


def _expected_layers(config: Any, gguf_blocks: int | None) -> tuple[int | None, str, int]:
    """(num_hidden_layers or the GGUF block_count, where it came from, extra layers the config allows)."""
    if gguf_blocks is not None:
        return gguf_blocks, "the GGUF header's block_count", 0
    text = config if isinstance(config, dict) else {}
    if "num_hidden_layers" not in text and isinstance(text.get("text_config"), dict):
        text = text["text_config"]
    n = text.get("num_hidden_layers")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        return None, "", 0
    extra = text.get("num_nextn_predict_layers", 0)        # DeepSeek-V3's multi-token-prediction layers
    extra = extra if isinstance(extra, int) and not isinstance(extra, bool) and extra > 0 else 0
    return n, "config.json's num_hidden_layers", extra


def completeness(modules: list[str], config: Any, *, gguf_blocks: int | None = None) -> list[Finding]:
    """CKPT-5.4 and CKPT-5.5 over the module names of a checkpoint."""
    stacks = layer_stacks(modules)
    decoder = _decoder_stack(stacks)
    expected, source, extra = _expected_layers(config, gguf_blocks)
    findings: list[Finding] = []
    for stack, layers in sorted(stacks.items()):
        counted = expected if stack == decoder else None
        findings += _layer_count_findings(stack, layers, counted, source, extra)
        compared = {i: s for i, s in layers.items() if counted is None or i < counted}
        findings += _module_set_findings(stack, compared)
    return findings


def partial_modules(prefixes: dict[str, set[str]], formats: list[tuple[str, str, frozenset[str]]]) -> list[Finding]:
    """CKPT-5.6: a module holding a format's partner tensors without its anchor (``qzeros`` and ``scales``
    but no ``qweight``). ``prefixes``: module -> suffixes no format claimed; ``formats``: (name, anchor,
    partner suffixes only that format uses)."""
    findings: list[Finding] = []
    for prefix, suffixes in sorted(prefixes.items()):
        for name, anchor, partners in formats:
            held = sorted(suffixes & partners)
            if held and anchor not in suffixes:
                findings.append(finding(
                    "ckpt.module.partial", "error",
                    f"'{prefix}' holds {', '.join(held)} of a {name} module but no {anchor}: the module cannot be "
                    "decoded, and a reader that skips it leaves the layer unquantized", tensor=prefix))
                break
    return findings
