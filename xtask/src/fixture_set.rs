//! The vocabulary every fixture generator shares: a [`Corpus`] that collects generated files
//! and their expectation lines, and turns them into the final [`Tree`] with both
//! `EXPECTED.tsv` files. It names no other module of this crate.
//!
//! `valid/EXPECTED.tsv`: `file  object  role  type  shape  sha256-of-decoded-bytes`, one line
//! per component. `invalid/EXPECTED.tsv`: `file  stage  kind  message`, where stage is `open`
//! (opening fails), `read` (opening succeeds, reading an object fails) or `verify` (only
//! digest verification fails), kind is the `ErrorKind`, and message is a substring of it.

use std::collections::BTreeMap;

use sha2::{Digest as _, Sha256};

/// A generated file tree: relative path to bytes.
pub type Tree = BTreeMap<String, Vec<u8>>;

/// One expectation line of a hand-built valid file: object, role, type, shape, decoded bytes.
pub type ExpectedComponent<'a> = (&'a str, &'a str, &'a str, &'a [u64], &'a [u8]);

/// An owned expectation line: object, role, type, shape, decoded bytes.
pub type Line = (String, String, String, Vec<u64>, Vec<u8>);

/// Collects files and their expectation lines.
#[derive(Default)]
pub struct Corpus {
    tree: Tree,
    valid: Vec<String>,
    invalid: Vec<String>,
}

impl Corpus {
    /// A valid file built by hand, with owned expectation lines (object, role, type, shape,
    /// decoded bytes).
    pub fn add_valid_raw_lines(&mut self, name: &str, bytes: Vec<u8>, lines: &[Line]) {
        for (object, role, ty, shape, data) in lines {
            self.valid_line(name, object, role, ty, shape, data);
        }
        self.tree.insert(format!("valid/{name}"), bytes);
    }

    /// A valid file built by hand, with its expectation lines.
    pub fn valid_raw(&mut self, name: &str, bytes: Vec<u8>, lines: &[ExpectedComponent<'_>]) {
        for (object, role, ty, shape, data) in lines {
            self.valid_line(name, object, role, ty, shape, data);
        }
        self.tree.insert(format!("valid/{name}"), bytes);
    }

    fn valid_line(
        &mut self,
        name: &str,
        object: &str,
        role: &str,
        ty: &str,
        shape: &[u64],
        data: &[u8],
    ) {
        self.valid.push(format!(
            "{name}\t{object}\t{role}\t{ty}\t{shape:?}\t{}",
            sha256_hex(data)
        ));
    }

    pub fn invalid(&mut self, name: &str, bytes: Vec<u8>, stage: &str, kind: &str, message: &str) {
        assert!(
            !self.tree.contains_key(&format!("invalid/{name}")),
            "duplicate fixture {name}"
        );
        self.invalid
            .push(format!("{name}\t{stage}\t{kind}\t{message}"));
        self.tree.insert(format!("invalid/{name}"), bytes);
    }

    /// Every collected file, plus `valid/EXPECTED.tsv` and `invalid/EXPECTED.tsv` with the
    /// lines in the order they were added.
    pub fn finish(self) -> Tree {
        let mut tree = self.tree;
        tree.insert(
            "valid/EXPECTED.tsv".into(),
            tsv("file\tobject\trole\ttype\tshape\tsha256", &self.valid),
        );
        tree.insert(
            "invalid/EXPECTED.tsv".into(),
            tsv("file\tstage\tkind\tmessage", &self.invalid),
        );
        tree
    }
}

fn sha256_hex(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

fn tsv(header: &str, lines: &[String]) -> Vec<u8> {
    let mut s = format!("{header}\n");
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s.into_bytes()
}
