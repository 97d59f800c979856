//! The `.mag` layouts magnetron has shipped, and how to recognise a `.mag` file by its magic.

use std::fmt;

/// The `.mag` layouts magnetron has shipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// `MAG&` version 1 (git only, never released).
    GenA,
    /// `MAG!` version 1 (magnetron 0.1.2).
    V1,
    /// `MAG!` version 100 (magnetron 0.1.5, 0.1.6).
    V100,
    /// `MAG!` version 200 (magnetron 0.1.7 to 0.1.9).
    V200,
    /// `MAG!` version 300 (magnetron 0.2.x).
    V300,
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layout::GenA => "MAG& version 1",
            Layout::V1 => "version 1",
            Layout::V100 => "version 100",
            Layout::V200 => "version 200",
            Layout::V300 => "version 300",
        })
    }
}

/// Whether the first four bytes of a file are a `.mag` magic (`MAG!` or `MAG&`).
pub fn is_mag_magic(head: &[u8; 4]) -> bool {
    head == b"MAG!" || head == b"MAG&"
}
