"""Writes Caffe models (`.caffemodel`) with protobuf and Caffe's own schema, and records what
protobuf's parser reads from each in fixtures/interop/caffe/expected.json: per file, per
blob (named `<layer>.<index>`, as pycaffe's `net.params[layer][index]`), its shape as
Caffe's `Blob::FromProto` makes it, our element type name and its bytes in hex.

Caffe is not on PyPI; Caffe writes a model as `NetParameter.SerializeToString()` of its
caffe.proto, which is what this script does, with the caffe_pb2 module X2Paddle ships
(generated from Caffe's caffe.proto; loaded by path, without X2Paddle's package, which
imports Paddle).

- lenet.caffemodel: today's layout (`layer`, field 100): convolution, batch norm (three
  blobs, one of shape [1]), scale, inner product, a layer without blobs, a blob given by
  the older `num, channels, height, width`, a blob of `double_data`;
- v1.caffemodel: the layout before 2015 (`layers`, field 2, layer types as an enum), its
  blobs shaped by `num, channels, height, width` only, as the BVLC model zoo's are;
- snapshot.caffemodel: what a solver with `snapshot_diff: true` writes (`Net::ToProto` with
  `write_diff`): each blob's gradients beside its values, `diff` (float) and, for a blob of
  `double_data`, `double_diff`; one layer written without them. A blob's diff is recorded
  as `<layer>.<index>.diff`, as pycaffe's `net.params[layer][index].diff`.

Run in a throwaway environment:

    python3 -m venv /tmp/cfenv
    /tmp/cfenv/bin/pip install --no-deps x2paddle==1.6.0
    /tmp/cfenv/bin/pip install "protobuf<4" numpy
    cd tools/interop && /tmp/cfenv/bin/python make_caffe.py ../../fixtures/interop/caffe
"""

import glob
import importlib.util
import json
import os
import sys

import numpy as np

from dtype_names import OURS


def caffe_pb2():
    site = os.path.dirname(os.path.dirname(np.__file__))
    path = glob.glob(os.path.join(site, "x2paddle", "decoder", "caffe_pb2.py"))[0]
    spec = importlib.util.spec_from_file_location("caffe_pb2", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pb = caffe_pb2()
rng = np.random.default_rng(11)


def blob(proto, shape, legacy=False, double=False, diff=False):
    values = rng.normal(size=shape).astype(np.float64 if double else np.float32)
    if legacy:
        proto.num, proto.channels, proto.height, proto.width = shape
    else:
        proto.shape.dim.extend(shape)
    (proto.double_data if double else proto.data).extend(values.ravel().tolist())
    if diff:
        grads = rng.normal(size=shape).astype(values.dtype) / 100
        (proto.double_diff if double else proto.diff).extend(grads.ravel().tolist())


def lenet():
    net = pb.NetParameter()
    net.name = "LeNet"
    layers = [
        ("conv1", "Convolution", [[20, 1, 5, 5], [20]]),
        ("bn1", "BatchNorm", [[20], [20], [1]]),
        ("scale1", "Scale", [[20], [20]]),
        ("relu1", "ReLU", []),
        ("ip1", "InnerProduct", [[10, 80], [10]]),
    ]
    for name, kind, shapes in layers:
        layer = net.layer.add()
        layer.name, layer.type = name, kind
        for shape in shapes:
            blob(layer.blobs.add(), shape)
    legacy = net.layer.add()
    legacy.name, legacy.type = "conv0", "Convolution"
    blob(legacy.blobs.add(), [4, 3, 2, 2], legacy=True)
    doubles = net.layer.add()
    doubles.name, doubles.type = "ip0", "InnerProduct"
    blob(doubles.blobs.add(), [3, 4], double=True)
    return net


def v1():
    net = pb.NetParameter()
    net.name = "CaffeNet"
    for name, kind, shapes in [
        ("conv1", pb.V1LayerParameter.CONVOLUTION, [[8, 3, 3, 3], [1, 1, 1, 8]]),
        ("relu1", pb.V1LayerParameter.RELU, []),
        ("fc6", pb.V1LayerParameter.INNER_PRODUCT, [[1, 1, 6, 72], [1, 1, 1, 6]]),
    ]:
        layer = net.layers.add()
        layer.name, layer.type = name, kind
        for shape in shapes:
            blob(layer.blobs.add(), shape, legacy=True)
    return net


def snapshot():
    net = pb.NetParameter()
    net.name = "Snapshot"
    for name, kind, shapes, double, diff in [
        ("conv1", "Convolution", [[4, 1, 3, 3], [4]], False, True),
        ("ip1", "InnerProduct", [[2, 36]], True, True),
        ("ip2", "InnerProduct", [[3, 2], [3]], False, False),
    ]:
        layer = net.layer.add()
        layer.name, layer.type = name, kind
        for shape in shapes:
            blob(layer.blobs.add(), shape, double=double, diff=diff)
    return net


def entry(values, shape):
    values = values.reshape(shape)
    return {
        "shape": shape,
        "type": OURS[values.dtype.name],
        "hex": values.astype(values.dtype.newbyteorder("<")).tobytes().hex(),
    }


def read_back(content):
    """Every blob as protobuf parses it, shaped as Caffe's Blob::FromProto shapes it."""
    net = pb.NetParameter.FromString(content)
    out = {}
    for layer in list(net.layer) + list(net.layers):
        for i, b in enumerate(layer.blobs):
            if b.HasField("num") or b.HasField("channels") or b.HasField("height") or b.HasField("width"):
                shape = [b.num, b.channels, b.height, b.width]
            else:
                shape = list(b.shape.dim)
            if len(b.double_data):
                values = np.array(b.double_data, dtype=np.float64)
            else:
                values = np.array(b.data, dtype=np.float32)
            out[f"{layer.name}.{i}"] = entry(values, shape)
            # Blob::FromProto: `double_diff` when it holds any, else `diff` when it does.
            if len(b.double_diff):
                out[f"{layer.name}.{i}.diff"] = entry(np.array(b.double_diff, np.float64), shape)
            elif len(b.diff):
                out[f"{layer.name}.{i}.diff"] = entry(np.array(b.diff, np.float32), shape)
    return out


def main(out):
    os.makedirs(out, exist_ok=True)
    expected = {"files": {}}
    nets = [("lenet.caffemodel", lenet()), ("v1.caffemodel", v1()), ("snapshot.caffemodel", snapshot())]
    for name, net in nets:
        content = net.SerializeToString()
        with open(os.path.join(out, name), "wb") as f:
            f.write(content)
        expected["files"][name] = {"blobs": read_back(content)}
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
