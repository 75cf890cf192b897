#!/usr/bin/python3
"""Writes the ONNX graphs `condition-bench xattn --ort` runs on ONNX Runtime.

mha_block.onnx: a whole cross-attention block, weights as graph inputs (so
the file stays tiny), every dimension dynamic:

    q [1, T_q, d_q], kv [1, T_k, d_kv], wq [d_q, inner], wk [d_kv, inner],
    wv [d_kv, inner], wo [inner, d_out], bo [d_out]
    out = MultiHeadAttention(q·wq, kv·wk, kv·wv) · wo + bo   [1, T_q, d_out]

mha_core.onnx: the attention core alone on projected inputs:

    q [1, T_q, inner], k [1, T_k, inner], v [1, T_k, inner]
    out = MultiHeadAttention(q, k, v)                         [1, T_q, inner]

mha_proj.onnx: the block's four projections alone, the GEMM peer of ours:

    q [1, T_q, d_q], kv [1, T_k, d_kv], a [1, T_q, inner], and the block's weights
    Q = q·wq, K = kv·wk, V = kv·wv   [1, T, inner];   out = a·wo + bo   [1, T_q, d_out]

MultiHeadAttention is ONNX Runtime's com.microsoft contrib operator; its
num_heads attribute is written as 1 and the Go side patches that one byte
(the attribute's varint) to the head count it runs, so one file serves every
head count from 1 to 127.

Run: /usr/bin/python3 cmd/condition-bench/benchdata/generate_mha.py (from the
repository root, or anywhere: it writes beside itself).
"""
import os

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
F = TensorProto.FLOAT
OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]


def mha(inputs, output):
    return helper.make_node("MultiHeadAttention", inputs, [output], domain="com.microsoft", num_heads=1)


def vi(name, dims):
    return helper.make_tensor_value_info(name, F, dims)


def save(graph, name, heads_attr=True):
    model = helper.make_model(graph, opset_imports=OPSETS, producer_name="condition generate_mha.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = os.path.join(HERE, name)
    data = model.SerializeToString()
    # The Go side patches this exact byte pattern (attribute name, then the
    # varint field i = 1).
    assert data.count(b"\x0a\x09num_heads\x18\x01") == (1 if heads_attr else 0), name
    with open(path, "wb") as f:
        f.write(data)
    print(path, len(data), "bytes")


def main():
    block = helper.make_graph(
        [
            helper.make_node("MatMul", ["q", "wq"], ["Q"]),
            helper.make_node("MatMul", ["kv", "wk"], ["K"]),
            helper.make_node("MatMul", ["kv", "wv"], ["V"]),
            mha(["Q", "K", "V"], "A"),
            helper.make_node("MatMul", ["A", "wo"], ["O"]),
            helper.make_node("Add", ["O", "bo"], ["out"]),
        ],
        "xattn_block",
        [
            vi("q", [1, "tq", "dq"]),
            vi("kv", [1, "tk", "dkv"]),
            vi("wq", ["dq", "inner"]),
            vi("wk", ["dkv", "inner"]),
            vi("wv", ["dkv", "inner"]),
            vi("wo", ["inner", "dout"]),
            vi("bo", ["dout"]),
        ],
        [vi("out", [1, "tq", "dout"])],
    )
    save(block, "mha_block.onnx")
    core = helper.make_graph(
        [mha(["q", "k", "v"], "out")],
        "xattn_core",
        [vi("q", [1, "tq", "inner"]), vi("k", [1, "tk", "inner"]), vi("v", [1, "tk", "inner"])],
        [vi("out", [1, "tq", "inner"])],
    )
    save(core, "mha_core.onnx")
    proj = helper.make_graph(
        [
            helper.make_node("MatMul", ["q", "wq"], ["Q"]),
            helper.make_node("MatMul", ["kv", "wk"], ["K"]),
            helper.make_node("MatMul", ["kv", "wv"], ["V"]),
            helper.make_node("MatMul", ["a", "wo"], ["O"]),
            helper.make_node("Add", ["O", "bo"], ["out"]),
        ],
        "xattn_projections",
        [
            vi("q", [1, "tq", "dq"]),
            vi("kv", [1, "tk", "dkv"]),
            vi("a", [1, "tq", "inner"]),
            vi("wq", ["dq", "inner"]),
            vi("wk", ["dkv", "inner"]),
            vi("wv", ["dkv", "inner"]),
            vi("wo", ["inner", "dout"]),
            vi("bo", ["dout"]),
        ],
        [vi("Q", [1, "tq", "inner"]), vi("K", [1, "tk", "inner"]), vi("V", [1, "tk", "inner"]), vi("out", [1, "tq", "dout"])],
    )
    save(proj, "mha_proj.onnx", heads_attr=False)


if __name__ == "__main__":
    main()
