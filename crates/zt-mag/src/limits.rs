//! Caps on file-controlled sizes, shared by the binary readers, the JSON manifest reader and
//! the writers (a leaf module: it depends on no other module of the crate).

/// Most dimensions a tensor may have in any layout we read (magnetron's own cap is 6 or 16).
pub const MAX_RANK: usize = 64;
/// Longest key.
pub const MAX_KEY_LEN: u64 = 65_535;
/// Longest version 300 JSON manifest: zTensor's cap on a manifest (1 GiB). magnetron sets
/// none; the manifest of 100,000 tensors takes about 15 MB.
pub const MAX_METADATA_LEN: u64 = 1 << 30;

/// What listing a file of `file_len` bytes may take by default: twice its length plus
/// 64 MiB, and at least 256 MiB (the rule the facade's listings follow). A real tensor
/// entry of a manifest is some sixty bytes of JSON and lists in about a hundred and fifty,
/// so real files stay far inside it; seven-byte entries do not.
///
/// ```
/// assert_eq!(zt_mag::default_listing_budget(1000), 256 << 20);
/// assert_eq!(zt_mag::default_listing_budget(1 << 30), (2 << 30) + (64 << 20));
/// ```
pub fn default_listing_budget(file_len: u64) -> u64 {
    file_len
        .saturating_mul(2)
        .saturating_add(64 << 20)
        .max(256 << 20)
}
