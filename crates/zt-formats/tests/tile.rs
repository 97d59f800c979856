//! `tile`: parts that cover an array exactly once are accepted (whole rows in row order as
//! pieces, other boxes as boxes, one part as the raw range); every way of failing to cover it
//! is refused with why, and an array is only ever assembled from a checked tiling.

use zt_formats::{place_box, tile, Encoding, Piece};

type Part = (Piece, Vec<u64>, Vec<u64>);

/// A part of a 4 x 6 array of 2-byte elements, its bytes at `offset` of file 1.
fn part(offset: u64, start: [u64; 2], extent: [u64; 2]) -> Part {
    let length = extent[0] * extent[1] * 2;
    let piece = Piece {
        file: 1,
        offset,
        length,
        crc32c: None,
    };
    (piece, start.to_vec(), extent.to_vec())
}

const DIMS: [u64; 2] = [4, 6];

#[test]
fn rows_in_any_order_are_pieces_in_row_order() {
    let t = tile(
        &DIMS,
        2,
        vec![part(100, [2, 0], [2, 6]), part(0, [0, 0], [2, 6])],
    )
    .unwrap();
    let Encoding::Pieces(pieces) = t.encoding else {
        panic!("{:?}", t.encoding)
    };
    assert_eq!(
        pieces.iter().map(|p| p.offset).collect::<Vec<_>>(),
        [0, 100]
    );
    assert_eq!(t.total, 48);
    assert_eq!(t.first.map(|p| p.offset), Some(0));
}

#[test]
fn columns_are_boxes_and_place_where_they_lie() {
    let parts = vec![part(0, [0, 0], [4, 3]), part(24, [0, 3], [4, 3])];
    let t = tile(&DIMS, 2, parts).unwrap();
    let Encoding::Boxes(table) = t.encoding else {
        panic!("{:?}", t.encoding)
    };
    // Assembled from bytes numbered by their offset in the file (from 1): row 1 of the array
    // is row 1 of the left box (bytes 7..12), then of the right (bytes 31..36).
    let mut array = vec![0u8; 48];
    for (p, start, extent) in &table.boxes {
        let src: Vec<u8> = (0..p.length).map(|i| (p.offset + i) as u8 + 1).collect();
        place_box(&DIMS, 2, start, extent, &src, &mut array).unwrap();
    }
    let row1: Vec<u8> = (7..13).chain(31..37).collect();
    assert_eq!(&array[12..24], &row1[..]);
}

#[test]
fn one_part_is_the_raw_range() {
    let t = tile(&DIMS, 2, vec![part(8, [0, 0], [4, 6])]).unwrap();
    assert_eq!(t.encoding, Encoding::Raw);
    assert_eq!(t.first.map(|p| (p.offset, p.length)), Some((8, 48)));
}

#[test]
fn parts_that_do_not_cover_the_array_once_are_refused() {
    let cases: Vec<(Vec<Part>, &str)> = vec![
        (vec![part(0, [0, 0], [2, 6])], "cover 2 of its rows"),
        (
            vec![part(0, [0, 0], [2, 6]), part(24, [1, 0], [3, 6])],
            "do not cover rows 2.. exactly once",
        ),
        (
            vec![part(0, [0, 0], [4, 3]), part(24, [0, 4], [4, 3])],
            "does not lie in its shape",
        ),
        (
            vec![part(0, [0, 0], [4, 3]), part(24, [0, 1], [4, 3])],
            "do not cover it exactly once",
        ),
        (
            vec![part(0, [0, 0], [4, 3])],
            "do not cover it exactly once",
        ),
        (vec![part(0, [3, 0], [2, 6])], "does not lie in its shape"),
    ];
    for (parts, why) in cases {
        let e = tile(&DIMS, 2, parts.clone()).unwrap_err();
        assert!(e.contains(why), "{parts:?}: {e}");
    }
    // A part whose bytes are not its box's.
    let (mut piece, start, extent) = part(0, [0, 0], [4, 6]);
    piece.length -= 2;
    let e = tile(&DIMS, 2, vec![(piece, start, extent)]).unwrap_err();
    assert!(e.contains("holds 46 bytes, not its box's 48"), "{e}");
    // A scalar is one part.
    let scalar = (
        Piece {
            file: 1,
            offset: 0,
            length: 4,
            crc32c: None,
        },
        vec![],
        vec![],
    );
    assert!(tile(&[], 4, vec![scalar.clone()]).is_ok());
    let e = tile(&[], 4, vec![scalar.clone(), scalar]).unwrap_err();
    assert!(e.contains("a scalar in 2 parts"), "{e}");
}
