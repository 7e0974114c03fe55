//! Byte-pair merges that keep only the number of parts: `tiktoken`'s merge loop for short
//! pieces, and the same merges with a heap for long ones (the reference the faster counters are
//! tested against, and their last fallback).

use rustc_hash::FxHashMap;
use tiktoken_rs::Rank;

/// Pieces shorter than this use the quadratic merge on the stack, as `tiktoken` does; longer ones
/// the linear [`Backtrack`](super::backtrack::Backtrack) counter, so a run like `"a" * 1_000_000` costs O(n).
pub(super) const SMALL_PIECE: usize = 100;

/// Number of tokens of `piece` (not itself a token, 2 <= len < [`SMALL_PIECE`]) after the
/// byte-pair merges: `tiktoken`'s `_byte_pair_merge`, keeping only the count.
pub(super) fn merge_count_small(ranks: &FxHashMap<Vec<u8>, Rank>, piece: &[u8]) -> usize {
    let rank_of = |bytes: &[u8]| ranks.get(bytes).copied().unwrap_or(Rank::MAX);
    let len = piece.len();
    if len < 2 {
        return len;
    }
    // parts[i] = (start of part i, rank of merging part i with part i + 1)
    let mut parts = [(0usize, Rank::MAX); SMALL_PIECE + 1];
    for (i, part) in parts.iter_mut().enumerate().take(len - 1) {
        *part = (i, rank_of(&piece[i..i + 2]));
    }
    parts[len - 1] = (len - 1, Rank::MAX);
    parts[len] = (len, Rank::MAX);
    let mut count = len + 1;
    loop {
        let mut min = (Rank::MAX, 0);
        for (i, &(_, rank)) in parts[..count - 1].iter().enumerate() {
            if rank < min.0 {
                min = (rank, i);
            }
        }
        if min.0 == Rank::MAX {
            break;
        }
        let i = min.1;
        let rank_at = |parts: &[(usize, Rank)], i: usize| {
            if i + 3 < count {
                rank_of(&piece[parts[i].0..parts[i + 3].0])
            } else {
                Rank::MAX
            }
        };
        if i > 0 {
            parts[i - 1].1 = rank_at(&parts, i - 1);
        }
        parts[i].1 = rank_at(&parts, i);
        parts.copy_within(i + 2..count, i + 1);
        count -= 1;
    }
    count - 1
}

/// Number of tokens of `piece` after the byte-pair merges: the same merges in the same order as
/// [`merge_count_small`] (lowest rank first, leftmost among equal ranks), with a binary heap of
/// candidate pairs and a linked list of parts. O(n log n); the reference of the differential
/// tests of [`Backtrack`](super::backtrack::Backtrack) on long pieces, and its fallback where backtracking would be slower.
pub(super) fn merge_count_large(ranks: &FxHashMap<Vec<u8>, Rank>, piece: &[u8]) -> usize {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// A part of the piece, identified by its start offset.
    #[derive(Clone, Copy)]
    struct Part {
        /// Start of the next part (`len` for the last one).
        next: u32,
        /// Start of the previous part.
        prev: u32,
        /// Rank of this part merged with the next one (`Rank::MAX`: none, or not a part).
        pair_rank: Rank,
    }
    let len = piece.len();
    if len < 2 {
        return len;
    }
    let Ok(len32) = u32::try_from(len) else {
        // Pieces over 4 GiB: the same algorithm with wide indices is not worth a second copy.
        return tiktoken_rs::byte_pair_split(piece, ranks).len();
    };
    let rank_of = |bytes: &[u8]| ranks.get(bytes).copied().unwrap_or(Rank::MAX);
    // Heap entries pack (rank, start) into one u64 so the order is one integer compare.
    let key = |rank: Rank, start: u32| Reverse((u64::from(rank) << 32) | u64::from(start));
    let mut parts: Vec<Part> = (0..len32)
        .map(|i| Part {
            next: i + 1,
            prev: i.wrapping_sub(1),
            pair_rank: Rank::MAX,
        })
        .collect();
    let mut heap = Vec::with_capacity(len);
    for i in 0..len - 1 {
        let rank = rank_of(&piece[i..i + 2]);
        if rank != Rank::MAX {
            parts[i].pair_rank = rank;
            heap.push(key(rank, i as u32));
        }
    }
    let mut heap = BinaryHeap::from(heap);
    let mut count = len;
    while let Some(Reverse(packed)) = heap.pop() {
        let rank = (packed >> 32) as Rank;
        let left = (packed & u64::from(u32::MAX)) as usize;
        // A rank names one byte string, so an entry is current iff the rank still matches.
        if parts[left].pair_rank != rank {
            continue;
        }
        let right = parts[left].next as usize;
        let end = parts[right].next;
        parts[left].next = end;
        if end < len32 {
            parts[end as usize].prev = left as u32;
        }
        parts[right].pair_rank = Rank::MAX;
        count -= 1;
        let after = if end < len32 {
            rank_of(&piece[left..parts[end as usize].next as usize])
        } else {
            Rank::MAX
        };
        parts[left].pair_rank = after;
        if after != Rank::MAX {
            heap.push(key(after, left as u32));
        }
        if left > 0 {
            let before = parts[left].prev as usize;
            let merged = rank_of(&piece[before..end as usize]);
            parts[before].pair_rank = merged;
            if merged != Rank::MAX {
                heap.push(key(merged, before as u32));
            }
        }
    }
    count
}
