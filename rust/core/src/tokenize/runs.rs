//! Counts of pieces made of long runs of one byte (`"=" * 10**6`, a rule of dashes inside a
//! comment): a per-byte table of run counts with its period, and the prefix recurrence of
//! byte-pair encoding over pieces with runs.

use std::ops::Range;

use rustc_hash::FxHashMap;
use tiktoken_rs::Rank;

use super::backtrack::{Backtrack, with_pair_cache};
use super::vocab::Vocab;

/// In the recurrence's `last_run` array: the last token at a position is not a run token.
const NOT_A_RUN: u8 = u8::MAX;

/// How often, in positions, the deep-run skip compares the recurrence's window with the table's
/// (a comparison reads a whole window; once the recurrence is in the table's cycle any position
/// matches, so sparse checks lose at most this many positions).
const SKIP_INTERVAL: usize = 32;

/// Positions a run must still go on past the current one for the deep-run skip to apply, beyond
/// the vocabulary's longest token, so every position it fills lies ahead.
const SKIP_MARGIN: usize = 64;

/// The byte `piece` repeats, if it is one byte repeated.
#[inline]
pub(super) fn single_byte_run(piece: &[u8]) -> Option<u8> {
    let (&first, rest) = piece.split_first()?;
    rest.iter().all(|&b| b == first).then_some(first)
}

/// Runs of one byte are computed up to this length at most, looking for the period of their counts.
const RUN_TABLE_LIMIT: usize = 1 << 14;

/// Token counts of `byte * n` for every `n`, from a table and a period.
///
/// Byte-pair encoding has a prefix property (the `bpe` crate's basis): the last token of the
/// encoding of `text[..i]` is the one token `t` ending at `i` that is compatible
/// ([`Backtrack::is_valid_pair`]) with the last token of the encoding of `text[..i - len(t)]`,
/// and the count is that prefix's count plus one. On a run `c * n` the tokens ending at `i` are
/// the vocabulary's runs `c * k` (for `k <= i`), so once `i` is at least the longest of them the
/// step from `i` to `i + 1` depends only on the last tokens and count increments of the
/// previous `longest` positions. That window is a finite state of a deterministic recurrence:
/// as soon as the window at `i2` equals the window at an earlier `i1 >= longest`, every later
/// position repeats with period `p = i2 - i1`, and `count(n) = count(n - p) + (count(i2) -
/// count(i1))` for `n >= i2`. The table holds the counts up to `i2`.
#[derive(Debug)]
pub(super) struct RunCounts {
    /// `counts[n]`: tokens of `c * n`, for `n <= i2`.
    counts: Vec<u32>,
    /// `i1`, the first position of the periodic part.
    start: usize,
    /// `i2 - i1`.
    period: usize,
    /// `count(i2) - count(i1)`.
    delta: usize,
    /// The byte.
    byte: u8,
    /// The vocabulary's runs of the byte: (length, rank), shortest first.
    pub(super) runs: Vec<(usize, Rank)>,
    /// `valid[a * runs.len() + b]`: run token `a` followed by run token `b` is compatible.
    pub(super) valid: Vec<bool>,
    /// `last[i]`: index in `runs` of the last token of `byte * i`, for `i <= i2`.
    last: Vec<u8>,
    /// `step[i]`: `count(i) - count(i - 1)`, for `i <= i2`.
    step: Vec<i64>,
    /// Positions `2 * longest <= i < i2` by the hash of their window (see [`window_hash`]).
    windows: FxHashMap<u64, Vec<usize>>,
    /// The longest run token's length, the window's length.
    pub(super) longest: usize,
    /// The vocabulary's longest token, in bytes: how far back a token after a run can reach.
    max_len: usize,
}

/// The hash of a window of the run recurrence: last tokens (as run indices) and count steps.
fn window_hash(window: (&[u8], &[i64])) -> u64 {
    let mut hasher = rustc_hash::FxHasher::default();
    std::hash::Hash::hash(&window, &mut hasher);
    std::hash::Hasher::finish(&hasher)
}

impl RunCounts {
    /// The table of runs of `byte`, or `None` when the vocabulary has no token of that byte
    /// alone or the counts are not found periodic within [`RUN_TABLE_LIMIT`] bytes.
    pub(super) fn new(
        ranks: &FxHashMap<Vec<u8>, Rank>,
        backtrack: &Backtrack,
        byte: u8,
    ) -> Option<Self> {
        // The vocabulary's runs of `byte`: lengths (shortest first) and ranks.
        let mut runs: Vec<(usize, Rank)> = Vec::new();
        let mut run = vec![byte];
        let max_len = backtrack.token_len.iter().copied().max().unwrap_or(1) as usize;
        while run.len() <= max_len {
            if let Some(&rank) = ranks.get(&run) {
                runs.push((run.len(), rank));
            }
            run.push(byte);
        }
        if runs.first().is_none_or(|&(len, _)| len != 1) {
            return None;
        }
        let longest = runs.last().map_or(1, |&(len, _)| len);
        // valid[a * runs.len() + b]: run token `a` followed by run token `b` is compatible.
        let mut valid = vec![false; runs.len() * runs.len()];
        for (a, &(_, left)) in runs.iter().enumerate() {
            for (b, &(_, right)) in runs.iter().enumerate() {
                valid[a * runs.len() + b] = backtrack.is_valid_pair(left, right);
            }
        }
        // last[i]: index in `runs` of the last token of `c * i`; step[i]: count(i) - count(i-1).
        let mut last = vec![u8::MAX; 1];
        let mut counts = vec![0u32];
        let mut step = vec![0i64];
        // Positions by the hash of their window (windows compared in full on a hash match).
        let mut windows: FxHashMap<u64, Vec<usize>> = FxHashMap::default();
        for i in 1..=RUN_TABLE_LIMIT {
            let mut found = None;
            for (index, &(len, _)) in runs.iter().enumerate().rev() {
                if len > i {
                    continue;
                }
                if len == i || valid[last[i - len] as usize * runs.len() + index] {
                    found = Some((index, len));
                    break;
                }
            }
            let (index, len) = found?;
            let count = counts[i - len] + 1;
            last.push(u8::try_from(index).ok()?);
            step.push(i64::from(count) - i64::from(counts[i - 1]));
            counts.push(count);
            if i >= 2 * longest {
                // (Any `i1 >= longest` works; twice that is a margin.)
                let window =
                    |at: usize| (&last[at + 1 - longest..=at], &step[at + 1 - longest..=at]);
                let hash = window_hash(window(i));
                let earlier = windows.entry(hash).or_default();
                if let Some(&start) = earlier.iter().find(|&&at| window(at) == window(i)) {
                    let delta = (counts[i] - counts[start]) as usize;
                    return Some(Self {
                        counts,
                        start,
                        period: i - start,
                        delta,
                        byte,
                        runs,
                        valid,
                        last,
                        step,
                        windows,
                        longest,
                        max_len,
                    });
                }
                earlier.push(i);
            }
        }
        None
    }

    /// The position of the table in the same state as position `n` of the run.
    #[inline]
    fn reduce(&self, n: usize) -> usize {
        if n < self.counts.len() {
            n
        } else {
            n - (n - self.start) / self.period * self.period
        }
    }

    /// The table position whose window equals `window`, if any.
    fn find_window(&self, window: (&[u8], &[i64])) -> Option<usize> {
        let at = self.windows.get(&window_hash(window))?;
        at.iter().copied().find(|&p| {
            (
                &self.last[p + 1 - self.longest..=p],
                &self.step[p + 1 - self.longest..=p],
            ) == window
        })
    }

    /// Tokens of the run of length `n`.
    #[inline]
    pub(super) fn count(&self, n: usize) -> usize {
        if n < self.counts.len() {
            self.counts[n] as usize
        } else {
            let periods = (n - self.start) / self.period;
            self.counts[n - periods * self.period] as usize + periods * self.delta
        }
    }

    /// Skips to the end of a run when the recurrence has entered the table's cycle: deep in
    /// `run` (a run of this table's byte, `at` past its first `longest` run tokens), every
    /// [`SKIP_INTERVAL`] positions, if the window of last tokens and count steps ending at `at`
    /// equals the window at a table position `p`, every later position of the run is in the same
    /// state as its counterpart after `p`. The last [`Self::max_len`] positions of the run (all
    /// that a token after the run can reach back to) are then filled from the table, and
    /// `Some(true)` tells the caller to go on from `run.end`. `Some(false)`: not here; `None`: a
    /// count overflows 32 bits.
    fn skip_run(
        &self,
        at: usize,
        run: Range<usize>,
        last: &mut [Rank],
        last_run: &mut [u8],
        counts: &mut [u32],
        steps: &mut Vec<i64>,
    ) -> Option<bool> {
        if (at - run.start) % SKIP_INTERVAL != 0 || at + 1 + self.max_len + SKIP_MARGIN >= run.end {
            return Some(false);
        }
        let window = at + 1 - self.longest..=at;
        if last_run[window.clone()].contains(&NOT_A_RUN) {
            return Some(false);
        }
        steps.clear();
        steps.extend(
            window
                .clone()
                .map(|j| i64::from(counts[j]) - i64::from(counts[j - 1])),
        );
        let Some(p) = self.find_window((&last_run[window], steps)) else {
            return Some(false);
        };
        let base = i64::from(counts[at]) - self.count(p) as i64;
        for t in run.end - self.max_len..=run.end {
            let q = p + t - at;
            let index = self.last[self.reduce(q)];
            last_run[t] = index;
            last[t] = self.runs[index as usize].1;
            counts[t] = u32::try_from(base + self.count(q) as i64).ok()?;
        }
        Some(true)
    }

    /// Tokens of `piece = head + byte * m + tail` (`run = head.len()..head.len() + m`, `m` at
    /// least the longest token, so no token spans the whole run): the same prefix recurrence as
    /// [`RunCounts::new`] at every position, with the tokens ending at a position enumerated
    /// from the structure of the piece. Inside the run, run tokens are checked with the `valid`
    /// table, so a position costs a few table reads. `None` if no token ending at a position is
    /// compatible (impossible for a vocabulary whose tokens merge to themselves).
    pub(super) fn count_affixed(
        &self,
        ranks: &FxHashMap<Vec<u8>, Rank>,
        backtrack: &Backtrack,
        piece: &[u8],
        run: Range<usize>,
    ) -> Option<usize> {
        let n = piece.len();
        let (head, end) = (run.start, run.end);
        // (end, rank) of the tokens that start in the head and end inside the run.
        let mut straddling: Vec<(usize, Rank)> = Vec::new();
        for start in 0..head {
            let mut node = backtrack.trie.root[piece[start] as usize];
            let mut at = start + 1;
            while node != u32::MAX && at <= end {
                let rank = backtrack.trie.node_rank[node as usize];
                if rank != Rank::MAX && at > head {
                    straddling.push((at, rank));
                }
                if at == end {
                    break;
                }
                node = backtrack.child(node, piece[at]);
                at += 1;
            }
        }
        // (end, rank) of the tokens `byte * k + tail[..j]` (start in the run, end in the tail).
        let mut into_tail: Vec<(usize, Rank)> = Vec::new();
        let mut node = backtrack.trie.root[self.byte as usize];
        let mut k = 1;
        while node != u32::MAX && k <= end - head {
            let mut inner = node;
            for (at, &b) in piece.iter().enumerate().skip(end) {
                inner = backtrack.child(inner, b);
                if inner == u32::MAX {
                    break;
                }
                let rank = backtrack.trie.node_rank[inner as usize];
                if rank != Rank::MAX {
                    into_tail.push((at + 1, rank));
                }
            }
            node = backtrack.child(node, self.byte);
            k += 1;
        }
        let mut last: Vec<Rank> = vec![Rank::MAX; n + 1];
        let mut last_run: Vec<u8> = vec![NOT_A_RUN; n + 1];
        let mut counts: Vec<u32> = vec![0; n + 1];
        let token_len = |rank: Rank| backtrack.token_len[rank as usize] as usize;
        let compatible = |last: &[Rank], at: usize, rank: Rank| {
            at == 0 || backtrack.is_valid_pair(last[at], rank)
        };
        // Steps of the window at a position, for matching it against the table's windows.
        let mut steps: Vec<i64> = Vec::with_capacity(self.longest);
        let mut i = 0;
        while i < n {
            i += 1;
            // Deep in the run: the rest of the run may repeat the table, up to the tail.
            if i > head + 2 * self.longest
                && self.skip_run(
                    i - 1,
                    head..end,
                    &mut last,
                    &mut last_run,
                    &mut counts,
                    &mut steps,
                )?
            {
                i = end;
                continue;
            }
            let mut found: Option<(Rank, u8)> = None;
            if i > head && i <= end {
                for (index, &(len, rank)) in self.runs.iter().enumerate().rev() {
                    if len > i - head {
                        continue;
                    }
                    let before = i - len;
                    let ok = match last_run[before] {
                        NOT_A_RUN => compatible(&last, before, rank),
                        prev => self.valid[prev as usize * self.runs.len() + index],
                    };
                    if ok {
                        found = Some((rank, index as u8));
                        break;
                    }
                }
                if found.is_none() && i - head < backtrack.max_len {
                    found = straddling
                        .iter()
                        .filter(|&&(at, _)| at == i)
                        .find(|&&(_, rank)| compatible(&last, i - token_len(rank), rank))
                        .map(|&(_, rank)| (rank, NOT_A_RUN));
                }
            } else {
                // In the head or the tail: tokens within it, then (tail) those from the run.
                let from = if i <= head { 0 } else { end };
                found = (from..i)
                    .filter_map(|start| ranks.get(&piece[start..i]).map(|&r| (start, r)))
                    .find(|&(start, rank)| compatible(&last, start, rank))
                    .map(|(_, rank)| (rank, NOT_A_RUN));
                if found.is_none() && i > end {
                    found = into_tail
                        .iter()
                        .filter(|&&(at, _)| at == i)
                        .find(|&&(_, rank)| compatible(&last, i - token_len(rank), rank))
                        .map(|&(_, rank)| (rank, NOT_A_RUN));
                }
            }
            let (rank, run_index) = found?;
            last[i] = rank;
            last_run[i] = run_index;
            counts[i] = counts[i - token_len(rank)] + 1;
        }
        Some(counts[n] as usize)
    }
}

/// `(head, byte, tail)` when `piece` is a run of one byte of at least `min_run` bytes with at
/// most [`MAX_AFFIX`] bytes before and after it.
pub(super) fn affixed_run(piece: &[u8], min_run: usize) -> Option<Range<usize>> {
    let middle = piece.len() / 2;
    let byte = *piece.get(middle)?;
    let start = piece[..middle]
        .iter()
        .rposition(|&b| b != byte)
        .map_or(0, |p| p + 1);
    let end = piece[middle..]
        .iter()
        .position(|&b| b != byte)
        .map_or(piece.len(), |p| middle + p);
    (start <= MAX_AFFIX && piece.len() - end <= MAX_AFFIX && end - start >= min_run)
        .then_some(start..end)
}

/// Whether runs of at least [`LONG_RUN`] bytes make up half of `piece` or more: then the run
/// recurrence counts it directly, rather than after backtracking gave up on it.
pub(super) fn mostly_long_runs(piece: &[u8]) -> bool {
    let mut in_runs = 0;
    let mut start = 0;
    while start < piece.len() {
        let byte = piece[start];
        let len = piece[start..].iter().take_while(|&&b| b == byte).count();
        if len >= LONG_RUN {
            in_runs += len;
        }
        start += len;
    }
    2 * in_runs >= piece.len()
}

/// Runs of at least this many bytes make [`Vocab::count_with_runs`] count a piece: on runs of
/// a byte with many run tokens (`=`, `-`, `*`, `#`, ...) backtracking retries every run token at
/// many positions.
pub(super) const LONG_RUN: usize = 32;

/// Runs of at least this many bytes in a piece that [`Vocab::count_with_runs`] counts are
/// counted as runs (shorter ones as any text).
const SHORT_RUN: usize = 3;

/// Longest head and tail around a run that [`RunCounts::count_affixed`] takes.
pub(super) const MAX_AFFIX: usize = 16;

impl Vocab {
    /// Tokens of a piece with runs of one byte (any number of them, anywhere): the prefix
    /// recurrence of [`RunCounts`] at every position. Inside a run of at least [`SHORT_RUN`]
    /// bytes the tokens ending at a position are run tokens, checked with the run's `valid`
    /// table, or (in its first bytes) tokens reaching into it from before; deep in a run, once
    /// the window equals one of the table's, the run is skipped to its end. Elsewhere the tokens
    /// ending at a position come from a walk of the reversed-token trie. `None` when the piece
    /// has no run of [`LONG_RUN`] bytes (backtracking is faster there).
    pub(super) fn count_with_runs(&self, piece: &[u8]) -> Option<usize> {
        let backtrack = self.backtrack();
        let max_len = backtrack.max_len;
        let mut runs: Vec<(Range<usize>, &RunCounts)> = Vec::new();
        let mut long = false;
        let mut start = 0;
        while start < piece.len() {
            let byte = piece[start];
            let end = piece[start..]
                .iter()
                .position(|&b| b != byte)
                .map_or(piece.len(), |p| start + p);
            if end - start >= SHORT_RUN
                && let Some(table) = self.run_counts(byte)
            {
                runs.push((start..end, table));
                long |= end - start >= LONG_RUN;
            }
            start = end;
        }
        if !long {
            return None;
        }
        let reverse = self.reverse_trie();
        let n = piece.len();
        let mut last: Vec<Rank> = vec![Rank::MAX; n + 1];
        let mut last_run: Vec<u8> = vec![NOT_A_RUN; n + 1];
        let mut counts: Vec<u32> = vec![0; n + 1];
        let mut steps: Vec<i64> = Vec::new();
        let mut candidates: Vec<(usize, Rank)> = Vec::new();
        // Nodes of the reversed trie after `k` bytes of the run `run_nodes_of` (`u32::MAX`: none).
        let mut run_nodes: Vec<u32> = Vec::with_capacity(max_len + 1);
        let mut run_nodes_of = usize::MAX;
        with_pair_cache(self.slot, |pairs| {
            let mut compatible = |last: &[Rank], start: usize, rank: Rank| {
                start == 0 || pairs.is_valid_pair(backtrack, last[start], rank)
            };
            let mut r = 0;
            let mut i = 0;
            while i < n {
                i += 1;
                while r < runs.len() && runs[r].0.end < i {
                    r += 1;
                }
                let found = match runs.get(r) {
                    Some((range, table)) if i >= range.start + max_len => {
                        // Deep in the run: the rest of it may repeat the table.
                        if i > range.start + max_len + table.longest
                            && table.skip_run(
                                i - 1,
                                range.clone(),
                                &mut last,
                                &mut last_run,
                                &mut counts,
                                &mut steps,
                            )?
                        {
                            i = range.end;
                            continue;
                        }
                        // Only run tokens end here (a longer token would start before the run).
                        table
                            .runs
                            .iter()
                            .enumerate()
                            .rev()
                            .find(|&(index, &(len, rank))| {
                                // A run index before the run's first byte is another run's.
                                match last_run[i - len] {
                                    prev if prev != NOT_A_RUN && i - len > range.start => {
                                        table.valid[prev as usize * table.runs.len() + index]
                                    }
                                    _ => compatible(&last, i - len, rank),
                                }
                            })
                            .map(|(index, &(len, rank))| (len, rank, index as u8))
                    }
                    Some((range, table)) if i > range.start => {
                        // Early in the run: run tokens, or tokens that start before the run,
                        // found by walking back from the reversed trie's node of the run's part.
                        if run_nodes_of != r {
                            run_nodes_of = r;
                            run_nodes.clear();
                            run_nodes.push(0);
                            for _ in 0..max_len.min(range.len()) {
                                let node = *run_nodes.last().expect("starts with the root");
                                run_nodes.push(if node == u32::MAX {
                                    u32::MAX
                                } else {
                                    reverse.child(node, piece[range.start])
                                });
                            }
                        }
                        let inside = i - range.start;
                        let from_run = table
                            .runs
                            .iter()
                            .enumerate()
                            .rev()
                            .filter(|&(_, &(len, _))| len <= inside)
                            .find(|&(index, &(len, rank))| {
                                // A run index before the run's first byte is another run's.
                                match last_run[i - len] {
                                    prev if prev != NOT_A_RUN && i - len > range.start => {
                                        table.valid[prev as usize * table.runs.len() + index]
                                    }
                                    _ => compatible(&last, i - len, rank),
                                }
                            })
                            .map(|(index, &(len, rank))| (len, rank, index as u8));
                        from_run.or_else(|| {
                            let mut node = run_nodes[inside];
                            let mut at = range.start;
                            while node != u32::MAX && at > 0 {
                                at -= 1;
                                node = reverse.child(node, piece[at]);
                                if node != u32::MAX {
                                    let rank = reverse.node_rank[node as usize];
                                    if rank != Rank::MAX && compatible(&last, at, rank) {
                                        return Some((i - at, rank, NOT_A_RUN));
                                    }
                                }
                            }
                            None
                        })
                    }
                    _ => {
                        candidates.clear();
                        let mut node = reverse.root[piece[i - 1] as usize];
                        let mut at = i - 1;
                        while node != u32::MAX {
                            let rank = reverse.node_rank[node as usize];
                            if rank != Rank::MAX {
                                candidates.push((at, rank));
                            }
                            if at == 0 {
                                break;
                            }
                            at -= 1;
                            node = reverse.child(node, piece[at]);
                        }
                        candidates
                            .iter()
                            .rev()
                            .find(|&&(start, rank)| compatible(&last, start, rank))
                            .map(|&(start, rank)| (i - start, rank, NOT_A_RUN))
                    }
                };
                let (len, rank, index) = found?;
                last[i] = rank;
                last_run[i] = index;
                counts[i] = counts[i - len] + 1;
            }
            Some(counts[n] as usize)
        })
    }
}
