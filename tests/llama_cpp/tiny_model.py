"""A tiny llama-architecture model as an F32 GGUF, written with gguf-py's GGUFWriter (issue 19).

Real tensor names (``token_embd.weight``, ``blk.N.attn_q.weight``, ..., ``output_norm.weight``,
``output.weight``), hidden size 256, a feed-forward size of 640 (a multiple of 32 but not of 256, so
llama-quantize takes its shape fallbacks on ``ffn_down``: q4_K -> q5_0, q6_K -> q8_0, i-quants -> iq4_nl),
grouped-query attention (4 heads of 64, 2 KV heads), and a SentencePiece-style ("llama") vocabulary
of 384 tokens: <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF> (the loader looks up <0x0A> for
the line feed and byte fallback needs all of them), then word pieces. Weights are seeded normal with
the scale of a real checkpoint (std 0.02, norms near 1), so the file is the same for the same seed.

Two variants: ``f16=True`` stores every matrix as F16 (norms stay F32, as convert_hf_to_gguf.py writes
them), and ``experts=N`` makes every layer's feed-forward a Mixtral-style mixture of N experts (2 used):
``ffn_gate_inp`` and the 3-D ``ffn_{gate,up,down}_exps``, the tensors llama-quantize's MXFP4_MOE writes
as mxfp4.

    python tests/llama_cpp/tiny_model.py OUT.gguf [--seed N] [--f16] [--experts N]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

N_EMBD, N_FF, N_LAYER, N_HEAD, N_HEAD_KV, N_CTX = 256, 640, 4, 4, 2, 256
HEAD_DIM = N_EMBD // N_HEAD

# SentencePiece token types (llama.cpp's llama_token_type / gguf.TokenType)
NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6
WORDS = ("the of and to in is that it for was on are as with his they at be this from have or by one "
         "had not but what all were when we there can an your which their said if do will each about how "
         "up out them then she many some so these would other into has more her two like him see time "
         "could no make than first been its who now people my made over did down only way find use may "
         "water long little very after words called just where most know get through back much go good "
         "new write our me man too any day same right look think also around another came come work three "
         "word must because does part even place well such here take why things help put years different "
         "away again off went old number great tell men say small every found still between name should "
         "home big give air line set own under read last never us left end along while might next sound "
         "below saw something thought both few those always looked show large often together asked house "
         "world going want school important until form food keep children feet land side without boy once "
         "animals life enough took sometimes four head above kind began almost live page got earth need far").split()


def vocabulary(n_vocab: int = 384) -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, types): specials, the 256 byte tokens, single letters, then whole words."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [UNKNOWN, CONTROL, CONTROL] + [BYTE] * 256
    pieces = ["\u2581"] + [c for c in "abcdefghijklmnopqrstuvwxyz"] + ["\u2581" + w for w in WORDS]
    for piece in pieces:
        if len(tokens) == n_vocab:
            break
        if piece not in tokens:
            tokens.append(piece)
            types.append(NORMAL)
    if len(tokens) != n_vocab:
        raise ValueError(f"only {len(tokens)} tokens for a vocabulary of {n_vocab}")
    scores = [0.0] * 259 + [-float(i) for i in range(n_vocab - 259)]
    return tokens, scores, types


def tensors(seed: int = 0, n_layer: int = N_LAYER, n_vocab: int = 384, experts: int = 0) -> dict[str, np.ndarray]:
    """Name -> float32 array in GGUF order (numpy shape (ne1, ne0): a row is ne0 contiguous weights; an
    expert tensor is (n_expert, ne1, ne0))."""
    rng = np.random.default_rng(seed)

    def w(rows: int, cols: int, std: float = 0.02, n: int = 0) -> np.ndarray:
        return rng.normal(0.0, std, (n, rows, cols) if n else (rows, cols)).astype(np.float32)

    def norm() -> np.ndarray:
        return (1.0 + rng.normal(0.0, 0.05, N_EMBD)).astype(np.float32)

    out = {"token_embd.weight": w(n_vocab, N_EMBD)}
    for i in range(n_layer):
        out[f"blk.{i}.attn_norm.weight"] = norm()
        out[f"blk.{i}.attn_q.weight"] = w(N_EMBD, N_EMBD)
        out[f"blk.{i}.attn_k.weight"] = w(N_HEAD_KV * HEAD_DIM, N_EMBD)
        out[f"blk.{i}.attn_v.weight"] = w(N_HEAD_KV * HEAD_DIM, N_EMBD)
        out[f"blk.{i}.attn_output.weight"] = w(N_EMBD, N_EMBD)
        out[f"blk.{i}.ffn_norm.weight"] = norm()
        if experts:
            out[f"blk.{i}.ffn_gate_inp.weight"] = w(experts, N_EMBD)
            out[f"blk.{i}.ffn_gate_exps.weight"] = w(N_FF, N_EMBD, n=experts)
            out[f"blk.{i}.ffn_up_exps.weight"] = w(N_FF, N_EMBD, n=experts)
            out[f"blk.{i}.ffn_down_exps.weight"] = w(N_EMBD, N_FF, n=experts)
        else:
            out[f"blk.{i}.ffn_gate.weight"] = w(N_FF, N_EMBD)
            out[f"blk.{i}.ffn_up.weight"] = w(N_FF, N_EMBD)
            out[f"blk.{i}.ffn_down.weight"] = w(N_EMBD, N_FF)
    out["output_norm.weight"] = norm()
    out["output.weight"] = w(n_vocab, N_EMBD)
    return out


def write(path: str | Path, seed: int = 0, n_layer: int = N_LAYER, f16: bool = False,
          experts: int = 0) -> dict[str, np.ndarray]:
    """Write the model to ``path``; return its tensors as stored (name -> float32, or float16 matrices
    when ``f16``; GGUF order)."""
    import gguf

    tokens, scores, types = vocabulary()
    arrays = tensors(seed, n_layer, len(tokens), experts)
    if f16:
        arrays = {k: a.astype(np.float16) if a.ndim > 1 else a for k, a in arrays.items()}
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("qformats tiny llama")
    writer.add_description(f"issue 19 test model: random weights, seed {seed}, tests/llama_cpp/tiny_model.py")
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_rope_dimension_count(HEAD_DIM)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    if experts:
        writer.add_expert_count(experts)
        writer.add_expert_used_count(2)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if f16 else gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    for name, array in arrays.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return arrays


if __name__ == "__main__":
    args = sys.argv[1:]
    seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 0
    write(args[0], seed=seed, f16="--f16" in args,
          experts=int(args[args.index("--experts") + 1]) if "--experts" in args else 0)
    print(args[0])
