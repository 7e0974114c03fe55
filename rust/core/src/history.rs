//! [`TokenHistory`]: the token-tracked FIFO of a conversation.
//!
//! Entries live in a ring buffer ([`VecDeque`]), so evicting k entries from the front costs O(k)
//! and never shifts the rest. Each entry carries the running total of the tokens pushed before it,
//! so the total is a subtraction and the eviction cut is found by a forward scan over the entries
//! that leave (O(k)), then moved to the next group boundary.
//!
//! Snapshots are O(1) markers (a few integers and a liveness token). While at least one snapshot
//! is alive, evicted entries are kept aside (moved, not copied) so a rollback can put them back;
//! once no live snapshot can reach them, [`TokenHistory::release_unreachable`] hands them back to
//! the caller to drop.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use crate::{Error, Result};

static NEXT_HISTORY_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Debug, Clone)]
struct Entry<T> {
    item: T,
    tokens: u64,
    /// Tokens pushed before this entry (in the current lineage of the history).
    cum_before: u64,
    starts_group: bool,
}

/// A restorable point in the life of one [`TokenHistory`]. Cheap to take and to keep: it holds no
/// payloads. Dropping it lets the history release the evicted entries it kept for it.
#[derive(Debug, Clone)]
pub struct Snapshot {
    history_id: u64,
    epoch: usize,
    head: u64,
    tail: u64,
    head_cum: u64,
    cum_end: u64,
    /// Held only so the history sees, through a weak reference, that this snapshot is alive.
    _alive: Arc<()>,
}

impl Snapshot {
    /// Number of entries the history held when the snapshot was taken.
    pub fn len(&self) -> usize {
        (self.tail - self.head) as usize
    }

    /// Whether the history was empty when the snapshot was taken.
    pub fn is_empty(&self) -> bool {
        self.tail == self.head
    }

    /// Token total of the history when the snapshot was taken.
    pub fn total_tokens(&self) -> u64 {
        self.cum_end - self.head_cum
    }
}

/// A FIFO of `(item, tokens, starts_group)` entries with a running token total.
///
/// A *group* is an entry pushed with `starts_group = true` together with the entries pushed after
/// it with `starts_group = false` (an assistant message with tool calls and its tool results).
/// Eviction drops whole groups, oldest first, and never splits one.
///
/// Sequence numbers: every entry has a position `seq` in the lineage of the history; live entries
/// are `head..tail`, kept evicted entries `head - kept.len()..head`.
#[derive(Debug)]
pub struct TokenHistory<T> {
    id: u64,
    entries: VecDeque<Entry<T>>,
    /// Evicted entries some live snapshot may restore; contiguous, ending at `head`.
    kept: VecDeque<Entry<T>>,
    head: u64,
    head_cum: u64,
    cum_end: u64,
    /// Tail after each rollback that discarded entries; a snapshot whose tail lies beyond one
    /// recorded after it can no longer be restored.
    truncations: Vec<u64>,
    snapshots: Vec<(u64, Weak<()>)>,
}

impl<T> Default for TokenHistory<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> TokenHistory<T> {
    /// An empty history.
    pub fn new() -> Self {
        Self {
            id: NEXT_HISTORY_ID.fetch_add(1, Ordering::Relaxed),
            entries: VecDeque::new(),
            kept: VecDeque::new(),
            head: 0,
            head_cum: 0,
            cum_end: 0,
            truncations: Vec::new(),
            snapshots: Vec::new(),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the history holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Sum of the tokens of the entries.
    pub fn total_tokens(&self) -> u64 {
        self.cum_end - self.head_cum
    }

    fn tail(&self) -> u64 {
        self.head + self.entries.len() as u64
    }

    /// Appends an entry. `starts_group = false` attaches it to the group of the previous entry.
    ///
    /// Fails (and changes nothing) only when the running total would overflow 64 bits.
    pub fn push(&mut self, item: T, tokens: u64, starts_group: bool) -> Result<()> {
        let cum_end = self
            .cum_end
            .checked_add(tokens)
            .ok_or(Error::Overflow("push"))?;
        self.entries.push_back(Entry {
            item,
            tokens,
            cum_before: self.cum_end,
            starts_group,
        });
        self.cum_end = cum_end;
        Ok(())
    }

    /// The entry at `index` (oldest is 0): its item, tokens and group flag.
    pub fn get(&self, index: usize) -> Option<(&T, u64, bool)> {
        self.entries
            .get(index)
            .map(|e| (&e.item, e.tokens, e.starts_group))
    }

    /// Iterates `(item, tokens, starts_group)` oldest first.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&T, u64, bool)> + '_ {
        self.entries
            .iter()
            .map(|e| (&e.item, e.tokens, e.starts_group))
    }

    /// How many entries [`evict`](Self::evict) would remove with these arguments, without
    /// removing them. Same validation and errors as `evict`.
    pub fn plan_evict(
        &self,
        max_tokens: u64,
        overhead: u64,
        low_watermark: Option<u64>,
    ) -> Result<usize> {
        if let Some(low_watermark) = low_watermark
            && low_watermark > max_tokens
        {
            return Err(Error::WatermarkAboveMax {
                low_watermark,
                max_tokens,
            });
        }
        let total = self.total_tokens();
        if u128::from(total) + u128::from(overhead) <= u128::from(max_tokens) {
            return Ok(0);
        }
        let target = low_watermark.unwrap_or(max_tokens);
        let Some(allowed) = target.checked_sub(overhead) else {
            return Ok(self.entries.len());
        };
        // Here total > allowed, so the threshold is above the first entry's running total and
        // at least one entry goes. Smallest i whose suffix fits: cum_end - cum_before(i) <= allowed.
        // A forward scan touches only the entries that will be evicted (plus the rest of the
        // last group), so its cost is O(k) and stays in cache whatever the length of the
        // history; a binary search over the whole buffer would cost O(log n) cache misses.
        let threshold = self.cum_end - allowed;
        let mut entries = self.entries.iter().enumerate();
        let first_fit = entries
            .by_ref()
            .find(|(_, e)| e.cum_before >= threshold)
            .map_or(self.entries.len(), |(i, _)| i);
        let cut = (first_fit..self.entries.len())
            .find(|&i| self.entries[i].starts_group)
            .unwrap_or(self.entries.len());
        Ok(cut)
    }

    fn live_snapshot_floor(&mut self) -> Option<u64> {
        self.snapshots.retain(|(_, alive)| alive.strong_count() > 0);
        self.snapshots.iter().map(|&(head, _)| head).min()
    }

    /// Removes entries [0, count) from the front, keeping aside those a live snapshot may need.
    fn pop_front(&mut self, count: usize) -> Vec<T>
    where
        T: Clone,
    {
        let floor = self.live_snapshot_floor();
        let mut out = Vec::with_capacity(count);
        for entry in self.entries.drain(..count) {
            let seq = self.head;
            self.head += 1;
            self.head_cum += entry.tokens;
            match floor {
                Some(floor) if seq >= floor => {
                    out.push(entry.item.clone());
                    self.kept.push_back(entry);
                }
                _ => out.push(entry.item),
            }
        }
        out
    }

    /// Drops the oldest whole groups until `total + overhead <= target`, where the target is
    /// `low_watermark` when given (it must not exceed `max_tokens`) and `max_tokens` otherwise.
    /// Nothing is evicted while `total + overhead <= max_tokens`. If `overhead` alone exceeds the
    /// target, everything is evicted. Returns the evicted items, oldest first.
    ///
    /// Cost: O(k) for the k entries removed, independent of the length of the history.
    pub fn evict(
        &mut self,
        max_tokens: u64,
        overhead: u64,
        low_watermark: Option<u64>,
    ) -> Result<Vec<T>>
    where
        T: Clone,
    {
        let count = self.plan_evict(max_tokens, overhead, low_watermark)?;
        Ok(self.pop_front(count))
    }

    /// Removes every entry and returns the removed items (so the caller decides where they are
    /// dropped). A rollback to a snapshot taken before restores them.
    pub fn clear(&mut self) -> Vec<T>
    where
        T: Clone,
    {
        let all = self.entries.len();
        let mut removed = self.pop_front(all);
        removed.extend(self.release_unreachable());
        removed
    }

    /// Marks the current state so [`rollback`](Self::rollback) can restore it.
    pub fn snapshot(&mut self) -> Snapshot {
        let alive = Arc::new(());
        self.snapshots.retain(|(_, alive)| alive.strong_count() > 0);
        self.snapshots.push((self.head, Arc::downgrade(&alive)));
        Snapshot {
            history_id: self.id,
            epoch: self.truncations.len(),
            head: self.head,
            tail: self.tail(),
            head_cum: self.head_cum,
            cum_end: self.cum_end,
            _alive: alive,
        }
    }

    /// Checks that `snapshot` can be restored, without changing anything.
    pub fn check_snapshot(&self, snapshot: &Snapshot) -> Result<()> {
        if snapshot.history_id != self.id {
            return Err(Error::ForeignSnapshot);
        }
        if self.truncations[snapshot.epoch..]
            .iter()
            .any(|&tail| tail < snapshot.tail)
        {
            return Err(Error::SnapshotUnreachable(
                "a later rollback discarded entries it contains",
            ));
        }
        let kept_from = self.head - self.kept.len() as u64;
        if snapshot.head < kept_from {
            // Cannot happen while the snapshot is alive (its entries are kept); defensive.
            return Err(Error::SnapshotUnreachable(
                "entries it contains were released",
            ));
        }
        Ok(())
    }

    /// Restores exactly the state at `snapshot`: entries pushed since are discarded, entries
    /// evicted since come back. Returns the discarded items (the caller drops them).
    ///
    /// Errors, with nothing changed: [`Error::ForeignSnapshot`] for a snapshot of another history,
    /// [`Error::SnapshotUnreachable`] when a rollback to an older snapshot discarded what it held.
    pub fn rollback(&mut self, snapshot: &Snapshot) -> Result<Vec<T>> {
        self.check_snapshot(snapshot)?;
        let mut discarded = Vec::new();
        // 1. Discard what was pushed after the snapshot (live entries first, then kept ones).
        if self.tail() > snapshot.tail {
            while self.tail() > snapshot.tail {
                let entry = match self.entries.pop_back() {
                    Some(entry) => entry,
                    None => {
                        self.head -= 1;
                        self.kept
                            .pop_back()
                            .expect("kept entries cover the snapshot")
                    }
                };
                discarded.push(entry.item);
            }
            discarded.reverse();
            self.truncations.push(snapshot.tail);
        }
        // 2. Move the head to where it was: bring back evicted entries, or evict again.
        while self.head > snapshot.head {
            let entry = self
                .kept
                .pop_back()
                .expect("kept entries cover the snapshot");
            self.entries.push_front(entry);
            self.head -= 1;
        }
        while self.head < snapshot.head {
            let entry = self.entries.pop_front().expect("snapshot head within tail");
            self.kept.push_back(entry);
            self.head += 1;
        }
        self.head_cum = snapshot.head_cum;
        self.cum_end = snapshot.cum_end;
        Ok(discarded)
    }

    /// Releases the evicted entries that no live snapshot can restore any more, returning their
    /// items so the caller decides where they are dropped (a Python frontend drops them after
    /// releasing its lock, since dropping may run arbitrary finalizers).
    pub fn release_unreachable(&mut self) -> Vec<T> {
        let floor = self.live_snapshot_floor().unwrap_or(self.head);
        let kept_from = self.head - self.kept.len() as u64;
        let release = floor.saturating_sub(kept_from).min(self.kept.len() as u64) as usize;
        if self.snapshots.is_empty() {
            self.truncations.clear();
        }
        self.kept.drain(..release).map(|e| e.item).collect()
    }

    /// Number of evicted entries currently kept for live snapshots.
    pub fn kept_for_snapshots(&self) -> usize {
        self.kept.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items<T: Clone>(h: &TokenHistory<T>) -> Vec<T> {
        h.iter().map(|(item, _, _)| item.clone()).collect()
    }

    #[test]
    fn evicts_nothing_when_it_fits() {
        let mut h = TokenHistory::new();
        h.push(1, 10, true).unwrap();
        h.push(2, 10, true).unwrap();
        assert!(h.evict(20, 0, None).unwrap().is_empty());
        assert!(h.evict(25, 5, Some(0)).unwrap().is_empty());
        assert_eq!(h.total_tokens(), 20);
    }

    #[test]
    fn evicts_whole_groups_oldest_first() {
        let mut h = TokenHistory::new();
        h.push("u1", 5, true).unwrap();
        h.push("call", 3, true).unwrap();
        h.push("result", 30, false).unwrap();
        h.push("u2", 5, true).unwrap();
        // total 43 > 40: dropping u1 gives 38, fits.
        assert_eq!(h.evict(40, 0, None).unwrap(), vec!["u1"]);
        // 38 + 10 > 40: the call group must go whole.
        assert_eq!(h.evict(40, 10, None).unwrap(), vec!["call", "result"]);
        assert_eq!(items(&h), vec!["u2"]);
        assert_eq!(h.total_tokens(), 5);
    }

    #[test]
    fn low_watermark_evicts_deeper() {
        let mut h = TokenHistory::new();
        for i in 0..10 {
            h.push(i, 10, true).unwrap();
        }
        assert_eq!(h.evict(99, 0, Some(50)).unwrap(), vec![0, 1, 2, 3, 4]);
        assert_eq!(h.total_tokens(), 50);
        assert_eq!(
            h.evict(10, 0, Some(11)),
            Err(Error::WatermarkAboveMax {
                low_watermark: 11,
                max_tokens: 10
            })
        );
        assert_eq!(h.len(), 5);
    }

    #[test]
    fn overhead_above_target_evicts_everything() {
        let mut h = TokenHistory::new();
        h.push('a', 1, true).unwrap();
        h.push('b', 0, true).unwrap();
        assert_eq!(h.evict(10, 11, None).unwrap(), vec!['a', 'b']);
        assert!(h.is_empty());
        assert_eq!(h.total_tokens(), 0);
    }

    #[test]
    fn rollback_restores_evicted_and_discards_pushed() {
        let mut h = TokenHistory::new();
        for i in 0..5 {
            h.push(i, 10, i % 2 == 0).unwrap();
        }
        let snap = h.snapshot();
        assert_eq!(h.evict(25, 0, None).unwrap(), vec![0, 1, 2, 3]);
        h.push(9, 7, true).unwrap();
        assert_eq!(h.kept_for_snapshots(), 4);
        assert_eq!(h.rollback(&snap).unwrap(), vec![9]);
        assert_eq!(items(&h), vec![0, 1, 2, 3, 4]);
        assert_eq!(h.total_tokens(), 50);
        drop(snap);
        h.evict(0, 0, None).unwrap();
        assert_eq!(h.release_unreachable().len(), 0);
        assert_eq!(h.kept_for_snapshots(), 0);
    }

    #[test]
    fn snapshot_of_another_history_is_rejected() {
        let mut a = TokenHistory::new();
        let mut b = TokenHistory::<u8>::new();
        a.push(1u8, 1, true).unwrap();
        let snap = b.snapshot();
        assert_eq!(a.rollback(&snap), Err(Error::ForeignSnapshot));
        assert_eq!(a.len(), 1);
    }

    #[test]
    fn snapshot_after_discarded_branch_is_unreachable() {
        let mut h = TokenHistory::new();
        h.push(1, 1, true).unwrap();
        let s1 = h.snapshot();
        h.push(2, 1, true).unwrap();
        let s2 = h.snapshot();
        h.rollback(&s1).unwrap();
        h.push(3, 1, true).unwrap();
        assert!(matches!(
            h.rollback(&s2),
            Err(Error::SnapshotUnreachable(_))
        ));
        assert_eq!(items(&h), vec![1, 3]);
        h.rollback(&s1).unwrap();
        assert_eq!(items(&h), vec![1]);
    }

    #[test]
    fn rollback_forward_to_a_later_snapshot_on_the_same_branch() {
        let mut h = TokenHistory::new();
        for i in 0..4 {
            h.push(i, 1, true).unwrap();
        }
        let s1 = h.snapshot();
        h.evict(2, 0, None).unwrap();
        let s2 = h.snapshot();
        h.rollback(&s1).unwrap();
        assert_eq!(items(&h), vec![0, 1, 2, 3]);
        h.rollback(&s2).unwrap();
        assert_eq!(items(&h), vec![2, 3]);
        assert_eq!(h.total_tokens(), 2);
    }

    #[test]
    fn clear_then_rollback() {
        let mut h = TokenHistory::new();
        h.push("a", 3, true).unwrap();
        let snap = h.snapshot();
        assert_eq!(h.clear(), vec!["a"]);
        assert_eq!(h.total_tokens(), 0);
        h.rollback(&snap).unwrap();
        assert_eq!(items(&h), vec!["a"]);
        drop(snap);
        assert_eq!(h.clear(), vec!["a"]);
    }

    #[test]
    fn push_overflow_changes_nothing() {
        let mut h = TokenHistory::new();
        h.push(1, u64::MAX, true).unwrap();
        assert_eq!(h.push(2, 1, true), Err(Error::Overflow("push")));
        assert_eq!(h.len(), 1);
        assert_eq!(h.total_tokens(), u64::MAX);
    }
}
