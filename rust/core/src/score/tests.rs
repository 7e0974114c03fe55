//! Scoring against each policy's definition, across threads and vector paths.

use super::kernel::EXP_ZERO_BELOW;
use super::*;

#[test]
fn retention_matches_the_formula() {
    let last = [10i64, 5, 0, 12];
    let access = [0i64, 1, 10, 3];
    let cols = Columns {
        last_access_turn: Some(&last),
        access_count: Some(&access),
        ..Default::default()
    };
    let mut out = [0.0; 4];
    score(
        &Policy::by_name("retention").unwrap(),
        10,
        &cols,
        &mut out,
        None,
    )
    .unwrap();
    for i in 0..4 {
        let age = (10 - last[i]).max(0) as f64;
        let want =
            0.7 * (-age / 30.0).exp() + 0.3 * (((access[i] + 1) as f64).ln() / 5f64.ln()).min(1.0);
        assert!(
            (out[i] - want).abs() <= 1e-15 * want.abs(),
            "{i}: {} vs {want}",
            out[i]
        );
    }
}

#[test]
fn pinned_and_system_prompts_are_infinite() {
    let created = [0i64, 0, 0];
    let types = [0u8, 2, 4];
    let pinned = [0u8, 2, 0];
    let cols = Columns {
        created_turn: Some(&created),
        content_type: Some(&types),
        pinned: Some(&pinned),
        ..Default::default()
    };
    let mut out = [0.0; 3];
    score(&Policy::by_name("fifo").unwrap(), 3, &cols, &mut out, None).unwrap();
    assert_eq!(out[0], f64::INFINITY);
    assert_eq!(out[1], f64::INFINITY);
    assert!((out[2] - (-0.3f64).exp()).abs() < 1e-15);
}

#[test]
fn threads_do_not_change_the_bits() {
    let n = 100_000;
    let created: Vec<i64> = (0..n).map(|i| (i * 7919 % 2000) as i64).collect();
    let last: Vec<i64> = (0..n).map(|i| (i * 104_729 % 3000) as i64).collect();
    let types: Vec<u8> = (0..n).map(|i| (i % 6) as u8).collect();
    let cols = Columns {
        created_turn: Some(&created),
        last_access_turn: Some(&last),
        content_type: Some(&types),
        ..Default::default()
    };
    let policy = Policy::by_name("hybrid").unwrap();
    let mut one = vec![0.0; n];
    let mut three = vec![0.0; n];
    score(&policy, 2500, &cols, &mut one, Some(1)).unwrap();
    score(&policy, 2500, &cols, &mut three, Some(3)).unwrap();
    assert!(
        one.iter()
            .zip(&three)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
}

/// `retention` by its definition, one item at a time.
fn retention_reference(current: i64, last: i64, count: i64, guarded: bool) -> f64 {
    if guarded {
        return f64::INFINITY;
    }
    let age = current.saturating_sub(last).max(0);
    let x = -(age as f64) / 30.0;
    let decay = if x < EXP_ZERO_BELOW { 0.0 } else { x.exp() };
    let frequency = ((count.max(0) + 1).min(5) as f64).ln() / 5f64.ln();
    0.7 * decay + 0.3 * frequency.min(1.0)
}

/// The vector path (gathers, blends, streaming stores past `STREAM_MIN_ITEMS`, scalar steps
/// for ages outside the table, unaligned heads and tails) against the definition, bit for bit.
#[test]
fn retention_vector_path_equals_the_definition() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for (n, offset, current) in [
        (3, 0, 50),
        (37, 1, 50),
        (1000, 3, 2000),
        (STREAM_MIN_ITEMS + 13, 1, 5000),
        (STREAM_MIN_ITEMS + 6, 2, i64::MIN + 3),
        (70_001, 0, i64::MAX - 2),
    ] {
        let last: Vec<i64> = (0..n)
            .map(|_| match next() % 16 {
                0 => [i64::MIN, i64::MAX, current, current + 1, -1][(next() % 5) as usize],
                1 => current.wrapping_sub((next() % 100_000) as i64),
                _ => current.wrapping_sub((next() % 6000) as i64 - 100),
            })
            .collect();
        let access: Vec<i64> = (0..n).map(|_| (next() % 8) as i64).collect();
        let pinned: Vec<u8> = (0..n).map(|_| u8::from(next() % 9 == 0) * 7).collect();
        let types: Vec<u8> = (0..n).map(|_| (next() % 6) as u8).collect();
        for (with_pinned, with_types) in [(false, false), (true, false), (true, true)] {
            let cols = Columns {
                last_access_turn: Some(&last),
                access_count: Some(&access),
                pinned: with_pinned.then_some(pinned.as_slice()),
                content_type: with_types.then_some(types.as_slice()),
                ..Default::default()
            };
            let mut buffer = vec![0.0; n + offset];
            let out = &mut buffer[offset..];
            let policy = Policy::by_name("retention").unwrap();
            score(&policy, current, &cols, out, None).unwrap();
            for i in 0..n {
                let guarded = (with_pinned && pinned[i] != 0) || (with_types && types[i] == 0);
                let want = retention_reference(current, last[i], access[i], guarded);
                assert_eq!(out[i].to_bits(), want.to_bits(), "n {n}, item {i}");
            }
        }
    }
}

/// A negative count is an error unless its item is pinned (never scored), on every path.
#[test]
fn negative_counts_of_pinned_items_are_not_read() {
    let n = 4096;
    let last = vec![10i64; n];
    let mut access = vec![1i64; n];
    let mut pinned = vec![0u8; n];
    access[1234] = -1;
    pinned[1234] = 1;
    let policy = Policy::by_name("retention").unwrap();
    let mut out = vec![0.0; n];
    let cols = Columns {
        last_access_turn: Some(&last),
        access_count: Some(&access),
        pinned: Some(&pinned),
        ..Default::default()
    };
    score(&policy, 20, &cols, &mut out, None).unwrap();
    assert_eq!(out[1234], f64::INFINITY);
    let unpinned = vec![0u8; n];
    let cols = Columns {
        pinned: Some(&unpinned),
        ..cols
    };
    let err = score(&policy, 20, &cols, &mut out, None);
    assert!(matches!(err, Err(Error::InvalidArgument(m)) if m.contains("access_count")));
}

#[test]
fn bad_input_is_rejected() {
    let short = [1i64];
    let long = [1i64, 2];
    let cols = Columns {
        last_access_turn: Some(&short),
        access_count: Some(&long),
        ..Default::default()
    };
    let mut out = [0.0; 1];
    let err = score(
        &Policy::by_name("retention").unwrap(),
        0,
        &cols,
        &mut out,
        None,
    );
    assert!(matches!(err, Err(Error::InvalidArgument(m)) if m.contains("access_count")));
    let cols = Columns {
        created_turn: Some(&short),
        ..Default::default()
    };
    let err = score(
        &Policy::by_name("retention").unwrap(),
        0,
        &cols,
        &mut out,
        None,
    );
    assert!(matches!(err, Err(Error::InvalidArgument(m)) if m.contains("last_access_turn")));
    assert!(Policy::by_name("lfu").is_err());
}
