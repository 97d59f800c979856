//! `Components`, the sorted vector that stands in for a map of an object's components, agrees
//! with `BTreeMap` whether built by inserts or collected, repeated roles included; and many
//! components, collected in any order, cost a sort, not one move per insert.

use std::collections::BTreeMap;

use proptest::prelude::*;
use zt_manifest::{Component, Components};

fn component(n: u64) -> Component {
    Component {
        dtype: "u8".into(),
        offset: n,
        ..Default::default()
    }
}

/// The pairs of `c`, in its order.
fn pairs(c: &Components) -> Vec<(String, u64)> {
    c.iter().map(|(r, c)| (r.clone(), c.offset)).collect()
}

proptest! {
    #[test]
    fn components_behave_as_a_btreemap(roles in proptest::collection::vec("[a-d]{0,3}", 0..40)) {
        let items: Vec<(String, Component)> = roles
            .iter()
            .enumerate()
            .map(|(i, r)| (r.clone(), component(i as u64)))
            .collect();
        let map: BTreeMap<String, Component> = items.iter().cloned().collect();
        let want: Vec<(String, u64)> = map.iter().map(|(r, c)| (r.clone(), c.offset)).collect();

        let collected: Components = items.iter().cloned().collect();
        prop_assert_eq!(pairs(&collected), want.clone());

        let mut inserted = Components::new();
        let mut reference = BTreeMap::new();
        for (r, c) in items.iter().cloned() {
            let replaced = inserted.insert(r.clone(), c.clone()).map(|c| c.offset);
            prop_assert_eq!(replaced, reference.insert(r, c).map(|c| c.offset));
        }
        prop_assert_eq!(pairs(&inserted), want);
        for r in &roles {
            prop_assert_eq!(inserted.get(r).map(|c| c.offset), map.get(r).map(|c| c.offset));
            prop_assert!(inserted.contains_key(r));
        }
        prop_assert!(!inserted.contains_key("zz"));
        prop_assert_eq!(inserted.len(), map.len());
    }
}

#[test]
fn many_components_in_reverse_order_are_collected_by_one_sort() {
    // 200,000 roles from last to first: one insert each would move the whole vector each
    // time (2 x 10^10 component moves); collecting sorts them.
    let n = 200_000u64;
    let c: Components = (0..n)
        .rev()
        .map(|i| (format!("{i:08}"), component(i)))
        .collect();
    assert_eq!(c.len(), n as usize);
    assert_eq!(c.keys().next().map(String::as_str), Some("00000000"));
    assert_eq!(c.get("00123456").map(|c| c.offset), Some(123_456));
}
