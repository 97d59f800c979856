//! Fuzz target: arbitrary bytes parsed as a sharded checkpoint's index
//! (`model.safetensors.index.json`, seeded with the JSON files in fixtures/ and one index).
//! What the parser accepts must keep the promises `ShardIndex` documents: shard files sorted
//! and named once, each a relative path in the index's own folder or below it; tensor names
//! sorted and unique, each pointing at a shard that is listed.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(index) = ztensor::ShardIndex::parse(data) else {
        return;
    };
    assert!(index.shards.windows(2).all(|w| w[0] < w[1]), "shards sorted, each once");
    assert!(index.entries.windows(2).all(|w| w[0].0 < w[1].0), "names sorted, each once");
    for (name, shard) in &index.entries {
        assert!((*shard as usize) < index.shards.len(), "{name}: shard {shard} is listed");
    }
    for shard in &index.shards {
        // A relative path that stays in the folder: `/`-separated, no component empty (so
        // nothing absolute), `.` or `..`, and no backslash, colon or NUL.
        let inside = !shard.contains(['\\', '\0', ':'])
            && shard
                .split('/')
                .all(|part| !matches!(part, "" | "." | ".."));
        assert!(inside, "{shard:?} names a file in the index's folder or below it");
    }
});
