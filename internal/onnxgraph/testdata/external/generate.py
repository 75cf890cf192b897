#!/usr/bin/python3
"""Makes the external-data fixtures of internal/onnxgraph and models (the hub
tests): the tiny CLIP graphs of testdata/tinyclip saved with their
initializers outside the graph, as large hub exports do.

  text_model.onnx        initializers in text_model.onnx.data   (the "<graph>.data" style)
  vision_model.onnx      initializers in vision_model.onnx_data (the "<graph>_data" style)
  escape.onnx            one initializer whose location is "../escape.bin": must be refused
  expected.json          per graph, the external-data locations as the onnx
                         package reads them (the golden for the Go readers)

Run with Debian's python3-onnx: /usr/bin/python3 generate.py
"""
import json
import os

import onnx
from onnx import TensorProto, external_data_helper

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = os.path.join(HERE, "..", "..", "..", "..", "testdata", "tinyclip", "onnx")


def save_external(src, name, location):
    graph = os.path.join(HERE, name)
    data = os.path.join(HERE, location)
    for p in (graph, data):
        if os.path.exists(p):
            os.unlink(p)  # save_model appends to an existing data file
    m = onnx.load(os.path.join(TINY, src))
    onnx.save_model(m, graph, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=location, size_threshold=64, convert_attribute=False)
    onnx.checker.check_model(graph)


def locations(path):
    m = onnx.load(path, load_external_data=False)
    out = set()
    for t in external_data_helper._get_all_tensors(m):
        if external_data_helper.uses_external_data(t):
            info = external_data_helper.ExternalDataInfo(t)
            out.add(info.location)
    inits = sum(1 for t in m.graph.initializer if t.data_location == TensorProto.EXTERNAL)
    return sorted(out), inits


def main():
    save_external("text_model.onnx", "text_model.onnx", "text_model.onnx.data")
    save_external("vision_model.onnx", "vision_model.onnx", "vision_model.onnx_data")

    # A graph pointing outside its folder: the readers report the location,
    # and the hub fetch refuses it.
    m = onnx.load(os.path.join(HERE, "vision_model.onnx"), load_external_data=False)
    for t in m.graph.initializer:
        if t.data_location == TensorProto.EXTERNAL:
            for e in t.external_data:
                if e.key == "location":
                    e.value = "../escape.bin"
            break
    with open(os.path.join(HERE, "escape.onnx"), "wb") as f:
        f.write(m.SerializeToString())

    expected = {}
    for name in ("text_model.onnx", "vision_model.onnx", "escape.onnx"):
        locs, n = locations(os.path.join(HERE, name))
        expected[name] = {"locations": locs, "external_initializers": n}
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
