#!/usr/bin/python3
"""Derives dtype and storage variants of the tiny CLIP's ONNX graphs, for the
encoders' float16, bfloat16 and external-data paths. It reads only
onnx/text_model.onnx and onnx/vision_model.onnx (written by generate.py) and
needs numpy and onnx (Debian's python3-onnx 1.12 is enough; no torch, no ONNX
Runtime). Run it after generate.py, from anywhere:

    /usr/bin/python3 testdata/tinyclip/make_variants.py

The output is deterministic. Files (under testdata/tinyclip/):

  onnx/variants/text_model_fp16.onnx     float16 throughout, as the hub's `_fp16`
  onnx/variants/vision_model_fp16.onnx   exports are: every float initializer, float
                                         Constant and Cast-to-float becomes float16,
                                         and so do the float graph inputs and outputs
                                         (pixel_values, last_hidden_state, text_embeds,
                                         image_embeds). Values beyond float16's range are
                                         clipped to it (the attention masks' fill value,
                                         float32's lowest, becomes -65504). Ops listed in
                                         FP32_OPS (none today: ONNX Runtime 1.30's CPU
                                         provider has float16 kernels for every op of
                                         these graphs) would run in float32 between Casts.
  onnx/variants/vision_model_bf16out.onnx
                                         the float32 graph with its outputs cast to
                                         bfloat16 (pixel_values stays float32)
  onnx/bad/vision_uint8.onnx             a hand-made graph taking uint8 pixel_values
                                         (raw bytes: the encoders refuse it)
  external/                              a model directory whose vision graph keeps its
    config.json, preprocessor_config.json  initializers in a side file, as exporters do
    onnx/vision_model.onnx               for graphs over 2 GB: the float32 vision graph
    onnx/vision_model.onnx_data          saved with save_as_external_data (one file,
                                         every initializer, size_threshold 0)

The Go tests compare the fp16 and bf16 variants with torch's float32 goldens
(golden/*.npy, from generate.py) within stated tolerances, and the external-data
graph with the same goldens as the plain graph.
"""

import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ONNX_DIR = os.path.join(HERE, "onnx")

# Op types that must run in float32 inside a float16 graph (wrapped in Casts).
FP32_OPS = set()

FLOAT = TensorProto.FLOAT
FLOAT16 = TensorProto.FLOAT16
FP16_MAX = float(np.finfo(np.float16).max)


def write_atomic(path, data):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def to_fp16_tensor(t):
    """A float32 TensorProto as float16, same name. Finite values beyond float16's
    range are clipped to it (the attention masks' fill value, float32's lowest,
    becomes float16's lowest, as in a model exported in float16)."""
    a = numpy_helper.to_array(t)
    fin = np.isfinite(a)
    a = np.where(fin, np.clip(a, -FP16_MAX, FP16_MAX), a)
    return numpy_helper.from_array(a.astype(np.float16), t.name)


def set_elem_type(vi, old, new):
    tt = vi.type.tensor_type
    if vi.type.HasField("tensor_type") and tt.elem_type == old:
        tt.elem_type = new
        return True
    return False


def to_fp16(model, where):
    """Converts every float tensor of a float32 graph to float16, inputs and
    outputs included; ops in FP32_OPS run in float32 between Cast nodes."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    inits = [to_fp16_tensor(t) if t.data_type == FLOAT else t for t in g.initializer]
    del g.initializer[:]
    g.initializer.extend(inits)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        set_elem_type(vi, FLOAT, FLOAT16)
    nodes = []
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == FLOAT:
                a.t.CopyFrom(to_fp16_tensor(a.t))
            if n.op_type == "Cast" and a.name == "to" and a.i == FLOAT:
                a.i = FLOAT16
            if a.type == onnx.AttributeProto.FLOAT and n.op_type in ("Constant",):
                sys.exit("make_variants: %s: Constant %s has a value_float attribute" % (where, n.name))
        if n.op_type not in FP32_OPS:
            nodes.append(n)
            continue
        # float16 in, float32 op, float16 out.
        ins, outs = [], []
        for i, x in enumerate(n.input):
            y = "%s_fp32_in%d" % (n.name or n.output[0], i)
            nodes.append(helper.make_node("Cast", [x], [y], to=FLOAT))
            ins.append(y)
        for i, x in enumerate(n.output):
            outs.append("%s_fp32_out%d" % (n.name or n.output[0], i))
        w = onnx.NodeProto()
        w.CopyFrom(n)
        del w.input[:]
        w.input.extend(ins)
        del w.output[:]
        w.output.extend(outs)
        nodes.append(w)
        for x, y in zip(outs, n.output):
            nodes.append(helper.make_node("Cast", [x], [y], to=FLOAT16))
    del g.node[:]
    g.node.extend(nodes)
    onnx.checker.check_model(m)
    onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
    return m


def with_bf16_outputs(model):
    """The float32 graph with every float output cast to bfloat16."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for o in g.output:
        if o.type.tensor_type.elem_type != FLOAT:
            continue
        inner = o.name + "_float32"
        for n in g.node:
            for i, x in enumerate(n.output):
                if x == o.name:
                    n.output[i] = inner
            for i, x in enumerate(n.input):
                if x == o.name:
                    n.input[i] = inner
        g.node.append(helper.make_node("Cast", [inner], [o.name], to=TensorProto.BFLOAT16))
        o.type.tensor_type.elem_type = TensorProto.BFLOAT16
    onnx.checker.check_model(m)
    return m


def uint8_vision_graph():
    """pixel_values uint8 [batch, 3, 32, 32]; outputs with the right names and types."""
    g = helper.make_graph(
        [helper.make_node("Cast", ["pixel_values"], ["px"], to=FLOAT),
         helper.make_node("Flatten", ["px"], ["last_hidden_state"], axis=2),
         helper.make_node("ReduceMean", ["px"], ["image_embeds"], axes=[2, 3], keepdims=0)],
        "vision_uint8",
        [helper.make_tensor_value_info("pixel_values", TensorProto.UINT8, ["batch", 3, 32, 32])],
        [helper.make_tensor_value_info("last_hidden_state", FLOAT, ["batch", 3, 32 * 32]),
         helper.make_tensor_value_info("image_embeds", FLOAT, ["batch", 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    return m


def write_external(model, outdir):
    """A model directory whose vision graph keeps its initializers in
    onnx/vision_model.onnx_data."""
    onnxdir = os.path.join(outdir, "onnx")
    os.makedirs(onnxdir, exist_ok=True)
    for f in ("config.json", "preprocessor_config.json"):
        shutil.copyfile(os.path.join(HERE, f), os.path.join(outdir, f))
    graph = os.path.join(onnxdir, "vision_model.onnx")
    data = os.path.join(onnxdir, "vision_model.onnx_data")
    for p in (graph, data):
        if os.path.exists(p):
            os.unlink(p)  # save_model appends to an existing data file
    m = onnx.ModelProto()
    m.CopyFrom(model)
    onnx.save_model(m, graph, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="vision_model.onnx_data", size_threshold=0, convert_attribute=False)
    onnx.checker.check_model(graph)
    back = onnx.load(graph, load_external_data=False)
    n = sum(1 for t in back.graph.initializer if t.data_location == TensorProto.EXTERNAL)
    if n != len(back.graph.initializer):
        sys.exit("make_variants: %d of %d initializers went to the data file" % (n, len(back.graph.initializer)))


def main():
    text = onnx.load(os.path.join(ONNX_DIR, "text_model.onnx"))
    vision = onnx.load(os.path.join(ONNX_DIR, "vision_model.onnx"))
    variants = os.path.join(ONNX_DIR, "variants")
    write_atomic(os.path.join(variants, "text_model_fp16.onnx"), to_fp16(text, "text_model.onnx").SerializeToString())
    write_atomic(os.path.join(variants, "vision_model_fp16.onnx"), to_fp16(vision, "vision_model.onnx").SerializeToString())
    write_atomic(os.path.join(variants, "vision_model_bf16out.onnx"), with_bf16_outputs(vision).SerializeToString())
    write_atomic(os.path.join(ONNX_DIR, "bad", "vision_uint8.onnx"), uint8_vision_graph().SerializeToString())
    write_external(vision, os.path.join(HERE, "external"))


if __name__ == "__main__":
    main()
