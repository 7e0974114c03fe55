//! One encoding's vocabulary, its lazily built tables, and the choice of a counting algorithm
//! for each piece.

use std::sync::{LazyLock, OnceLock};

use rustc_hash::FxHashMap;
use tiktoken_rs::{CoreBPE, Rank};

use super::backtrack::{Backtrack, with_pair_cache};
use super::merge::{SMALL_PIECE, merge_count_large, merge_count_small};
use super::pretokenize::{Family, PreTokenizer};
use super::runs::{RunCounts, affixed_run, mostly_long_runs, single_byte_run};
use super::trie::Trie;
use crate::models::Encoding;

/// Upper bound of the ordinary ranks of every supported vocabulary.
const MAX_RANK: Rank = 200_000;

pub(super) struct Vocab {
    pub(super) bpe: &'static CoreBPE,
    /// Ordinary tokens (special tokens excluded) to their ranks.
    pub(super) ranks: FxHashMap<Vec<u8>, Rank>,
    pub(super) pretokenizer: PreTokenizer,
    /// Slot of this vocabulary's caches in the thread-local cache arrays.
    pub(super) slot: usize,
    /// The tables of the linear counter of long pieces, built on the first long piece.
    backtrack: OnceLock<Backtrack>,
    /// The trie of the reversed tokens, built on the first piece with several long runs.
    reverse: OnceLock<Trie>,
    /// Counts of runs of one repeated byte, per byte, built on the first long run of that byte
    /// (`None`: the run's counts were not found periodic, see [`RunCounts::new`]).
    runs: [OnceLock<Option<RunCounts>>; 256],
}

impl Encoding {
    /// The parsed vocabulary, shared by every tokenizer of the process.
    pub(super) fn vocab(self) -> &'static Vocab {
        static CL100K: LazyLock<Vocab> =
            LazyLock::new(|| Vocab::new(tiktoken_rs::cl100k_base_singleton(), Family::Cl100k, 0));
        static O200K: LazyLock<Vocab> =
            LazyLock::new(|| Vocab::new(tiktoken_rs::o200k_base_singleton(), Family::O200k, 1));
        static P50K: LazyLock<Vocab> =
            LazyLock::new(|| Vocab::new(tiktoken_rs::p50k_base_singleton(), Family::Gpt2, 2));
        static R50K: LazyLock<Vocab> =
            LazyLock::new(|| Vocab::new(tiktoken_rs::r50k_base_singleton(), Family::Gpt2, 3));
        match self {
            Encoding::Cl100kBase => &CL100K,
            Encoding::O200kBase => &O200K,
            Encoding::P50kBase => &P50K,
            Encoding::R50kBase => &R50K,
        }
    }
}

impl Vocab {
    fn new(bpe: &'static CoreBPE, family: Family, slot: usize) -> Self {
        let specials = bpe.special_tokens();
        let mut ranks = FxHashMap::default();
        for rank in 0..MAX_RANK {
            if let Ok(bytes) = bpe.decode_bytes(&[rank])
                && !std::str::from_utf8(&bytes).is_ok_and(|s| specials.contains(s))
            {
                ranks.insert(bytes, rank);
            }
        }
        Self {
            bpe,
            ranks,
            pretokenizer: PreTokenizer::new(family, slot),
            slot,
            backtrack: OnceLock::new(),
            reverse: OnceLock::new(),
            runs: [const { OnceLock::new() }; 256],
        }
    }

    /// The counts of runs of `byte`, built on first use.
    pub(super) fn run_counts(&self, byte: u8) -> Option<&RunCounts> {
        self.runs[byte as usize]
            .get_or_init(|| RunCounts::new(&self.ranks, self.backtrack(), byte))
            .as_ref()
    }

    /// The tables of the backtracking counter, built on first use.
    pub(super) fn backtrack(&self) -> &Backtrack {
        self.backtrack.get_or_init(|| Backtrack::new(&self.ranks))
    }

    /// The trie of the reversed tokens, built on first use.
    pub(super) fn reverse_trie(&self) -> &Trie {
        self.reverse
            .get_or_init(|| Trie::new(&Backtrack::tokens(&self.ranks), true))
    }

    /// Tokens of a piece that is one long run of a byte with a short head and tail, if it is one.
    fn count_affixed_run(&self, piece: &[u8]) -> Option<usize> {
        let backtrack = self.backtrack();
        let run = affixed_run(piece, backtrack.max_len)?;
        self.run_counts(piece[run.start])?
            .count_affixed(&self.ranks, backtrack, piece, run)
    }

    /// Tokens of one piece, by the fastest algorithm that applies to it.
    #[inline]
    pub(super) fn piece_tokens(&self, piece: &[u8]) -> usize {
        if self.ranks.contains_key(piece) {
            1
        } else if piece.len() < SMALL_PIECE {
            merge_count_small(&self.ranks, piece)
        } else if let Some(run) = single_byte_run(piece).and_then(|b| self.run_counts(b)) {
            run.count(piece.len())
        } else if let Some(count) = self.count_affixed_run(piece) {
            count
        } else if mostly_long_runs(piece)
            && let Some(count) = self.count_with_runs(piece)
        {
            count
        } else {
            // Backtracking is fastest wherever it succeeds, also on pieces with a few long runs;
            // where it gives up (runs of a byte with many run tokens), the run recurrence, and
            // the heap merge for a piece without a long run.
            let backtrack = self.backtrack();
            with_pair_cache(self.slot, |cache| backtrack.count(piece, cache))
                .or_else(|| self.count_with_runs(piece))
                .unwrap_or_else(|| merge_count_large(&self.ranks, piece))
        }
    }
}
