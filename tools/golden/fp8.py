"""Writes fixtures/golden/fp8_decode.tsv and fp8_encode.tsv from ml_dtypes (run once; committed).

decode: format, code, f32 bits of the decoded value (NaN as "nan").
encode: format, f32 bits of the input, expected code, for a sweep of inputs: every code's value,
        the midpoints between neighbouring values and the floats just beside them (ties and
        rounding), overflow and underflow edges, infinities, signed zeros, NaN and random values.
"""
import pathlib
import struct
import sys

import ml_dtypes
import numpy as np

FORMATS = {
    "f8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "f8_e5m2": ml_dtypes.float8_e5m2,
    "f8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "f8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
}


def bits(x: np.float32) -> int:
    return struct.unpack("<I", struct.pack("<f", float(x)))[0] if not np.isnan(x) else struct.unpack("<I", np.float32(x).tobytes())[0]


def main(out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    dec = ["format\tcode\tf32_bits"]
    enc = ["format\tinput_f32_bits\tcode"]
    rng = np.random.default_rng(20261122)
    for name, t in FORMATS.items():
        codes = np.arange(256, dtype=np.uint8)
        vals = codes.view(t).astype(np.float32)
        for c, v in zip(codes, vals):
            dec.append(f"{name}\t{c}\t{'nan' if np.isnan(v) else format(bits(v), '08x')}")
        finite = np.unique(vals[np.isfinite(vals)].astype(np.float64))
        mids = (finite[:-1] + finite[1:]) / 2
        inputs = [finite, mids]
        for m in (mids.astype(np.float32),):
            inputs.append(np.nextafter(m, np.float32(np.inf)))
            inputs.append(np.nextafter(m, np.float32(-np.inf)))
        mx = finite.max()
        edges = [mx * 1.03, mx * 1.0625, mx * 1.07, mx * 2, 1e30, 3e38, np.inf, -np.inf, 0.0, -0.0, np.nan, -np.nan,
                 1e-10, -1e-10, 1e-45, finite[finite > 0].min() / 2, finite[finite > 0].min() / 2 * 1.0001]
        inputs.append(np.array(edges))
        inputs.append(rng.normal(0, 10, 2000))
        inputs.append(rng.uniform(-mx * 1.2, mx * 1.2, 2000))
        inputs.append(np.exp2(rng.uniform(-30, 20, 2000)) * rng.choice([-1, 1], 2000))
        xs = np.concatenate([np.asarray(i, dtype=np.float64).astype(np.float32) for i in inputs])
        xs = xs[np.unique(xs.view(np.uint32), return_index=True)[1]]
        codes = xs.astype(t).view(np.uint8)
        for x, c in zip(xs, codes):
            enc.append(f"{name}\t{x.view(np.uint32):08x}\t{c}")
    (out / "fp8_decode.tsv").write_text("\n".join(dec) + "\n")
    (out / "fp8_encode.tsv").write_text("\n".join(enc) + "\n")
    print(f"ml_dtypes {ml_dtypes.__version__}: {len(dec) - 1} decodes, {len(enc) - 1} encodes")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "fixtures/golden"))
