//! Choosing what to evict from scores: lowest score first, ties by original index, never a pinned
//! item, a system prompt or an item scored `+inf`. Selection avoids a comparison sort of all
//! items: a histogram of order-preserving integer keys (counts, or tokens for a token target),
//! in bins that divide the span of the keys evenly, finds the bin where the stop rule is met,
//! only the items of the bins up to it are gathered (bucketed by bin, in index order), and each
//! bucket is sorted by stable MSD radix passes over the key bits its keys do not share.

use std::ops::Range;

use rayon::prelude::*;

use crate::score::ContentType;
use crate::{Error, Result};

/// When to stop selecting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// Until the freed tokens reach this many (needs the tokens column).
    TargetFreeTokens(u64),
    /// `evict_count = min(ceil(n * ratio), max(n - min_keep, 0))` over the ranks of all items; an
    /// item that may not be evicted but falls inside those ranks lowers the count.
    Ratio(f64),
}

/// Inputs of [`select_evictions`].
#[derive(Debug, Clone, Copy)]
pub struct Selection<'a> {
    /// One score per item (no NaN).
    pub scores: &'a [f64],
    /// Tokens per item (>= 0); required by [`Stop::TargetFreeTokens`].
    pub tokens: Option<&'a [i64]>,
    /// Items that may never be selected, one byte per item: any non-zero byte is true.
    pub pinned: Option<&'a [u8]>,
    /// Content type codes; system prompts (0) are never selected.
    pub content_type: Option<&'a [u8]>,
    /// At most `n - min_keep` items are selected (pinned items count as kept).
    pub min_keep: usize,
}

/// The score's bits mapped to an order-preserving integer (no NaN): `a < b` as floats exactly
/// when `ordered(a) < ordered(b)`. -0.0 and 0.0 are equal scores: both map to the key of 0.0 so
/// the index decides.
/// Branch-free, and on the bits (not `score == 0.0`, which a processor flushing subnormals to
/// zero would also say of them).
#[inline(always)]
fn ordered(score: f64) -> u64 {
    let bits = score.to_bits();
    let bits = if bits == 1 << 63 { 0 } else { bits };
    // All ones for a negative score (its bits inverted), else only the sign bit (set).
    let flip = ((bits as i64) >> 63) as u64 | (1 << 63);
    bits ^ flip
}

/// The key of `+inf`, the largest key of a score that is not NaN.
const INFINITY_KEY: u64 = 0xfff0_0000_0000_0000;

/// A candidate: its key, then its index, whose top bit ([`KEPT`]) may mark an item that must
/// not be evicted. Sorted by key, then by index, the order is the eviction order.
type Candidate = (u64, u64);

/// Set in a candidate's index for an item that may not be evicted (indices stay below 2^63).
const KEPT: u64 = 1 << 63;

/// The first digit has this many bits fewer than log2(n)...
const TOP_BITS_LESS: u32 = 12;

/// ...so about 4096 items per bin, 8 to 16 bits: the histogram stays small next to the data, and
/// the gathering pass writes to few enough buckets at once that its writes stay sequential per
/// bucket (many more buckets cost it more in cache and TLB misses than they save the sorts).
fn top_bits(n: usize) -> u32 {
    (usize::BITS - n.leading_zeros())
        .saturating_sub(TOP_BITS_LESS)
        .clamp(8, 16)
}

/// Buckets at most this long are sorted by comparison; longer ones by radix passes.
const RADIX_SORT_MIN: usize = 24;

/// At most this many bits of the key per MSD radix pass (a 2048-bin histogram stays in L1).
const DIGIT_BITS: u32 = 11;

/// Sorts one bucket of candidates by key, ties by index, where the keys agree above bit `low`
/// and the candidates are in index order on entry. `scratch` is reused between calls (it only
/// grows, so its memory is written once, not once per bucket).
fn sort_bucket(bucket: &mut [Candidate], scratch: &mut Vec<Candidate>, low: u32) {
    if bucket.len() <= RADIX_SORT_MIN {
        bucket.sort_unstable_by_key(|&(key, index)| (key, index & !KEPT));
        return;
    }
    if scratch.len() < bucket.len() {
        scratch.resize(bucket.len(), (0, 0));
    }
    sort_into(bucket, &mut scratch[..bucket.len()], low, true);
}

/// Sorts `data` (keys agreeing above bit `low`, in index order) by key, ties by index, leaving
/// the result in `data` when `in_data`, else in `spare` (of the same length): comparison sort
/// when short, else a stable MSD radix pass from `data` into `spare` on the next bits (about
/// log2 of the length / 2, at most [`DIGIT_BITS`]; skipped when they are all the same), then the
/// same on each part with the roles of the buffers swapped. Equal keys stay in index order, so
/// a part of one key is done. Bits the keys all share are found in one pass and not sorted on
/// (runs of tied scores cost one pass, not one per digit).
fn sort_into(data: &mut [Candidate], spare: &mut [Candidate], low: u32, in_data: bool) {
    let mut low = low;
    if data.len() > RADIX_SORT_MIN {
        let first = data[0].0;
        let differ = data.iter().fold(0, |d, &(key, _)| d | (key ^ first));
        // The keys agree above the highest bit where any two differ; all of them when none does.
        low = low.min(u64::BITS - differ.leading_zeros());
        // About 2 candidates per part on average: short parts end in comparison sorts.
        let width = (usize::BITS - data.len().leading_zeros())
            .saturating_sub(1)
            .clamp(1, DIGIT_BITS);
        while low > 0 {
            let bits = width.min(low);
            low -= bits;
            // Counts and next positions on the stack for narrow digits (most calls).
            let (mut small_count, mut small_next) = ([0usize; 256], [0usize; 256]);
            let (mut large_count, mut large_next) = (Vec::new(), Vec::new());
            let (count, next) = if bits <= 8 {
                (&mut small_count[..1 << bits], &mut small_next[..1 << bits])
            } else {
                large_count.resize(1 << bits, 0);
                large_next.resize(1 << bits, 0);
                (&mut large_count[..], &mut large_next[..])
            };
            if !radix_pass(data, spare, low, bits, count, next) {
                continue;
            }
            let (mut rest, mut rest_spare) = (spare, data);
            for &c in count.iter() {
                let (part, tail) = rest.split_at_mut(c);
                let (part_spare, tail_spare) = rest_spare.split_at_mut(c);
                if c == 1 {
                    // One candidate: sorted; it is in `spare`'s part and belongs in `data`'s
                    // part when the result is wanted in `data`.
                    if in_data {
                        part_spare[0] = part[0];
                    }
                } else if c > 1 {
                    sort_into(part, part_spare, low, !in_data);
                }
                rest = tail;
                rest_spare = tail_spare;
            }
            return;
        }
    } else if low > 0 {
        data.sort_unstable_by_key(|&(key, index)| (key, index & !KEPT));
    }
    if !in_data {
        spare.copy_from_slice(data);
    }
}

/// One stable counting-sort pass of `data` into `spare` on bits `low..low + bits` of the keys,
/// `count` receiving the count of each digit (`next` is work space of the same length). Returns
/// false, writing nothing, when every key has the same digit.
fn radix_pass(
    data: &[Candidate],
    spare: &mut [Candidate],
    low: u32,
    bits: u32,
    count: &mut [usize],
    next: &mut [usize],
) -> bool {
    let mask = (1u64 << bits) - 1;
    let digit = |key: u64| ((key >> low) & mask) as usize;
    for &(key, _) in data {
        count[digit(key)] += 1;
    }
    if count.contains(&data.len()) {
        return false;
    }
    let mut sum = 0;
    for (slot, &c) in next.iter_mut().zip(count.iter()) {
        *slot = sum;
        sum += c;
    }
    for &candidate in data {
        let d = digit(candidate.0);
        spare[next[d]] = candidate;
        next[d] += 1;
    }
    true
}

/// The smallest key of all scores and the largest below `+inf` (or the smallest when there is
/// none): the span the first digit divides evenly, so scores crowded in a few binary exponents
/// (all of them in [0, 1], say) still spread over all the bins.
#[derive(Debug, Clone, Copy)]
struct KeyRange {
    low: u64,
    high: u64,
}

/// The first radix digit: `(key - low) >> shift`, the keys below `low` in bin 0 and those past
/// the last bin (`+inf` among them) in the last bin. Non-decreasing in the key, so the bins are
/// in key order; keys of one bin need not agree on their high bits (the span can straddle a
/// power of two), which the bucket sort finds for itself.
#[derive(Debug, Clone, Copy)]
struct Digits {
    low: u64,
    shift: u32,
    bins: usize,
}

impl Digits {
    fn new(range: KeyRange, bits: u32) -> Self {
        let span = range.high.saturating_sub(range.low);
        Self {
            low: range.low,
            shift: (u64::BITS - span.leading_zeros()).saturating_sub(bits),
            bins: 1 << bits,
        }
    }

    #[inline(always)]
    fn of(&self, key: u64) -> usize {
        usize::try_from(key.saturating_sub(self.low) >> self.shift)
            .unwrap_or(usize::MAX)
            .min(self.bins - 1)
    }
}

/// Per-digit counts of eligible items and (when tokens are given) their tokens summed,
/// saturating at `u64::MAX` (a bin at `u64::MAX` holds at least any target).
struct Histogram {
    counts: Vec<usize>,
    sums: Vec<u64>,
}

/// The histogram of the items `range` (pass one).
fn histogram(
    scores: &[f64],
    tokens: Option<&[i64]>,
    range: Range<usize>,
    digits: Digits,
    eligible: &(impl Fn(usize) -> bool + Sync),
) -> Histogram {
    let bins = digits.bins;
    let mut counts = vec![0usize; bins];
    let mut sums = Vec::new();
    match tokens {
        None => {
            for i in range {
                if eligible(i) {
                    counts[digits.of(ordered(scores[i]))] += 1;
                }
            }
        }
        Some(tokens) => {
            sums = vec![0u64; bins];
            for i in range {
                if eligible(i) {
                    let digit = digits.of(ordered(scores[i]));
                    counts[digit] += 1;
                    // Tokens are validated >= 0.
                    sums[digit] = sums[digit].saturating_add(tokens[i] as u64);
                }
            }
        }
    }
    Histogram { counts, sums }
}

/// Below this many items, the passes over all items stay on the calling thread.
const PARALLEL_MIN_ITEMS: usize = 1 << 18;

/// The candidates with the smallest keys, sorted (key, then index): every item `i` with
/// `eligible(i)` whose top digit is at most that of the `wanted(counts, tokens)` bin, found by a
/// histogram of the top digit instead of a comparison select. `wanted` receives, per digit, the
/// count of eligible items and (when `tokens` is given) their tokens summed (saturating at
/// `u64::MAX`), and returns the last digit needed. Items with `kept(i)` carry [`KEPT`]. Bins
/// before the last one never reach `u64::MAX` tokens (they do not reach the target).
///
/// Large inputs are split into one range of items per thread: each range has its own histogram,
/// so it owns one part of every bucket (after the parts of the ranges before it), and the
/// gathering pass writes those parts in parallel, in index order.
#[allow(clippy::too_many_arguments)]
fn smallest_candidates(
    scores: &[f64],
    tokens: Option<&[i64]>,
    range: KeyRange,
    eligible: impl Fn(usize) -> bool + Sync,
    kept: impl Fn(usize) -> bool + Sync,
    wanted: impl Fn(&[usize], &[u64]) -> usize,
) -> Smallest {
    let n = scores.len();
    let bits = top_bits(n);
    let bins = 1usize << bits;
    let digits = Digits::new(range, bits);
    let parts = if n >= PARALLEL_MIN_ITEMS {
        rayon::current_num_threads().clamp(1, 16)
    } else {
        1
    };
    let ranges: Vec<Range<usize>> = (0..parts)
        .map(|p| n * p / parts..n * (p + 1) / parts)
        .collect();
    let histograms: Vec<Histogram> = if parts > 1 {
        ranges
            .par_iter()
            .map(|r| histogram(scores, tokens, r.clone(), digits, &eligible))
            .collect()
    } else {
        vec![histogram(scores, tokens, 0..n, digits, &eligible)]
    };
    let mut counts = vec![0usize; bins];
    let mut sums = vec![0u64; if tokens.is_some() { bins } else { 0 }];
    for h in &histograms {
        counts.iter_mut().zip(&h.counts).for_each(|(a, b)| *a += b);
        sums.iter_mut()
            .zip(&h.sums)
            .for_each(|(a, b)| *a = a.saturating_add(*b));
    }
    let last = wanted(&counts, &sums).min(bins - 1);
    let total: usize = counts[..=last].iter().sum();
    let mut candidates = vec![(0u64, 0u64); total];
    // Bucket by bucket, the part of each range: `slots[p][digit]` belongs to range `p` alone.
    // `slots[p][last + 1]` is a slot of its own that takes the items past the last bin, so the
    // gathering loop writes every item without a branch on its bin.
    let mut spare = vec![(0u64, 0u64); parts];
    let mut slots: Vec<Vec<&mut [Candidate]>> =
        (0..parts).map(|_| Vec::with_capacity(last + 2)).collect();
    {
        let mut rest = candidates.as_mut_slice();
        for digit in 0..=last {
            for (p, h) in histograms.iter().enumerate() {
                let (part, tail) = rest.split_at_mut(h.counts[digit]);
                slots[p].push(part);
                rest = tail;
            }
        }
    }
    for (slots, past) in slots.iter_mut().zip(spare.chunks_mut(1)) {
        slots.push(past);
    }
    let gather = |range: Range<usize>, slots: &mut Vec<&mut [Candidate]>| {
        let mut next = vec![0usize; last + 2];
        for i in range {
            if eligible(i) {
                let key = ordered(scores[i]);
                let digit = digits.of(key).min(last + 1);
                // Always in bounds unless the caller's memory changed since the histogram;
                // then the item is dropped rather than written elsewhere.
                if let Some(slot) = slots[digit].get_mut(next[digit]) {
                    *slot = (key, i as u64 | if kept(i) { KEPT } else { 0 });
                }
                next[digit] += usize::from(digit <= last);
            }
        }
    };
    if parts > 1 {
        ranges
            .into_par_iter()
            .zip(slots.par_iter_mut())
            .for_each(|(range, slots)| gather(range, slots));
    } else {
        gather(0..n, &mut slots[0]);
    }
    drop(slots);
    // Each bucket holds one top digit in index order; sorting the buckets sorts the whole.
    let mut rest = candidates.as_mut_slice();
    let mut to_sort = Vec::with_capacity(last + 1);
    for &len in &counts[..=last] {
        let (bucket, tail) = rest.split_at_mut(len);
        if len > 1 {
            to_sort.push(bucket);
        }
        rest = tail;
    }
    if total >= 1 << 16 {
        to_sort
            .into_par_iter()
            .for_each_init(Vec::new, |scratch, bucket| {
                sort_bucket(bucket, scratch, u64::BITS)
            });
    } else {
        let mut scratch = Vec::new();
        for bucket in to_sort {
            sort_bucket(bucket, &mut scratch, u64::BITS);
        }
    }
    Smallest {
        candidates,
        last_start: total - counts[last],
        tokens_before: sums[..last.min(sums.len())]
            .iter()
            .map(|&t| u128::from(t))
            .sum(),
    }
}

/// What [`smallest_candidates`] gathered.
struct Smallest {
    /// The candidates, sorted.
    candidates: Vec<Candidate>,
    /// Where the candidates of the last bin start.
    last_start: usize,
    /// The tokens of the candidates before the last bin (0 without tokens).
    tokens_before: u128,
}

impl Selection<'_> {
    fn evictable(&self, i: usize) -> bool {
        self.scores[i] != f64::INFINITY
            && self.pinned.is_none_or(|p| p[i] == 0)
            && self
                .content_type
                .is_none_or(|t| t[i] != ContentType::SystemPrompt as u8)
    }

    /// Checks the columns; returns the range of the keys (one pass over the scores for both).
    fn validate(&self) -> Result<KeyRange> {
        let n = self.scores.len();
        let (mut low, mut high, mut nan) = (u64::MAX, 0u64, false);
        for &score in self.scores {
            let key = ordered(score);
            nan |= score.is_nan();
            low = low.min(key);
            high = high.max(if key < INFINITY_KEY { key } else { 0 });
        }
        if nan && let Some(i) = self.scores.iter().position(|s| s.is_nan()) {
            return Err(Error::InvalidArgument(format!(
                "scores must not be NaN (index {i})"
            )));
        }
        for (name, len) in [
            ("tokens", self.tokens.map(<[i64]>::len)),
            ("pinned", self.pinned.map(<[u8]>::len)),
            ("content_type", self.content_type.map(<[u8]>::len)),
        ] {
            if let Some(len) = len
                && len != n
            {
                return Err(Error::InvalidArgument(format!(
                    "column {name} has {len} values but scores has {n}"
                )));
            }
        }
        if let Some(tokens) = self.tokens
            && let Some(i) = tokens.iter().position(|&t| t < 0)
        {
            return Err(Error::InvalidArgument(format!(
                "column tokens must be >= 0, got {} at index {i}",
                tokens[i]
            )));
        }
        Ok(KeyRange {
            low,
            high: high.max(low),
        })
    }
}

/// Indices of the items to evict, in eviction order (lowest score first, ties by index).
///
/// Errors: NaN scores, columns of another length, negative tokens, a ratio outside [0, 1], a
/// token target without the tokens column.
pub fn select_evictions(selection: &Selection<'_>, stop: Stop) -> Result<Vec<usize>> {
    let range = selection.validate()?;
    let n = selection.scores.len();
    let limit = n.saturating_sub(selection.min_keep);
    match stop {
        Stop::Ratio(ratio) => {
            if !(0.0..=1.0).contains(&ratio) {
                return Err(Error::InvalidArgument(format!(
                    "ratio must be in [0, 1], got {ratio}"
                )));
            }
            let wanted = (n as f64 * ratio).ceil() as usize;
            let count = wanted.min(limit);
            if count == 0 {
                return Ok(Vec::new());
            }
            // The `count` lowest ranks over all items: the bins up to the one reaching `count`.
            let candidates = smallest_candidates(
                selection.scores,
                None,
                range,
                |_| true,
                |i| !selection.evictable(i),
                |counts, _| {
                    last_bin(counts.iter().scan(0usize, |c, &k| {
                        *c += k;
                        Some(*c >= count)
                    }))
                },
            );
            let mut out = Vec::with_capacity(count);
            out.extend(
                candidates.candidates[..count]
                    .iter()
                    .filter(|&&(_, i)| i & KEPT == 0)
                    .map(|&(_, i)| i as usize),
            );
            Ok(out)
        }
        Stop::TargetFreeTokens(target) => {
            let Some(tokens) = selection.tokens else {
                return Err(Error::InvalidArgument(
                    "target_free_tokens needs the tokens column".to_owned(),
                ));
            };
            if target == 0 || limit == 0 {
                return Ok(Vec::new());
            }
            // The evictable items of the bins up to the one where the tokens reach the target or
            // the count reaches the limit (all of them when neither happens).
            let candidates = smallest_candidates(
                selection.scores,
                Some(tokens),
                range,
                |i| selection.evictable(i),
                |_| false,
                |counts, sums| {
                    let (mut items, mut freed) = (0usize, 0u128);
                    last_bin(counts.iter().zip(sums).map(|(&c, &t)| {
                        items += c;
                        freed += u128::from(t);
                        freed >= u128::from(target) || items >= limit
                    }))
                },
            );
            // The bins before the last one neither reach the target nor the limit: all of their
            // candidates are selected; the tokens are read only in the last bin.
            let Smallest {
                candidates,
                last_start,
                tokens_before,
            } = candidates;
            let mut out: Vec<usize> = candidates[..last_start]
                .iter()
                .map(|&(_, i)| i as usize)
                .collect();
            let mut total = tokens_before;
            for &(_, i) in &candidates[last_start..] {
                if total >= u128::from(target) || out.len() == limit {
                    break;
                }
                total += tokens[i as usize] as u128;
                out.push(i as usize);
            }
            Ok(out)
        }
    }
}

/// Bits of the key each level of [`key_histogram`] resolves.
pub const KEY_DIGIT_BITS: u32 = 16;

/// The order-preserving 64-bit keys of `scores` into `out` (same length): `a < b` as scores
/// exactly when `key(a) < key(b)`, -0.0 and 0.0 one key, NaN outside the keys of `-inf..=+inf`.
/// The keys [`select_evictions`] orders by, for a selection spread over several machines.
pub fn order_keys(scores: &[f64], out: &mut [u64]) -> Result<()> {
    if scores.len() != out.len() {
        return Err(Error::InvalidArgument(format!(
            "out holds {} values but there are {} scores",
            out.len(),
            scores.len()
        )));
    }
    for (slot, &score) in out.iter_mut().zip(scores) {
        *slot = ordered(score);
    }
    Ok(())
}

/// One level of a histogram of `keys` by [`KEY_DIGIT_BITS`] bits at a time: the keys whose top
/// `KEY_DIGIT_BITS * level` bits are `prefix` (every key at level 0) and, when `mask` is given,
/// whose mask byte is non-zero, counted in `counts` and their `tokens` summed in `sums`
/// (saturating at `i64::MAX`) by their next `KEY_DIGIT_BITS` bits. Both have
/// `2^KEY_DIGIT_BITS` bins (`sums` is not touched without tokens) and are added to.
///
/// Errors: a level past the last digit, a prefix wider than the level, columns or bins of other
/// lengths, negative tokens.
pub fn key_histogram(
    keys: &[u64],
    mask: Option<&[u8]>,
    tokens: Option<&[i64]>,
    level: u32,
    prefix: u64,
    counts: &mut [i64],
    sums: &mut [i64],
) -> Result<()> {
    let bins = 1usize << KEY_DIGIT_BITS;
    if level >= u64::BITS / KEY_DIGIT_BITS {
        return Err(Error::InvalidArgument(format!(
            "level must be below {}, got {level}",
            u64::BITS / KEY_DIGIT_BITS
        )));
    }
    let high = KEY_DIGIT_BITS * level;
    if prefix >> high != 0 {
        return Err(Error::InvalidArgument(format!(
            "prefix {prefix:#x} is wider than {high} bits"
        )));
    }
    let n = keys.len();
    for (name, len) in [
        ("mask", mask.map(<[u8]>::len)),
        ("tokens", tokens.map(<[i64]>::len)),
    ] {
        if let Some(len) = len
            && len != n
        {
            return Err(Error::InvalidArgument(format!(
                "column {name} has {len} values but keys has {n}"
            )));
        }
    }
    if counts.len() != bins || (tokens.is_some() && sums.len() != bins) {
        return Err(Error::InvalidArgument(format!(
            "counts and sums must have {bins} bins"
        )));
    }
    let shift = u64::BITS - KEY_DIGIT_BITS * (level + 1);
    // Keys under the prefix: those whose bits above the digit, shifted down, equal it. Branch
    // free: every key adds 0 or 1 to its bin (the region is often a sliver of the keys).
    let inside = |key: u64| high == 0 || key >> (u64::BITS - high) == prefix;
    let digit = |key: u64| ((key >> shift) as usize) & (bins - 1);
    let counted = |i: usize, key: u64| i64::from(inside(key) & mask.is_none_or(|m| m[i] != 0));
    match tokens {
        None => {
            for (i, &key) in keys.iter().enumerate() {
                counts[digit(key)] += counted(i, key);
            }
        }
        Some(tokens) => {
            if let Some(i) = tokens.iter().position(|&t| t < 0) {
                return Err(Error::InvalidArgument(format!(
                    "column tokens must be >= 0, got {} at index {i}",
                    tokens[i]
                )));
            }
            for (i, (&key, &t)) in keys.iter().zip(tokens).enumerate() {
                let d = digit(key);
                let one = counted(i, key);
                counts[d] += one;
                sums[d] = sums[d].saturating_add(t * one);
            }
        }
    }
    Ok(())
}

/// The first bin whose flag is set, or the last bin when none is.
fn last_bin(reached: impl Iterator<Item = bool>) -> usize {
    let mut last = 0;
    for (bin, reached) in reached.enumerate() {
        last = bin;
        if reached {
            break;
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selection<'a>(scores: &'a [f64], tokens: Option<&'a [i64]>) -> Selection<'a> {
        Selection {
            scores,
            tokens,
            pinned: None,
            content_type: None,
            min_keep: 0,
        }
    }

    #[test]
    fn ratio_selects_lowest_ranks_ties_by_index() {
        let scores = [0.5, 0.1, 0.5, 0.1, 0.9];
        let got = select_evictions(&selection(&scores, None), Stop::Ratio(0.6)).unwrap();
        assert_eq!(got, vec![1, 3, 0]);
    }

    #[test]
    fn pinned_inside_the_ranks_lowers_the_count() {
        let scores = [0.1, 0.2, 0.3, 0.4];
        let pinned = [255u8, 0, 0, 0];
        let s = Selection {
            pinned: Some(&pinned),
            ..selection(&scores, None)
        };
        assert_eq!(select_evictions(&s, Stop::Ratio(0.5)).unwrap(), vec![1]);
        let s = Selection { min_keep: 3, ..s };
        assert_eq!(
            select_evictions(&s, Stop::Ratio(1.0)).unwrap(),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn token_target_stops_when_met() {
        let scores: Vec<f64> = (0..1000).map(|i| ((i * 37) % 1000) as f64).collect();
        let tokens: Vec<i64> = (0..1000).map(|i| (i % 7) as i64 + 1).collect();
        let got = select_evictions(
            &selection(&scores, Some(&tokens)),
            Stop::TargetFreeTokens(500),
        )
        .unwrap();
        let freed: i64 = got.iter().map(|&i| tokens[i]).sum();
        assert!(freed >= 500);
        let without_last: i64 = got[..got.len() - 1].iter().map(|&i| tokens[i]).sum();
        assert!(without_last < 500);
        let mut order: Vec<usize> = (0..1000).collect();
        order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(a.cmp(&b)));
        assert_eq!(got, order[..got.len()]);
    }

    #[test]
    fn key_histogram_counts_the_digits_under_the_prefix() {
        let scores = [0.5, 0.25, -1.0, 0.5, 0.0, -0.0, f64::INFINITY, 0.75];
        let mut keys = [0u64; 8];
        order_keys(&scores, &mut keys).unwrap();
        assert_eq!(keys[4], keys[5]);
        assert!(keys[2] < keys[4] && keys[4] < keys[1] && keys[1] < keys[0] && keys[7] < keys[6]);
        let tokens = [1i64, 2, 3, 4, 5, 6, 7, 8];
        let mask = [1u8, 1, 1, 0, 1, 1, 1, 1];
        for level in 0..4 {
            let prefix = if level == 0 {
                0
            } else {
                keys[0] >> (64 - 16 * level)
            };
            let (mut counts, mut sums) = (vec![0i64; 1 << 16], vec![0i64; 1 << 16]);
            key_histogram(
                &keys,
                Some(&mask),
                Some(&tokens),
                level,
                prefix,
                &mut counts,
                &mut sums,
            )
            .unwrap();
            let (mut want_counts, mut want_sums) = (vec![0i64; 1 << 16], vec![0i64; 1 << 16]);
            for i in 0..8 {
                let inside = level == 0 || keys[i] >> (64 - 16 * level) == prefix;
                if inside && mask[i] != 0 {
                    let d = ((keys[i] >> (48 - 16 * level)) & 0xffff) as usize;
                    want_counts[d] += 1;
                    want_sums[d] += tokens[i];
                }
            }
            assert_eq!((counts, sums), (want_counts, want_sums), "level {level}");
        }
        let (mut counts, mut sums) = (vec![0i64; 1 << 16], vec![0i64; 1 << 16]);
        assert!(key_histogram(&keys, None, None, 4, 0, &mut counts, &mut sums).is_err());
        assert!(key_histogram(&keys, None, None, 1, 1 << 16, &mut counts, &mut sums).is_err());
        assert!(key_histogram(&keys, None, None, 0, 1, &mut counts, &mut sums).is_err());
        assert!(
            key_histogram(&keys, Some(&mask[..2]), None, 0, 0, &mut counts, &mut sums).is_err()
        );
        let negative = [1i64, -1, 0, 0, 0, 0, 0, 0];
        assert!(key_histogram(&keys, None, Some(&negative), 0, 0, &mut counts, &mut sums).is_err());
        assert!(key_histogram(&keys, None, None, 0, 0, &mut counts[..5], &mut sums).is_err());
        assert!(order_keys(&scores, &mut [0u64; 3]).is_err());
    }

    #[test]
    fn errors() {
        let scores = [f64::NAN];
        assert!(select_evictions(&selection(&scores, None), Stop::Ratio(0.5)).is_err());
        let scores = [1.0];
        assert!(select_evictions(&selection(&scores, None), Stop::Ratio(1.5)).is_err());
        assert!(select_evictions(&selection(&scores, None), Stop::TargetFreeTokens(1)).is_err());
        assert!(
            select_evictions(&selection(&[], None), Stop::Ratio(0.5))
                .unwrap()
                .is_empty()
        );
    }
}

#[cfg(test)]
mod properties {
    //! The radix selection against a plain full sort, on generated columns.
    use super::*;

    /// A small deterministic generator (xorshift64*), so the cases are the same on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    /// The definition: sort every item by (score, index) with -0.0 == 0.0, then apply the rule.
    fn reference(s: &Selection<'_>, stop: Stop) -> Vec<usize> {
        let n = s.scores.len();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| {
            s.scores[a]
                .partial_cmp(&s.scores[b])
                .expect("no NaN")
                .then(a.cmp(&b))
        });
        let limit = n.saturating_sub(s.min_keep);
        match stop {
            Stop::Ratio(ratio) => {
                let count = ((n as f64 * ratio).ceil() as usize).min(limit);
                order[..count]
                    .iter()
                    .copied()
                    .filter(|&i| s.evictable(i))
                    .collect()
            }
            Stop::TargetFreeTokens(target) => {
                let tokens = s.tokens.expect("tokens");
                let (mut freed, mut out) = (0u128, Vec::new());
                for i in order {
                    if freed >= u128::from(target) || out.len() == limit {
                        break;
                    }
                    if s.evictable(i) {
                        freed += tokens[i] as u128;
                        out.push(i);
                    }
                }
                out
            }
        }
    }

    /// Scores drawn from a few shapes: many ties, a narrow range (one top bin), wide magnitudes
    /// of both signs, and the special values.
    fn scores(rng: &mut Rng, n: usize) -> Vec<f64> {
        let shape = rng.below(4);
        (0..n)
            .map(|_| match shape {
                0 => (rng.below(5) as f64) / 4.0,
                1 => 0.5 + (rng.below(1 << 20) as f64) * 1e-12,
                2 => {
                    let magnitude = f64::from_bits(rng.next() >> 2);
                    if rng.below(2) == 0 {
                        magnitude
                    } else {
                        -magnitude
                    }
                }
                _ => [
                    0.0,
                    -0.0,
                    1.0,
                    -1.0,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                    1e-300,
                ][rng.below(7) as usize],
            })
            .collect()
    }

    #[test]
    fn radix_selection_equals_a_full_sort() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..400 {
            let n = match case % 4 {
                0 => rng.below(40) as usize,
                1 => rng.below(3000) as usize,
                2 => 600 + rng.below(3000) as usize,
                _ => 20_000 + rng.below(60_000) as usize,
            };
            let scores = scores(&mut rng, n);
            let heavy = rng.below(3) == 0;
            let tokens: Vec<i64> = (0..n)
                .map(|_| {
                    if heavy {
                        (rng.next() >> 2) as i64
                    } else {
                        rng.below(50) as i64
                    }
                })
                .collect();
            let pinned: Vec<u8> = (0..n).map(|_| u8::from(rng.below(8) == 0)).collect();
            let types: Vec<u8> = (0..n).map(|_| rng.below(6) as u8).collect();
            let s = Selection {
                scores: &scores,
                tokens: Some(&tokens),
                pinned: (rng.below(2) == 0).then_some(pinned.as_slice()),
                content_type: (rng.below(2) == 0).then_some(types.as_slice()),
                min_keep: rng.below(n as u64 + 2) as usize,
            };
            let ratio =
                [0.0, 0.1, 0.3, 0.5, 1.0, rng.below(1001) as f64 / 1000.0][rng.below(6) as usize];
            let total: u128 = tokens.iter().map(|&t| t as u128).sum();
            let target = match rng.below(4) {
                0 => rng.below(100),
                1 => u64::MAX,
                _ => u64::try_from(total / (1 + u128::from(rng.below(10)))).unwrap_or(u64::MAX),
            };
            for stop in [Stop::Ratio(ratio), Stop::TargetFreeTokens(target)] {
                assert_eq!(
                    select_evictions(&s, stop).unwrap(),
                    reference(&s, stop),
                    "case {case}, n {n}, {stop:?}"
                );
            }
        }
    }

    /// Inputs large enough for the passes over all items to run on several threads.
    #[test]
    fn parallel_passes_equal_a_full_sort() {
        let mut rng = Rng(11);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        for case in 0..6 {
            let n = PARALLEL_MIN_ITEMS + rng.below(100_000) as usize;
            let scores = scores(&mut rng, n);
            let tokens: Vec<i64> = (0..n).map(|_| rng.below(1000) as i64).collect();
            let pinned: Vec<u8> = (0..n).map(|_| u8::from(rng.below(5) == 0)).collect();
            let s = Selection {
                scores: &scores,
                tokens: Some(&tokens),
                pinned: (case % 2 == 0).then_some(pinned.as_slice()),
                content_type: None,
                min_keep: rng.below(1000) as usize,
            };
            let total: u64 = tokens.iter().map(|&t| t as u64).sum();
            for stop in [
                Stop::Ratio(0.1),
                Stop::Ratio(0.5),
                Stop::TargetFreeTokens(total / 3),
                Stop::TargetFreeTokens(total),
            ] {
                let got = pool.install(|| select_evictions(&s, stop)).unwrap();
                assert_eq!(got, reference(&s, stop), "case {case}, {stop:?}");
            }
        }
    }

    #[test]
    fn digits_are_in_key_order_and_in_range() {
        let mut rng = Rng(5);
        for case in 0..200 {
            let mut keys: Vec<u64> = (0..500)
                .map(|_| match case % 3 {
                    0 => rng.next(),
                    1 => (1 << 62) + rng.below(1000),
                    _ => INFINITY_KEY - rng.below(3),
                })
                .collect();
            keys.sort_unstable();
            let low = keys[rng.below(10) as usize];
            let high = keys[keys.len() - 1 - rng.below(10) as usize];
            for bits in [8, 12, 16] {
                let digits = Digits::new(KeyRange { low, high }, bits);
                let all: Vec<usize> = keys.iter().map(|&k| digits.of(k)).collect();
                assert!(all.windows(2).all(|w| w[0] <= w[1]), "case {case}");
                assert!(all.iter().all(|&d| d < 1 << bits));
                // The span is spread over the bins: its ends fall at least half the bins apart.
                if high - low >= 1 << bits {
                    assert!(digits.of(high) - digits.of(low) >= (1 << bits) / 2 - 1);
                }
            }
        }
    }

    /// Scores crowded in a span far narrower than their magnitude (one bin of the top bits) and
    /// runs of ties: the range-relative bins and the skipping of shared bits keep the result.
    #[test]
    fn narrow_spans_and_long_ties_equal_a_full_sort() {
        let mut rng = Rng(3);
        for case in 0..40 {
            let n = 1000 + rng.below(30_000) as usize;
            let scores: Vec<f64> = (0..n)
                .map(|_| match case % 4 {
                    0 => 0.3 + rng.below(1 << 12) as f64 * 1e-15,
                    1 => [0.3, 0.3 + 1e-16, 0.7][rng.below(3) as usize],
                    2 => {
                        if rng.below(10) == 0 {
                            f64::INFINITY
                        } else {
                            -2.0 - rng.below(100) as f64 * 1e-14
                        }
                    }
                    _ => 0.25,
                })
                .collect();
            let tokens: Vec<i64> = (0..n).map(|_| rng.below(100) as i64).collect();
            let s = Selection {
                scores: &scores,
                tokens: Some(&tokens),
                pinned: None,
                content_type: None,
                min_keep: 0,
            };
            let total: u64 = tokens.iter().map(|&t| t as u64).sum();
            for stop in [
                Stop::Ratio(0.1),
                Stop::Ratio(0.5),
                Stop::TargetFreeTokens(total / 4),
            ] {
                assert_eq!(
                    select_evictions(&s, stop).unwrap(),
                    reference(&s, stop),
                    "case {case}, {stop:?}"
                );
            }
        }
    }

    #[test]
    fn sort_bucket_sorts_by_key_then_index() {
        let mut rng = Rng(7);
        let shapes = [
            0xff00_ff00_00ff_0f0f,
            0x3,
            0x0100_0000_0000_0001,
            0x0000_ffff_ffff_ffff,
        ];
        for (len, mask) in [0, 1, 2, 511, 512, 513, 5000, 100_000]
            .into_iter()
            .flat_map(|len| shapes.map(|mask| (len, mask)))
        {
            let mut bucket: Vec<Candidate> = (0..len as u64)
                .map(|i| {
                    let kept = if rng.below(3) == 0 { KEPT } else { 0 };
                    ((rng.next() & mask) | (0xabcd << 48), i | kept)
                })
                .collect();
            let mut want = bucket.clone();
            want.sort_by_key(|&(key, index)| (key, index & !KEPT));
            sort_bucket(&mut bucket, &mut Vec::new(), 64);
            assert_eq!(bucket, want);
        }
    }
}
