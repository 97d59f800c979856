//! Caps on file-controlled sizes, shared by the binary readers, the JSON manifest reader and
//! the writers (a leaf module: it depends on no other module of the crate).

/// Most dimensions a tensor may have in any layout we read (magnetron's own cap is 6 or 16).
pub const MAX_RANK: usize = 64;
/// Longest key.
pub const MAX_KEY_LEN: u64 = 65_535;
