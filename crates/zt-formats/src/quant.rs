//! `quantized_group`: parameters, size rules, packing and dequantization.
//!
//! Elements are taken in row-major order and cut into groups of `group_size` consecutive
//! elements (the last group may be shorter); each group has one scale and one zero point.
//! Element k's `bits`-wide unsigned code sits in packed word `k / N` at bit `(k % N) * bits`:
//! the lowest bits of each word hold the first element. Words are little-endian, so for
//! `N_per_i32` and `N_per_u8` alike the byte stream is the same: element k at byte
//! `k * bits / 8`, bit `(k * bits) % 8`. The value is `(code - zero) * scale`.

use zt_container::{Error, Result};
use zt_manifest::{Attributes, Value};

use crate::DType;

/// Parameters of a `quantized_group` object, from its attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantParams {
    /// Bits per code: 2, 4 or 8.
    pub bits: u32,
    /// Elements per group.
    pub group_size: u64,
    /// The packed word type: `I32` (`N_per_i32`) or `U8` (`N_per_u8`).
    pub word: DType,
}

impl QuantParams {
    /// Checks a combination.
    pub fn new(bits: u32, group_size: u64, word: DType) -> Result<Self> {
        if ![2, 4, 8].contains(&bits) {
            return Err(Error::invalid(format!("bits {bits} is not 2, 4 or 8")));
        }
        if group_size == 0 {
            return Err(Error::invalid("group_size is 0"));
        }
        if !matches!(word, DType::I32 | DType::U8) {
            return Err(Error::invalid(format!(
                "packed word type {word} is not i32 or u8"
            )));
        }
        Ok(QuantParams {
            bits,
            group_size,
            word,
        })
    }

    /// Reads `bits`, `group_size` and `packing` from an object's attributes.
    pub fn from_attributes(a: &Attributes) -> Result<Self> {
        let int = |k: &str| -> Result<u64> {
            a.get(k)
                .ok_or_else(|| {
                    Error::invalid(format!("quantized_group object has no {k:?} attribute"))
                })?
                .as_u64()
                .ok_or_else(|| {
                    Error::invalid(format!("attribute {k:?} is not a non-negative integer"))
                })
        };
        let bits = int("bits")?;
        let group_size = int("group_size")?;
        let packing = a.get("packing").and_then(Value::as_str).ok_or_else(|| {
            Error::invalid("quantized_group object has no text \"packing\" attribute")
        })?;
        let bits32 = u32::try_from(bits)
            .map_err(|_| Error::invalid(format!("bits {bits} is not 2, 4 or 8")))?;
        let (n, word) = packing.split_once("_per_").ok_or_else(|| {
            Error::invalid(format!("packing {packing:?} is not N_per_i32 or N_per_u8"))
        })?;
        let word = match word {
            "i32" => DType::I32,
            "u8" => DType::U8,
            _ => {
                return Err(Error::invalid(format!(
                    "packing {packing:?} is not N_per_i32 or N_per_u8"
                )))
            }
        };
        let p = QuantParams::new(bits32, group_size, word)?;
        if n.parse::<u32>().ok() != Some(p.per_word()) {
            return Err(Error::invalid(format!(
                "packing {packing:?} does not fit bits {bits}: expected {}",
                p.packing()
            )));
        }
        Ok(p)
    }

    /// Codes per packed word.
    pub fn per_word(&self) -> u32 {
        (self.word.size() as u32 * 8) / self.bits
    }

    /// The `packing` attribute value, e.g. `"8_per_i32"`.
    pub fn packing(&self) -> String {
        format!("{}_per_{}", self.per_word(), self.word)
    }

    /// The attributes that describe these parameters.
    pub fn attributes(&self) -> Attributes {
        let mut a = Attributes::new();
        a.insert("bits".into(), Value::from(self.bits));
        a.insert("group_size".into(), Value::from(self.group_size));
        a.insert("packing".into(), Value::from(self.packing()));
        a
    }

    /// Packed words needed for `count` elements.
    pub fn packed_words(&self, count: u64) -> u64 {
        count.div_ceil(u64::from(self.per_word()))
    }

    /// Groups (scales, zeros) for `count` elements.
    pub fn groups(&self, count: u64) -> u64 {
        count.div_ceil(self.group_size)
    }

    fn mask(&self) -> u8 {
        ((1u16 << self.bits) - 1) as u8
    }

    /// Code of element `k` in the packed bytes.
    pub fn code(&self, packed: &[u8], k: u64) -> u8 {
        let bit = k * u64::from(self.bits);
        let byte = packed.get((bit / 8) as usize).copied().unwrap_or(0);
        (byte >> (bit % 8)) & self.mask()
    }

    /// Packs codes (each below 2^bits) into little-endian words.
    pub fn pack(&self, codes: &[u8]) -> Result<Vec<u8>> {
        if let Some(i) = codes.iter().position(|&c| c > self.mask()) {
            return Err(Error::argument(format!(
                "code {} at {i} does not fit in {} bits",
                codes.get(i).copied().unwrap_or(0),
                self.bits
            )));
        }
        let words = self.packed_words(codes.len() as u64) as usize;
        let mut out = vec![0u8; words * self.word.size()];
        for (k, &c) in codes.iter().enumerate() {
            let bit = k * self.bits as usize;
            if let Some(b) = out.get_mut(bit / 8) {
                *b |= c << (bit % 8);
            }
        }
        Ok(out)
    }

    /// Dequantizes `count` elements: `(code - zero) * scale`, per group. `scales` and `zeros`
    /// must have [`QuantParams::groups`] entries and `packed` enough words (checked here).
    pub fn dequantize(
        &self,
        packed: &[u8],
        scales: &[f32],
        zeros: &[f32],
        count: u64,
    ) -> Result<Vec<f32>> {
        let groups = self.groups(count);
        if scales.len() as u64 != groups || zeros.len() as u64 != groups {
            return Err(Error::invalid(format!(
                "{} scales and {} zeros for {groups} groups",
                scales.len(),
                zeros.len()
            )));
        }
        let need = self.packed_words(count) * self.word.size() as u64;
        if (packed.len() as u64) < need {
            return Err(Error::invalid(format!(
                "{} packed bytes for {count} elements need {need}",
                packed.len()
            ))
            .in_component("packed_weight"));
        }
        let n = usize::try_from(count).map_err(|_| Error::limit("element count exceeds usize"))?;
        let gs = self.group_size as usize;
        let mut out = Vec::new();
        out.try_reserve_exact(n)
            .map_err(|_| Error::out_of_memory(format!("{count} dequantized elements")))?;
        for (g, (&s, &z)) in scales.iter().zip(zeros).enumerate() {
            let start = g * gs;
            let end = (start + gs).min(n);
            out.extend((start..end).map(|k| (f32::from(self.code(packed, k as u64)) - z) * s));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ztensor_123_sample() {
        let p = QuantParams::new(4, 16, DType::I32).unwrap();
        assert_eq!(p.packing(), "8_per_i32");
        let mut packed = 0x1234_5678i32.to_le_bytes().to_vec();
        packed.extend_from_slice(&0i32.to_le_bytes());
        let d = p.dequantize(&packed, &[0.5], &[8.0], 16).unwrap();
        assert_eq!(d[..8], [0.0, -0.5, -1.0, -1.5, -2.0, -2.5, -3.0, -3.5]);
        assert!(d[8..].iter().all(|&x| x == -4.0));
        assert_eq!(
            p.pack(&[8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0])
                .unwrap(),
            packed
        );
    }

    #[test]
    fn attributes_are_checked() {
        let p = QuantParams::new(2, 3, DType::U8).unwrap();
        assert_eq!(QuantParams::from_attributes(&p.attributes()).unwrap(), p);
        let mut a = p.attributes();
        a.insert("packing".into(), Value::from("8_per_i32"));
        assert!(QuantParams::from_attributes(&a)
            .unwrap_err()
            .message()
            .contains("does not fit bits 2"));
        a.insert("bits".into(), Value::from(3u8));
        assert!(QuantParams::from_attributes(&a)
            .unwrap_err()
            .message()
            .contains("bits 3"));
        assert!(QuantParams::new(4, 0, DType::I32).is_err());
    }
}
