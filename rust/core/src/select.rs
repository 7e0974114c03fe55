//! Choosing what to evict from scores: lowest score first, ties by original index, never a pinned
//! item, a system prompt or an item scored `+inf`. Selection avoids a full sort: a partial
//! selection (`select_nth_unstable`, O(n)) isolates the candidates, and only those are sorted.

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

/// A sort key: the score's bits mapped to an order-preserving integer, then the index.
#[inline]
fn key(score: f64, index: usize) -> (u64, u64) {
    // -0.0 and 0.0 are equal scores: both map to the key of 0.0 so the index decides.
    let score = if score == 0.0 { 0.0 } else { score };
    let bits = score.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    (ordered, index as u64)
}

/// Sorts the `k` smallest keys of `keys` to its front (the rest in any order).
fn smallest_sorted(keys: &mut [(u64, u64)], k: usize) {
    if k == 0 {
        return;
    }
    if k < keys.len() {
        keys.select_nth_unstable(k - 1);
    }
    keys[..k].sort_unstable();
}

impl Selection<'_> {
    fn evictable(&self, i: usize) -> bool {
        self.scores[i] != f64::INFINITY
            && self.pinned.is_none_or(|p| p[i] == 0)
            && self
                .content_type
                .is_none_or(|t| t[i] != ContentType::SystemPrompt as u8)
    }

    fn validate(&self) -> Result<()> {
        let n = self.scores.len();
        if let Some(i) = self.scores.iter().position(|s| s.is_nan()) {
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
        Ok(())
    }
}

/// Indices of the items to evict, in eviction order (lowest score first, ties by index).
///
/// Errors: NaN scores, columns of another length, negative tokens, a ratio outside [0, 1], a
/// token target without the tokens column.
pub fn select_evictions(selection: &Selection<'_>, stop: Stop) -> Result<Vec<usize>> {
    selection.validate()?;
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
            let mut keys: Vec<(u64, u64)> = selection
                .scores
                .iter()
                .enumerate()
                .map(|(i, &s)| key(s, i))
                .collect();
            smallest_sorted(&mut keys, count);
            Ok(keys[..count]
                .iter()
                .map(|&(_, i)| i as usize)
                .filter(|&i| selection.evictable(i))
                .collect())
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
            let mut keys: Vec<(u64, u64)> = (0..n)
                .filter(|&i| selection.evictable(i))
                .map(|i| key(selection.scores[i], i))
                .collect();
            let freed = |keys: &[(u64, u64)]| -> u128 {
                keys.iter().map(|&(_, i)| tokens[i as usize] as u128).sum()
            };
            // Grow a candidate prefix until it holds enough tokens (or everything), then sort
            // only that prefix and cut it where the target is met.
            let mean = (freed(&keys) / keys.len().max(1) as u128).max(1);
            let mut k = ((u128::from(target) / mean) as usize)
                .saturating_mul(2)
                .max(64)
                .min(keys.len());
            loop {
                if k < keys.len() {
                    keys.select_nth_unstable(k - 1);
                }
                if k == keys.len() || freed(&keys[..k]) >= u128::from(target) {
                    break;
                }
                k = k.saturating_mul(2).min(keys.len());
            }
            keys[..k].sort_unstable();
            let mut total = 0u128;
            let mut out = Vec::new();
            for &(_, i) in &keys[..k] {
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
