//! Linear-time counts of long pieces: the backtracking encoder of the `bpe` crate, with the
//! compatibility test of token pairs that the run tables (`runs.rs`) also rest on.

use std::cell::RefCell;

use rustc_hash::FxHashMap;
use tiktoken_rs::Rank;

use super::pretokenize::SLOTS;
use super::trie::Trie;

/// Candidate tokens per byte the backtracking encoder may try before the heap merge takes over.
const BACKTRACK_TRIES_PER_BYTE: usize = 4;

/// Tries every piece may spend whatever its length: a short piece may need a few more per byte.
const BACKTRACK_MIN_TRIES: usize = 64;

/// 2^64 divided by the golden ratio, the multiplier of Fibonacci hashing.
const FIBONACCI_MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

/// The key of the token pair `(left, right)` in [`Backtrack`]'s merge table.
#[inline]
fn pair_key(left: Rank, right: Rank) -> u64 {
    (u64::from(left) << 32) | u64::from(right)
}

/// A direct-mapped cache of [`Backtrack::is_valid_pair`] answers: the same token pairs recur
/// along a long piece (a random string over a small alphabet repeats a few thousand pairs), and
/// an answer walks the merge trees of both tokens through a large hash table.
pub(super) struct PairCache {
    /// `(left << 33) | (right << 1) | valid` at the slot of the pair's hash; `u64::MAX`: empty.
    slots: Vec<u64>,
}

impl PairCache {
    /// 32k pairs (256 KiB): room for the few thousand pairs a long piece repeats.
    const SLOTS: usize = 1 << 15;

    /// An empty cache.
    pub(super) fn new() -> Self {
        Self {
            slots: vec![u64::MAX; Self::SLOTS],
        }
    }

    /// [`Backtrack::is_valid_pair`], from the cache when the pair was asked before.
    #[inline]
    pub(super) fn is_valid_pair(&mut self, backtrack: &Backtrack, left: Rank, right: Rank) -> bool {
        let key = (u64::from(left) << 33) | (u64::from(right) << 1);
        // Fibonacci hashing: the product's high bits depend on every bit of the key.
        let hash = (key.wrapping_mul(FIBONACCI_MULTIPLIER) >> 40) as usize & (Self::SLOTS - 1);
        let slot = self.slots[hash];
        if slot | 1 == key | 1 && slot != u64::MAX {
            return slot & 1 == 1;
        }
        let valid = backtrack.is_valid_pair(left, right);
        self.slots[hash] = key | u64::from(valid);
        valid
    }
}

thread_local! {
    /// One cache of compatible token pairs per thread and encoding, for [`Backtrack::count`].
    static PAIR_CACHES: RefCell<[Option<PairCache>; SLOTS]> = const { RefCell::new([const { None }; SLOTS]) };
}

/// Runs `f` with this thread's pair cache of the encoding in `slot`.
pub(super) fn with_pair_cache<R>(slot: usize, f: impl FnOnce(&mut PairCache) -> R) -> R {
    PAIR_CACHES.with(|caches| {
        let mut caches = caches.borrow_mut();
        f(caches[slot].get_or_insert_with(PairCache::new))
    })
}

/// Linear-time token counts of long pieces: the backtracking encoder of the `bpe` crate
/// (github/rust-gems, MIT; the algorithm behind `bpe-openai`), on tables built from this
/// vocabulary's ranks instead of that crate's serialized automata (which add ~50 MB).
///
/// The encoder walks left to right, appending the longest token that starts at the current
/// position if it is *compatible* with the previous token (byte-pair merging the two tokens'
/// bytes gives back exactly these two tokens); otherwise it tries the next shorter prefix token,
/// and when none is left it drops the previous token and retries that one's shorter prefixes. A
/// bit per byte position remembers positions from which no valid encoding continues, so each
/// position is abandoned at most once. For a vocabulary where every token byte-pair encodes to
/// itself (tested for all four), the result is the byte-pair merge result, i.e. `tiktoken`'s.
pub(super) struct Backtrack {
    /// The token trie.
    pub(super) trie: Trie,
    /// Byte length of each rank's token (0 for a rank that is not an ordinary token).
    pub(super) token_len: Vec<u32>,
    /// The longest token that is a proper prefix of each rank's token (`Rank::MAX`: none).
    next_prefix: Vec<Rank>,
    /// The two tokens each token was merged from (itself twice for a single byte).
    split: Vec<(Rank, Rank)>,
    /// The longest token's length in bytes.
    pub(super) max_len: usize,
    /// `(left << 32) | right` to the token the pair merges into, for every merge of `split`.
    pairs: FxHashMap<u64, Rank>,
}

impl Backtrack {
    /// The vocabulary's tokens indexed by rank (empty for a rank without a token).
    pub(super) fn tokens(ranks: &FxHashMap<Vec<u8>, Rank>) -> Vec<&[u8]> {
        let size = ranks.values().max().map_or(0, |&r| r as usize + 1);
        let mut tokens: Vec<&[u8]> = vec![&[]; size];
        for (bytes, &rank) in ranks {
            tokens[rank as usize] = bytes;
        }
        tokens
    }

    /// The tables of a vocabulary, built once per process on its first long piece.
    pub(super) fn new(ranks: &FxHashMap<Vec<u8>, Rank>) -> Self {
        let tokens = Self::tokens(ranks);
        let size = tokens.len();
        let mut this = Self {
            trie: Trie::new(&tokens, false),
            token_len: tokens.iter().map(|t| t.len() as u32).collect(),
            max_len: tokens.iter().map(|t| t.len()).max().unwrap_or(1),
            next_prefix: Vec::with_capacity(size),
            split: Vec::with_capacity(size),
            pairs: FxHashMap::default(),
        };
        for token in &tokens {
            let prefix = match token.len() {
                0 | 1 => Rank::MAX,
                n => this.longest_match(&token[..n - 1]).unwrap_or(Rank::MAX),
            };
            this.next_prefix.push(prefix);
        }
        // Each token's merge, recovered in rank order as the `bpe` crate does: the longest prefix
        // token whose rest is a token, both earlier, forming a compatible pair.
        for (id, token) in tokens.iter().enumerate() {
            let id = id as Rank;
            let mut left = this.next_prefix[id as usize];
            while left != Rank::MAX {
                let rest = &token[this.token_len[left as usize] as usize..];
                if let Some(&right) = ranks.get(rest)
                    && left < id
                    && right < id
                    && this.is_valid_pair(left, right)
                {
                    this.pairs.insert(pair_key(left, right), id);
                    this.split.push((left, right));
                    break;
                }
                left = this.next_prefix[left as usize];
            }
            if left == Rank::MAX {
                this.split.push((id, id));
            }
        }
        this
    }

    /// The child of trie `node` by `byte` (`u32::MAX`: none).
    #[inline]
    pub(super) fn child(&self, node: u32, byte: u8) -> u32 {
        self.trie.child(node, byte)
    }

    /// The longest token that `text` starts with.
    #[inline]
    pub(super) fn longest_match(&self, text: &[u8]) -> Option<Rank> {
        let (&first, rest) = text.split_first()?;
        let mut node = self.trie.root[first as usize];
        if node == u32::MAX {
            return None;
        }
        let mut best = self.trie.node_rank[node as usize];
        for &byte in rest {
            match self.child(node, byte) {
                u32::MAX => break,
                child => node = child,
            }
            let rank = self.trie.node_rank[node as usize];
            if rank != Rank::MAX {
                best = rank;
            }
        }
        (best != Rank::MAX).then_some(best)
    }

    /// Whether byte-pair merging the bytes of `left` then `right` keeps the boundary between
    /// them (the `bpe` crate's `is_valid_token_pair`): undo the later of the two tokens' merges
    /// step by step, failing if a merge across the boundary would come first.
    pub(super) fn is_valid_pair(&self, mut left: Rank, mut right: Rank) -> bool {
        let mut limit = Rank::MAX;
        loop {
            if let Some(&combined) = self.pairs.get(&pair_key(left, right))
                && combined < limit
            {
                return false;
            }
            if left > right {
                limit = left;
                left = self.split[left as usize].1;
                if left == limit {
                    limit = right + 1;
                    right = self.split[right as usize].0;
                    if right + 1 == limit {
                        return true;
                    }
                }
            } else {
                limit = right + 1;
                right = self.split[right as usize].0;
                if right + 1 == limit {
                    limit = left;
                    left = self.split[left as usize].1;
                    if left == limit {
                        return true;
                    }
                }
            }
        }
    }

    /// Number of tokens of `piece`, or `None` when the encoder gives up after
    /// [`BACKTRACK_TRIES_PER_BYTE`] candidate tokens per byte (long runs with many run-length
    /// tokens, such as `"=" * 10**6`, make it try each of them at many positions).
    pub(super) fn count(&self, piece: &[u8], pairs: &mut PairCache) -> Option<usize> {
        let mut budget = piece.len().saturating_mul(BACKTRACK_TRIES_PER_BYTE) + BACKTRACK_MIN_TRIES;
        // Bit `i` clear: no valid encoding of the rest starts at byte `i`.
        let mut open = vec![u64::MAX; (piece.len() + 1).div_ceil(64)];
        let is_open = |open: &[u64], i: usize| open[i / 64] & (1 << (i % 64)) != 0;
        // Tokens average three to four bytes on long pieces.
        let mut tokens: Vec<Rank> = Vec::with_capacity(piece.len() / 3);
        let mut pos = 0;
        let mut next = self.longest_match(piece);
        while let Some(mut token) = next {
            let last = tokens.last().copied();
            loop {
                budget = budget.checked_sub(1)?;
                let end = pos + self.token_len[token as usize] as usize;
                if is_open(&open, end) && last.is_none_or(|l| pairs.is_valid_pair(self, l, token)) {
                    tokens.push(token);
                    pos = end;
                    next = self.longest_match(&piece[end..]);
                    break;
                } else if self.next_prefix[token as usize] != Rank::MAX {
                    token = self.next_prefix[token as usize];
                } else {
                    open[pos / 64] &= !(1 << (pos % 64));
                    tokens.pop();
                    pos -= last.map_or(0, |l| self.token_len[l as usize] as usize);
                    next = last;
                    break;
                }
            }
        }
        Some(tokens.len())
    }
}
