//! `zt cat --slice`: the same box from every kind of file (raw and zstd .zt, .safetensors,
//! .mag) equals the box cut from the whole tensor; mistakes are usage errors.

use std::path::Path;
use std::process::Output;

mod support;
use support::{p, zt};

/// Exit 2, one line on stderr containing `contains`, nothing on stdout.
fn assert_usage_error(o: &Output, contains: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(
        err.starts_with("zt: ") && err.lines().count() == 1,
        "{err:?}"
    );
    assert!(
        err.contains(contains),
        "{err:?} should contain {contains:?}"
    );
    assert!(o.stdout.is_empty());
}

/// The 6 x 5 tensor `m` (element (i, j) = 100 i + j, u16) and a 2 x 3 x 4 f32 tensor `t`.
const ROWS: u64 = 6;
const COLS: u64 = 5;

fn m_value(i: u64, j: u64) -> u16 {
    (100 * i + j) as u16
}

/// The expected bytes of the box `rows x cols` of `m`, cut from the whole tensor.
fn m_box(rows: std::ops::Range<u64>, cols: std::ops::Range<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    for i in rows {
        for j in cols.clone() {
            out.extend_from_slice(&m_value(i, j).to_le_bytes());
        }
    }
    out
}

/// The expected bytes of the rows `rows` and columns `cols` of `m`, in the order given.
fn m_picks(rows: impl Iterator<Item = u64>, cols: impl Iterator<Item = u64> + Clone) -> Vec<u8> {
    let mut out = Vec::new();
    for i in rows {
        for j in cols.clone() {
            out.extend_from_slice(&m_value(i, j).to_le_bytes());
        }
    }
    out
}

/// One file of each kind holding `m` and `t`.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let zt_path = dir.join("m.zt");
    let mut w = ztensor::Writer::create(&zt_path).unwrap();
    let m: Vec<u16> = (0..ROWS)
        .flat_map(|i| (0..COLS).map(move |j| m_value(i, j)))
        .collect();
    w.add("m", &[ROWS, COLS], &m).unwrap();
    let t: Vec<f32> = (0..24).map(|x| x as f32).collect();
    w.add("t", &[2, 3, 4], &t).unwrap();
    w.finish().unwrap();
    let mut all = vec![zt_path.clone()];
    for (out, extra) in [
        ("zstd.zt", Some("--compress")),
        ("m.safetensors", None),
        ("m.mag", None),
    ] {
        let target = dir.join(out);
        let mut args = vec!["convert", p(&zt_path), p(&target)];
        args.extend(extra);
        let o = zt(&args);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        all.push(target);
    }
    all
}

#[test]
fn the_same_box_from_every_kind_of_file() {
    let dir = tempfile::tempdir().unwrap();
    for file in files(dir.path()) {
        let f = p(&file);
        let cases: [(&str, Vec<u8>); 7] = [
            ("1:3", m_box(1..3, 0..COLS)),
            ("1:3,:", m_box(1..3, 0..COLS)),
            ("2:4,1:3", m_box(2..4, 1..3)),
            (":,4", m_box(0..ROWS, 4..5)),
            ("-2:,:-3", m_box(4..ROWS, 0..2)),
            ("3,2", m_box(3..4, 2..3)),
            ("2:2,:", Vec::new()),
        ];
        for (spec, want) in cases {
            let o = zt(&["cat", f, "m", "--slice", spec]);
            assert_eq!(
                o.status.code(),
                Some(0),
                "{f} {spec}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            assert_eq!(o.stdout, want, "{f} --slice {spec}");
        }
        // Steps: every other row, every third column, numpy's picks.
        let stepped: [(&str, Vec<u8>); 9] = [
            ("::2", m_picks((0..ROWS).step_by(2), 0..COLS)),
            (
                "1::2,::3",
                m_picks((1..ROWS).step_by(2), (0..COLS).step_by(3)),
            ),
            (":,1:4:2", m_picks(0..ROWS, (1..4).step_by(2))),
            ("-1::4", m_picks(5..ROWS, 0..COLS)),
            ("0:6:10,4", m_picks(0..1, 4..5)),
            // Negative steps run down from the start (the last index when left out).
            ("::-1", m_picks((0..ROWS).rev(), 0..COLS)),
            (":,::-2", m_picks(0..ROWS, (0..COLS).rev().step_by(2))),
            (
                "4:0:-3,3:0:-1",
                m_picks([4, 1].into_iter(), [3, 2, 1].into_iter()),
            ),
            ("-1::-4,-1", m_picks([5, 1].into_iter(), 4..5)),
        ];
        for (spec, want) in stepped {
            let o = zt(&["cat", f, "m", "--slice", spec]);
            assert_eq!(o.status.code(), Some(0), "{f} {spec}");
            assert_eq!(o.stdout, want, "{f} --slice {spec}");
        }
        let o = zt(&["cat", "--json", f, "t", "--slice", "::1,::2,1::2"]);
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(j["shape"], serde_json::json!([2, 2, 2]), "{f}");
        assert_eq!(
            j["values"],
            serde_json::json!([1.0, 3.0, 9.0, 11.0, 13.0, 15.0, 21.0, 23.0])
        );
        // A rank-3 box: t[1, 1:3, 2:4].
        let o = zt(&["cat", f, "t", "--slice", "1,1:3,2:4"]);
        let want: Vec<u8> = [18.0f32, 19.0, 22.0, 23.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(o.stdout, want, "{f}");
        // JSON: the box's shape and its values.
        let o = zt(&["cat", "--json", f, "m", "--slice", "2:4,1:3"]);
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(j["shape"], serde_json::json!([2, 2]), "{f}");
        assert_eq!(j["values"], serde_json::json!([201, 202, 301, 302]), "{f}");
        assert_eq!(j["dtype"], "u16");
    }
}

#[test]
fn slice_mistakes_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let f = files(dir.path()).remove(0);
    let f = p(&f);
    assert_usage_error(
        &zt(&["cat", f, "m", "--slice", "0:7"]),
        "dimension 0 of size 6",
    );
    assert_usage_error(
        &zt(&["cat", f, "m", "--slice", ":,5"]),
        "dimension 1 of size 5",
    );
    assert_usage_error(
        &zt(&["cat", f, "m", "--slice", "3:1"]),
        "ends before it starts",
    );
    assert_usage_error(
        &zt(&["cat", f, "m", "--slice", "1:3:-1"]),
        "ends before it starts",
    );
    assert_usage_error(&zt(&["cat", f, "m", "--slice", ":,:,:"]), "3 items");
    // Syntax errors come from the argument parser, as any other bad argument: exit 2.
    for (spec, says) in [
        ("0:4:0", "step of 0"),
        ("x", "not an integer"),
        ("1,,2", "empty item"),
    ] {
        let o = zt(&["cat", f, "m", "--slice", spec]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(says) && !err.contains("panicked"), "{err}");
        assert!(o.stdout.is_empty());
    }
    assert_usage_error(
        &zt(&["cat", f, "m", "--slice", "0:1", "--component", "data"]),
        "does not combine with --component",
    );
}

#[test]
fn a_non_dense_object_cannot_be_sliced() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/v123_all.zt");
    assert_usage_error(
        &zt(&["cat", p(&fixture), "csr", "--slice", "0:1"]),
        "only dense objects can be sliced",
    );
}
