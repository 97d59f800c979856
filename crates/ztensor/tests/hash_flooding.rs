//! A file whose object names all collide under a fixed, unkeyed hash must open about as fast
//! as a file of ordinary names. With the reader's old index (FNV-1a words and a fixed mix,
//! linear probing) such a file made the open quadratic: 200,000 names took 17.5 s.

use std::time::{Duration, Instant};

use ztensor::{OpenOptions, Writer};

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// The attacker's model: the reader's former name hash, fixed and public.
fn fixed_hash(s: &str) -> u64 {
    let mut h = FNV_OFFSET;
    let mut words = s.as_bytes().chunks_exact(8);
    for w in &mut words {
        h = (h ^ u64::from_le_bytes(w.try_into().unwrap())).wrapping_mul(FNV_PRIME);
    }
    for &b in words.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(FNV_PRIME);
    }
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^ (h >> 32)
}

/// `n` distinct 16-byte ASCII names with one and the same fixed hash. The second word of each
/// name cancels what the first put into the state, so every name reaches the same state
/// `TARGET` before the last multiplication; a first word is kept when that second word
/// happens to be ASCII (about one in 270).
fn colliding_names(n: usize) -> Vec<String> {
    const TARGET: u64 = 0x2a2a_2a2a_2a2a_2a2a;
    let mut names = Vec::with_capacity(n);
    let mut counter = 0u64;
    while names.len() < n {
        // Eight characters from 48 bits of a scrambled counter: every byte of the first word
        // varies, and distinct counters (below 2^48) give distinct words.
        let bits = counter.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        counter += 1;
        let first: [u8; 8] = std::array::from_fn(|i| 0x30 + ((bits >> (6 * i)) & 63) as u8);
        let w1 = u64::from_le_bytes(first);
        let second = ((FNV_OFFSET ^ w1).wrapping_mul(FNV_PRIME) ^ TARGET).to_le_bytes();
        if second.iter().all(|&b| (1..0x80).contains(&b)) {
            let name = [first, second].concat();
            names.push(String::from_utf8(name).unwrap());
        }
    }
    names
}

/// The fastest of three opens of a file holding one empty tensor per name.
fn open_time(names: &[String]) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("names.zt");
    let mut w = Writer::create(&path).unwrap();
    for name in names {
        w.add::<f32>(name, &[0], &[]).unwrap();
    }
    w.finish().unwrap();
    (0..3)
        .map(|_| {
            let start = Instant::now();
            let r = OpenOptions::new().open(&path).unwrap();
            // Every name is looked up once, as a loader does.
            for name in names {
                assert!(r.get(name).is_some());
            }
            start.elapsed()
        })
        .min()
        .unwrap()
}

#[test]
fn names_that_collide_under_a_fixed_hash_do_not_make_the_open_quadratic() {
    let n = 20_000;
    let evil = colliding_names(n);
    let first = fixed_hash(&evil[0]);
    assert!(
        evil.iter().all(|s| fixed_hash(s) == first),
        "the names really collide"
    );
    let plain: Vec<String> = (0..n).map(|i| format!("blk.{i}.attn.weight")).collect();
    let (t_evil, t_plain) = (open_time(&evil), open_time(&plain));
    // Quadratic probing of 20,000 colliding names costs 200 million string comparisons,
    // over a second; a keyed hash keeps both opens near ten milliseconds. The bound is
    // loose so that a busy machine does not fail it.
    assert!(
        t_evil < t_plain * 8 + Duration::from_millis(250),
        "colliding names took {t_evil:?}, ordinary names {t_plain:?}"
    );
}
