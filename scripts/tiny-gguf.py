#!/usr/bin/env python3
"""Writes a tiny llama-architecture model in GGUF with random weights, so a real llama.cpp
server (llama-cpp-python's) can be started without downloading anything. Its answers are
noise; what it is for is the server's behaviour around them: which requests it accepts,
refuses, and how.

The vocabulary is SentencePiece-style with only byte tokens (<0x00>..<0xFF>) and the three
control tokens, so any text can be tokenized. Weights are float32, drawn from a fixed seed:
the same file every time.

Usage: tiny-gguf.py OUT.gguf
"""

import random
import struct
import sys

N_EMBD = 32
N_HEAD = 4
N_LAYER = 2
N_FF = 64
N_CTX = 8192

# GGUF value types and tensor type.
U32, I32, F32, STRING, ARRAY = 4, 5, 6, 8, 9
GGML_F32 = 0
ALIGN = 32


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key, kind, value):
    out = gguf_string(key) + struct.pack("<I", kind)
    if kind == U32:
        return out + struct.pack("<I", value)
    if kind == F32:
        return out + struct.pack("<f", value)
    if kind == STRING:
        return out + gguf_string(value)
    raise ValueError(kind)


def kv_array(key, kind, values):
    out = gguf_string(key) + struct.pack("<I", ARRAY) + struct.pack("<IQ", kind, len(values))
    for v in values:
        if kind == STRING:
            out += gguf_string(v)
        elif kind == F32:
            out += struct.pack("<f", v)
        elif kind == I32:
            out += struct.pack("<i", v)
        else:
            raise ValueError(kind)
    return out


def vocabulary():
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    # 2 unknown, 3 control, 6 byte
    types = [2, 3, 3] + [6] * 256
    scores = [0.0] * len(tokens)
    return tokens, scores, types


def tensors(n_vocab):
    shapes = [("token_embd.weight", [N_EMBD, n_vocab])]
    for i in range(N_LAYER):
        p = "blk.%d." % i
        shapes += [
            (p + "attn_norm.weight", [N_EMBD]),
            (p + "attn_q.weight", [N_EMBD, N_EMBD]),
            (p + "attn_k.weight", [N_EMBD, N_EMBD]),
            (p + "attn_v.weight", [N_EMBD, N_EMBD]),
            (p + "attn_output.weight", [N_EMBD, N_EMBD]),
            (p + "ffn_norm.weight", [N_EMBD]),
            (p + "ffn_gate.weight", [N_EMBD, N_FF]),
            (p + "ffn_up.weight", [N_EMBD, N_FF]),
            (p + "ffn_down.weight", [N_FF, N_EMBD]),
        ]
    shapes += [("output_norm.weight", [N_EMBD]), ("output.weight", [N_EMBD, n_vocab])]
    return shapes


def main(path):
    rng = random.Random(20261126)
    tokens, scores, types = vocabulary()
    meta = [
        kv("general.architecture", STRING, "llama"),
        kv("general.name", STRING, "tiny-random"),
        kv("general.alignment", U32, ALIGN),
        kv("llama.context_length", U32, N_CTX),
        kv("llama.embedding_length", U32, N_EMBD),
        kv("llama.block_count", U32, N_LAYER),
        kv("llama.feed_forward_length", U32, N_FF),
        kv("llama.attention.head_count", U32, N_HEAD),
        kv("llama.attention.head_count_kv", U32, N_HEAD),
        kv("llama.rope.dimension_count", U32, N_EMBD // N_HEAD),
        kv("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        kv("tokenizer.ggml.model", STRING, "llama"),
        kv_array("tokenizer.ggml.tokens", STRING, tokens),
        kv_array("tokenizer.ggml.scores", F32, scores),
        kv_array("tokenizer.ggml.token_type", I32, types),
        kv("tokenizer.ggml.unknown_token_id", U32, 0),
        kv("tokenizer.ggml.bos_token_id", U32, 1),
        kv("tokenizer.ggml.eos_token_id", U32, 2),
    ]
    shapes = tensors(len(tokens))
    infos = b""
    data = b""
    for name, dims in shapes:
        count = 1
        for d in dims:
            count *= d
        infos += gguf_string(name) + struct.pack("<I", len(dims))
        infos += b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", GGML_F32, len(data))
        if name.endswith("norm.weight"):
            values = [1.0] * count
        else:
            values = [rng.gauss(0.0, 0.2) for _ in range(count)]
        data += struct.pack("<%df" % count, *values)
        data += b"\0" * (-len(data) % ALIGN)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(shapes), len(meta)) + b"".join(meta) + infos
    head += b"\0" * (-len(head) % ALIGN)
    with open(path, "wb") as f:
        f.write(head + data)


if __name__ == "__main__":
    main(sys.argv[1])
