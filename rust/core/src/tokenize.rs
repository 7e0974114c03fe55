//! Exact token counting, identical to OpenAI's `tiktoken` `encode_ordinary`.
//!
//! Vocabularies come from `tiktoken-rs` (compiled into the crate, nothing downloaded) and are
//! parsed once per process. Encoding and decoding use `tiktoken-rs` directly. Counting takes a
//! faster path that gives the same numbers without materializing ids:
//!
//! 1. The text is split into pieces by the encoding's pattern compiled with the `regex` crate
//!    instead of `fancy-regex`. The patterns' only lookaround, `\s+(?!\S)`, is rewritten as `\s+`
//!    followed by a fix-up: a whitespace run of two or more characters followed by a non-space
//!    character gives its last character to the next piece (exactly what the backtracking of
//!    `\s+(?!\S)` does). The possessive quantifiers of the patterns never change what matches
//!    there, so they are dropped.
//! 2. A piece that is itself a token counts 1 (one hash lookup, the common case); otherwise the
//!    byte-pair merges run on the piece and only the number of parts is kept. Short pieces run
//!    `tiktoken`'s merge loop on the stack. Long ones rest on the prefix property of byte-pair
//!    encoding (the `bpe` crate's basis, see `RunCounts`): a run of one byte (`"=" * 10**6`
//!    is one piece) is counted in O(1) from a per-byte table and the period of its counts; a
//!    piece with a run of `LONG_RUN` (32) bytes or more, whatever surrounds it, follows the prefix
//!    recurrence and skips each long run by its table (`Vocab::count_with_runs`); any other
//!    long piece runs the linear backtracking encoder of the `bpe` crate ([`Backtrack`]).
//!
//! Differential tests hold the counts to Python `tiktoken` and to `tiktoken-rs`.

use std::cell::RefCell;
use std::sync::{LazyLock, OnceLock};

use rayon::prelude::*;
use regex::Regex;
use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::{Anchored, Input, MatchKind};
use rustc_hash::FxHashMap;
use tiktoken_rs::{CoreBPE, Rank};

use crate::image::ImagePricing;
use crate::{Error, Result};

/// The byte-pair encodings with public vocabularies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// GPT-4, GPT-3.5-turbo, text-embedding-3-*.
    Cl100kBase,
    /// GPT-4o, GPT-4.1, GPT-5, o1/o3/o4.
    O200kBase,
    /// Codex and text-davinci-002/003.
    P50kBase,
    /// GPT-3 (davinci, curie, ...) and GPT-2.
    R50kBase,
}

const PATTERN_GPT2: &str = r"'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+$|\s+";
const PATTERN_CL100K: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s+$|\s*[\r\n]|\s+";
const PATTERN_O200K: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"|\s*[\r\n]+",
    r"|\s+",
);

/// Exact model names, then name prefixes (dated and fine-tuned variants), as Python `tiktoken`
/// maps them. Encodings that differ from a base one only by special tokens map to the base one,
/// since ordinary text counts the same.
const MODELS: &[(&str, Encoding)] = &[
    ("o1", Encoding::O200kBase),
    ("o3", Encoding::O200kBase),
    ("o4-mini", Encoding::O200kBase),
    ("gpt-5", Encoding::O200kBase),
    ("gpt-4.1", Encoding::O200kBase),
    ("gpt-4o", Encoding::O200kBase),
    ("gpt-4", Encoding::Cl100kBase),
    ("gpt-3.5-turbo", Encoding::Cl100kBase),
    ("gpt-3.5", Encoding::Cl100kBase),
    ("gpt-35-turbo", Encoding::Cl100kBase),
    ("davinci-002", Encoding::Cl100kBase),
    ("babbage-002", Encoding::Cl100kBase),
    ("text-embedding-ada-002", Encoding::Cl100kBase),
    ("text-embedding-3-small", Encoding::Cl100kBase),
    ("text-embedding-3-large", Encoding::Cl100kBase),
    ("text-davinci-003", Encoding::P50kBase),
    ("text-davinci-002", Encoding::P50kBase),
    ("text-davinci-001", Encoding::R50kBase),
    ("text-curie-001", Encoding::R50kBase),
    ("text-babbage-001", Encoding::R50kBase),
    ("text-ada-001", Encoding::R50kBase),
    ("davinci", Encoding::R50kBase),
    ("curie", Encoding::R50kBase),
    ("babbage", Encoding::R50kBase),
    ("ada", Encoding::R50kBase),
    ("code-davinci-002", Encoding::P50kBase),
    ("code-davinci-001", Encoding::P50kBase),
    ("code-cushman-002", Encoding::P50kBase),
    ("code-cushman-001", Encoding::P50kBase),
    ("davinci-codex", Encoding::P50kBase),
    ("cushman-codex", Encoding::P50kBase),
    ("text-davinci-edit-001", Encoding::P50kBase),
    ("code-davinci-edit-001", Encoding::P50kBase),
    ("gpt2", Encoding::R50kBase),
    ("gpt-2", Encoding::R50kBase),
];

const MODEL_PREFIXES: &[(&str, Encoding)] = &[
    ("o1-", Encoding::O200kBase),
    ("o3-", Encoding::O200kBase),
    ("o4-mini-", Encoding::O200kBase),
    ("gpt-5", Encoding::O200kBase),
    ("gpt-4.5-", Encoding::O200kBase),
    ("gpt-4.1-", Encoding::O200kBase),
    ("chatgpt-4o-", Encoding::O200kBase),
    ("gpt-4o-", Encoding::O200kBase),
    ("gpt-4-", Encoding::Cl100kBase),
    ("gpt-3.5-turbo-", Encoding::Cl100kBase),
    ("gpt-35-turbo-", Encoding::Cl100kBase),
    ("gpt-oss-", Encoding::O200kBase),
    ("ft:gpt-4o", Encoding::O200kBase),
    ("ft:gpt-4", Encoding::Cl100kBase),
    ("ft:gpt-3.5-turbo", Encoding::Cl100kBase),
    ("ft:davinci-002", Encoding::Cl100kBase),
    ("ft:babbage-002", Encoding::Cl100kBase),
];

/// A model name, then what follows each provider prefix in it (`openai:gpt-4o` gives itself
/// and `gpt-4o`; `us.anthropic.claude-opus-4-1-v1:0` gives `anthropic.claude-...`,
/// `claude-...` and `0`), the order in which model tables are searched.
pub fn model_names(model: &str) -> impl Iterator<Item = &str> {
    std::iter::once(model).chain(
        model
            .match_indices([':', '/', '.'])
            .map(move |(at, _)| &model[at + 1..]),
    )
}

impl Encoding {
    /// Every supported encoding.
    pub const ALL: [Encoding; 4] = [
        Encoding::Cl100kBase,
        Encoding::O200kBase,
        Encoding::P50kBase,
        Encoding::R50kBase,
    ];

    /// The encoding's name as `tiktoken` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Cl100kBase => "cl100k_base",
            Encoding::O200kBase => "o200k_base",
            Encoding::P50kBase => "p50k_base",
            Encoding::R50kBase => "r50k_base",
        }
    }

    /// Looks an encoding up by name; the error lists the known names.
    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|e| e.name() == name)
            .ok_or_else(|| Error::UnknownEncoding {
                name: name.to_owned(),
                known: Self::ALL.map(Encoding::name).join(", "),
            })
    }

    /// The encoding of an OpenAI model (`gpt-4o`, `gpt-4o-2024-08-06`, `gpt-4.1-mini`, `o3-mini`,
    /// `gpt-4`, `text-embedding-3-small`, ..., also after a provider's prefix such as `openai:`);
    /// the error lists the known names.
    pub fn for_model(model: &str) -> Result<Self> {
        for name in model_names(model) {
            if let Some(&(_, encoding)) = MODELS.iter().find(|(known, _)| *known == name) {
                return Ok(encoding);
            }
            if let Some(&(_, encoding)) = MODEL_PREFIXES
                .iter()
                .find(|(prefix, _)| name.starts_with(prefix))
            {
                return Ok(encoding);
            }
        }
        let mut known: Vec<&str> = MODELS.iter().map(|(name, _)| *name).collect();
        known.extend(MODEL_PREFIXES.iter().map(|(prefix, _)| *prefix));
        Err(Error::UnknownModel {
            name: model.to_owned(),
            known: known.join(", "),
        })
    }

    fn vocab(self) -> &'static Vocab {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Gpt2,
    Cl100k,
    O200k,
}

/// Upper bound of the ordinary ranks of every supported vocabulary.
const MAX_RANK: Rank = 200_000;

struct Vocab {
    bpe: &'static CoreBPE,
    ranks: FxHashMap<Vec<u8>, Rank>,
    /// The split pattern as a lazy DFA, searched anchored at each piece start: one forward
    /// pass per piece, no reverse search for the start (which is known).
    dfa: DFA,
    /// The same pattern for the rare case the lazy DFA gives up (it never should: the patterns
    /// have no Unicode word boundary and the cache is never capped).
    splitter: Regex,
    family: Family,
    /// Slot of this vocabulary's DFA cache in the thread-local [`DFA_CACHES`].
    slot: usize,
    /// The tables of the linear counter of long pieces, built on the first long piece.
    backtrack: OnceLock<Backtrack>,
    /// The trie of the reversed tokens, built on the first piece with several long runs.
    reverse: OnceLock<Trie>,
    /// Counts of runs of one repeated byte, per byte, built on the first long run of that byte
    /// (`None`: the run's counts were not found periodic within [`RUN_TABLE_LIMIT`] bytes).
    runs: [OnceLock<Option<RunCounts>>; 256],
}

thread_local! {
    /// One lazy-DFA cache per thread and encoding (a cache belongs to one DFA).
    static DFA_CACHES: RefCell<[Option<Cache>; 4]> = const { RefCell::new([None, None, None, None]) };
    /// One cache of compatible token pairs per thread and encoding, for [`Backtrack::count`].
    static PAIR_CACHES: RefCell<[Option<PairCache>; 4]> = const { RefCell::new([None, None, None, None]) };
}

/// A direct-mapped cache of [`Backtrack::is_valid_pair`] answers: the same token pairs recur
/// along a long piece (a random string over a small alphabet repeats a few thousand pairs), and
/// an answer walks the merge trees of both tokens through a large hash table.
struct PairCache {
    /// `(left << 33) | (right << 1) | valid` at the slot of the pair's hash; `u64::MAX`: empty.
    slots: Vec<u64>,
}

impl PairCache {
    const SLOTS: usize = 1 << 15;

    fn new() -> Self {
        Self {
            slots: vec![u64::MAX; Self::SLOTS],
        }
    }

    #[inline]
    fn is_valid_pair(&mut self, backtrack: &Backtrack, left: Rank, right: Rank) -> bool {
        let key = (u64::from(left) << 33) | (u64::from(right) << 1);
        let hash = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize & (Self::SLOTS - 1);
        let slot = self.slots[hash];
        if slot | 1 == key | 1 && slot != u64::MAX {
            return slot & 1 == 1;
        }
        let valid = backtrack.is_valid_pair(left, right);
        self.slots[hash] = key | u64::from(valid);
        valid
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
        let pattern = match family {
            Family::Gpt2 => PATTERN_GPT2,
            Family::Cl100k => PATTERN_CL100K,
            Family::O200k => PATTERN_O200K,
        };
        let splitter = Regex::new(pattern).expect("the encoding patterns are valid");
        let dfa = DFA::builder()
            .configure(
                DFA::config()
                    .match_kind(MatchKind::LeftmostFirst)
                    .cache_capacity(8 << 20)
                    .minimum_cache_clear_count(None),
            )
            .build(pattern)
            .expect("the encoding patterns compile to a lazy DFA");
        Self {
            bpe,
            ranks,
            dfa,
            splitter,
            family,
            slot,
            backtrack: OnceLock::new(),
            reverse: OnceLock::new(),
            runs: [const { OnceLock::new() }; 256],
        }
    }

    /// The counts of runs of `byte`, built on first use.
    fn run_counts(&self, byte: u8) -> Option<&RunCounts> {
        self.runs[byte as usize]
            .get_or_init(|| RunCounts::new(&self.ranks, self.backtrack(), byte))
            .as_ref()
    }

    fn backtrack(&self) -> &Backtrack {
        self.backtrack.get_or_init(|| Backtrack::new(&self.ranks))
    }

    /// End of the piece starting at `start` (the pattern matches at every position).
    #[inline]
    fn piece_end(&self, cache: &mut Cache, text: &str, start: usize) -> usize {
        let input = Input::new(text).range(start..).anchored(Anchored::Yes);
        match self.dfa.try_search_fwd(cache, &input) {
            Ok(Some(end)) if end.offset() > start => end.offset(),
            _ => self
                .splitter
                .find_at(text, start)
                .expect("every position starts a piece")
                .end(),
        }
    }

    /// Calls `f` on each piece of `text`, in order, as `tiktoken`'s pattern splits it.
    #[inline]
    fn for_each_piece<'t>(&self, text: &'t str, mut f: impl FnMut(&'t str)) {
        DFA_CACHES.with(|caches| {
            let mut caches = caches.borrow_mut();
            let cache = caches[self.slot].get_or_insert_with(|| self.dfa.create_cache());
            let mut start = 0;
            while start < text.len() {
                let mut end = self.piece_end(cache, text, start);
                if end < text.len() {
                    // `\s+(?!\S)`: a whitespace run followed by a non-space character leaves its
                    // last character to the next piece. Only the whitespace alternatives end a
                    // match with a white-space character that is not a newline (cl100k, o200k)
                    // or at all (gpt2).
                    let piece = &text[start..end];
                    let mut chars = piece.chars();
                    let last = chars.next_back().expect("pieces are not empty");
                    if last.is_whitespace()
                        && (self.family == Family::Gpt2 || (last != '\n' && last != '\r'))
                        && chars.next().is_some()
                    {
                        end -= last.len_utf8();
                    }
                }
                f(&text[start..end]);
                start = end;
            }
        });
    }

    /// Tokens of a piece that is one long run of a byte with a short head and tail, if it is one.
    fn count_affixed_run(&self, piece: &[u8]) -> Option<usize> {
        let backtrack = self.backtrack();
        let run = affixed_run(piece, backtrack.max_len)?;
        self.run_counts(piece[run.start])?
            .count_affixed(&self.ranks, backtrack, piece, run)
    }

    /// Tokens of a piece with runs of one byte (any number of them, anywhere): the prefix
    /// recurrence of [`RunCounts`] at every position. Inside a run of at least [`SHORT_RUN`]
    /// bytes the tokens ending at a position are run tokens, checked with the run's `valid`
    /// table, or (in its first bytes) tokens reaching into it from before; deep in a run, once
    /// the window equals one of the table's, the run is skipped to its end. Elsewhere the tokens
    /// ending at a position come from a walk of the reversed-token trie. `None` when the piece
    /// has no run of [`LONG_RUN`] bytes (backtracking is faster there).
    fn count_with_runs(&self, piece: &[u8]) -> Option<usize> {
        const NOT_A_RUN: u8 = u8::MAX;
        let backtrack = self.backtrack();
        let max_len = backtrack.max_len;
        let mut runs: Vec<(std::ops::Range<usize>, &RunCounts)> = Vec::new();
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
        let reverse = self
            .reverse
            .get_or_init(|| Trie::new(&Backtrack::tokens(&self.ranks), true));
        let n = piece.len();
        let mut last: Vec<Rank> = vec![Rank::MAX; n + 1];
        let mut last_run: Vec<u8> = vec![NOT_A_RUN; n + 1];
        let mut counts: Vec<u32> = vec![0; n + 1];
        let mut steps: Vec<i64> = Vec::new();
        let mut candidates: Vec<(usize, Rank)> = Vec::new();
        // Nodes of the reversed trie after `k` bytes of the run `run_nodes_of` (`u32::MAX`: none).
        let mut run_nodes: Vec<u32> = Vec::with_capacity(max_len + 1);
        let mut run_nodes_of = usize::MAX;
        PAIR_CACHES.with(|caches| {
            let mut caches = caches.borrow_mut();
            let pairs = caches[self.slot].get_or_insert_with(PairCache::new);
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
                        // Deep in the run, every 32 positions: if the window equals one of the
                        // table's, the run repeats the table from there to its end.
                        let at = i - 1;
                        if at >= range.start + max_len + table.longest
                            && (at - range.start) % 32 == 0
                            && i + max_len + 64 < range.end
                        {
                            let window = at + 1 - table.longest..=at;
                            if last_run[window.clone()].iter().all(|&x| x != NOT_A_RUN) {
                                steps.clear();
                                steps.extend(
                                    window
                                        .clone()
                                        .map(|j| i64::from(counts[j]) - i64::from(counts[j - 1])),
                                );
                                if let Some(p) = table.find_window((&last_run[window], &steps)) {
                                    let base = i64::from(counts[at]) - table.count(p) as i64;
                                    for t in range.end - max_len..=range.end {
                                        let q = p + t - at;
                                        let index = table.last[table.reduce(q)];
                                        last_run[t] = index;
                                        last[t] = table.runs[index as usize].1;
                                        counts[t] =
                                            u32::try_from(base + table.count(q) as i64).ok()?;
                                    }
                                    i = range.end;
                                    continue;
                                }
                            }
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

    #[inline]
    fn piece_tokens(&self, piece: &[u8]) -> usize {
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
            PAIR_CACHES
                .with(|caches| {
                    let mut caches = caches.borrow_mut();
                    let cache = caches[self.slot].get_or_insert_with(PairCache::new);
                    backtrack.count(piece, cache)
                })
                .or_else(|| self.count_with_runs(piece))
                .unwrap_or_else(|| merge_count_large(&self.ranks, piece))
        }
    }
}

/// Pieces shorter than this use the quadratic merge on the stack, as `tiktoken` does; longer ones
/// the linear [`Backtrack`] counter, so a run like `"a" * 1_000_000` costs O(n).
const SMALL_PIECE: usize = 100;

/// Number of tokens of `piece` (not itself a token, 2 <= len < [`SMALL_PIECE`]) after the
/// byte-pair merges: `tiktoken`'s `_byte_pair_merge`, keeping only the count.
fn merge_count_small(ranks: &FxHashMap<Vec<u8>, Rank>, piece: &[u8]) -> usize {
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
/// tests of [`Backtrack`] on long pieces, and its fallback where backtracking would be slower.
fn merge_count_large(ranks: &FxHashMap<Vec<u8>, Rank>, piece: &[u8]) -> usize {
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

/// A trie of the tokens (or of the reversed tokens), nodes numbered breadth first from the root
/// (node 0), so the children of a node are the consecutive nodes
/// `child_start[node]..child_start[node + 1]`: a lookup reads two flat arrays that mostly stay
/// in cache, instead of a large hash table.
struct Trie {
    child_start: Vec<u32>,
    /// The byte on the edge into each node (a node's children are in increasing byte order).
    labels: Vec<u8>,
    /// The root's children by byte (`u32::MAX`: none).
    root: [u32; 256],
    /// Rank of the token spelled by each node (`Rank::MAX`: a proper prefix only).
    node_rank: Vec<Rank>,
}

impl Trie {
    /// The trie of `tokens` (indexed by rank), read backwards if `reversed`.
    fn new(tokens: &[&[u8]], reversed: bool) -> Self {
        let mut children = FxHashMap::default();
        children.reserve(tokens.len() * 4);
        let mut node_rank = vec![Rank::MAX];
        for (rank, token) in tokens.iter().enumerate() {
            let mut node = 0u32;
            let mut step = |byte: u8| {
                let next = node_rank.len() as u32;
                node = *children
                    .entry((u64::from(node) << 8) | u64::from(byte))
                    .or_insert_with(|| {
                        node_rank.push(Rank::MAX);
                        next
                    });
            };
            if reversed {
                token.iter().rev().for_each(|&b| step(b));
            } else {
                token.iter().for_each(|&b| step(b));
            }
            if !token.is_empty() {
                node_rank[node as usize] = rank as Rank;
            }
        }
        // Renumber breadth first: the children of a node become consecutive, sorted by byte.
        let mut edges: Vec<(u64, u32)> = children.into_iter().collect();
        edges.sort_unstable_by_key(|&(key, _)| key);
        let nodes = node_rank.len();
        let mut edge_start = vec![0u32; nodes + 1];
        for &(key, _) in &edges {
            edge_start[(key >> 8) as usize + 1] += 1;
        }
        for i in 0..nodes {
            edge_start[i + 1] += edge_start[i];
        }
        let mut old_of_new: Vec<u32> = Vec::with_capacity(nodes);
        old_of_new.push(0);
        let mut labels = Vec::with_capacity(nodes);
        labels.push(0u8);
        let mut child_start = Vec::with_capacity(nodes + 1);
        let mut node = 0;
        while node < old_of_new.len() {
            child_start.push(old_of_new.len() as u32);
            let old = old_of_new[node] as usize;
            for &(key, child) in &edges[edge_start[old] as usize..edge_start[old + 1] as usize] {
                old_of_new.push(child);
                labels.push(key as u8);
            }
            node += 1;
        }
        child_start.push(old_of_new.len() as u32);
        let node_rank = old_of_new
            .iter()
            .map(|&old| node_rank[old as usize])
            .collect();
        let mut trie = Self {
            child_start,
            labels,
            root: [u32::MAX; 256],
            node_rank,
        };
        for byte in 0..=255u8 {
            trie.root[byte as usize] = trie.child(0, byte);
        }
        trie
    }

    /// The child of `node` by `byte` (`u32::MAX`: none).
    #[inline]
    fn child(&self, node: u32, byte: u8) -> u32 {
        let start = self.child_start[node as usize] as usize;
        let end = self.child_start[node as usize + 1] as usize;
        let labels = &self.labels[start..end];
        let index = if labels.len() <= 16 {
            labels.iter().position(|&label| label == byte)
        } else {
            labels.binary_search(&byte).ok()
        };
        index.map_or(u32::MAX, |i| (start + i) as u32)
    }
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
struct Backtrack {
    /// The token trie.
    trie: Trie,
    /// Byte length of each rank's token (0 for a rank that is not an ordinary token).
    token_len: Vec<u32>,
    /// The longest token that is a proper prefix of each rank's token (`Rank::MAX`: none).
    next_prefix: Vec<Rank>,
    /// The two tokens each token was merged from (itself twice for a single byte).
    split: Vec<(Rank, Rank)>,
    /// The longest token's length in bytes.
    max_len: usize,
    /// `(left << 32) | right` to the token the pair merges into, for every merge of `split`.
    pairs: FxHashMap<u64, Rank>,
}

impl Backtrack {
    /// The vocabulary's tokens indexed by rank (empty for a rank without a token).
    fn tokens(ranks: &FxHashMap<Vec<u8>, Rank>) -> Vec<&[u8]> {
        let size = ranks.values().max().map_or(0, |&r| r as usize + 1);
        let mut tokens: Vec<&[u8]> = vec![&[]; size];
        for (bytes, &rank) in ranks {
            tokens[rank as usize] = bytes;
        }
        tokens
    }

    fn new(ranks: &FxHashMap<Vec<u8>, Rank>) -> Self {
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
    fn child(&self, node: u32, byte: u8) -> u32 {
        self.trie.child(node, byte)
    }

    /// The longest token that `text` starts with.
    #[inline]
    fn longest_match(&self, text: &[u8]) -> Option<Rank> {
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
    fn is_valid_pair(&self, mut left: Rank, mut right: Rank) -> bool {
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
    fn count(&self, piece: &[u8], pairs: &mut PairCache) -> Option<usize> {
        let mut budget = piece.len().saturating_mul(BACKTRACK_TRIES_PER_BYTE) + 64;
        // Bit `i` clear: no valid encoding of the rest starts at byte `i`.
        let mut open = vec![u64::MAX; (piece.len() + 1).div_ceil(64)];
        let is_open = |open: &[u64], i: usize| open[i / 64] & (1 << (i % 64)) != 0;
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

/// The byte `piece` repeats, if it is one byte repeated.
#[inline]
fn single_byte_run(piece: &[u8]) -> Option<u8> {
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
struct RunCounts {
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
    runs: Vec<(usize, Rank)>,
    /// `valid[a * runs.len() + b]`: run token `a` followed by run token `b` is compatible.
    valid: Vec<bool>,
    /// `last[i]`: index in `runs` of the last token of `byte * i`, for `i <= i2`.
    last: Vec<u8>,
    /// `step[i]`: `count(i) - count(i - 1)`, for `i <= i2`.
    step: Vec<i64>,
    /// Positions `2 * longest <= i < i2` by the hash of their window (see [`window_hash`]).
    windows: FxHashMap<u64, Vec<usize>>,
    /// The longest run token's length, the window's length.
    longest: usize,
}

/// The hash of a window of the run recurrence: last tokens (as run indices) and count steps.
fn window_hash(window: (&[u8], &[i64])) -> u64 {
    let mut hasher = rustc_hash::FxHasher::default();
    std::hash::Hash::hash(&window, &mut hasher);
    std::hash::Hasher::finish(&hasher)
}

impl RunCounts {
    fn new(ranks: &FxHashMap<Vec<u8>, Rank>, backtrack: &Backtrack, byte: u8) -> Option<Self> {
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
    fn count(&self, n: usize) -> usize {
        if n < self.counts.len() {
            self.counts[n] as usize
        } else {
            let periods = (n - self.start) / self.period;
            self.counts[n - periods * self.period] as usize + periods * self.delta
        }
    }

    /// Tokens of `piece = head + byte * m + tail` (`run = head.len()..head.len() + m`, `m` at
    /// least the longest token, so no token spans the whole run): the same prefix recurrence as
    /// [`RunCounts::new`] at every position, with the tokens ending at a position enumerated
    /// from the structure of the piece. Inside the run, run tokens are checked with the `valid`
    /// table, so a position costs a few table reads. `None` if no token ending at a position is
    /// compatible (impossible for a vocabulary whose tokens merge to themselves).
    fn count_affixed(
        &self,
        ranks: &FxHashMap<Vec<u8>, Rank>,
        backtrack: &Backtrack,
        piece: &[u8],
        run: std::ops::Range<usize>,
    ) -> Option<usize> {
        const NOT_A_RUN: u8 = u8::MAX;
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
            // Deep in the run, every 32 positions: if the window equals one of the table's, the
            // rest of the run repeats the table from there, up to the tail.
            if i > head + 2 * self.longest
                && (i - 1 - head) % 32 == 0
                && i + backtrack.max_len + 64 < end
            {
                let at = i - 1;
                let window = at + 1 - self.longest..=at;
                if last_run[window.clone()].iter().all(|&r| r != NOT_A_RUN) {
                    steps.clear();
                    steps.extend(
                        window
                            .clone()
                            .map(|j| i64::from(counts[j]) - i64::from(counts[j - 1])),
                    );
                    if let Some(p) = self.find_window((&last_run[window], &steps)) {
                        let base = i64::from(counts[at]) - self.count(p) as i64;
                        for t in end - backtrack.max_len..=end {
                            let q = p + t - at;
                            let index = self.last[self.reduce(q)];
                            last_run[t] = index;
                            last[t] = self.runs[index as usize].1;
                            counts[t] = u32::try_from(base + self.count(q) as i64).ok()?;
                        }
                        i = end;
                        continue;
                    }
                }
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
fn affixed_run(piece: &[u8], min_run: usize) -> Option<std::ops::Range<usize>> {
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
fn mostly_long_runs(piece: &[u8]) -> bool {
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
const LONG_RUN: usize = 32;

/// Runs of at least this many bytes in a piece that [`Vocab::count_with_runs`] counts are
/// counted as runs (shorter ones as any text).
const SHORT_RUN: usize = 3;

/// Longest head and tail around a run that [`RunCounts::count_affixed`] takes.
const MAX_AFFIX: usize = 16;

/// Candidate tokens per byte the backtracking encoder may try before the heap merge takes over.
const BACKTRACK_TRIES_PER_BYTE: usize = 4;

#[inline]
fn pair_key(left: Rank, right: Rank) -> u64 {
    (u64::from(left) << 32) | u64::from(right)
}

/// An exact tokenizer of one [`Encoding`]. Cheap to create and to copy: the vocabulary is shared
/// by every tokenizer of the process. Thread-safe.
#[derive(Clone, Copy)]
pub struct Tokenizer {
    encoding: Encoding,
    vocab: &'static Vocab,
    /// How chat accounting prices images: the model's family, GPT-4o's by default.
    images: ImagePricing,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("encoding", &self.encoding.name())
            .finish()
    }
}

/// Below this many bytes in all, `count_many` stays on the calling thread.
const PARALLEL_MIN_BYTES: usize = 64 * 1024;

impl Tokenizer {
    /// The tokenizer of an encoding by name (`cl100k_base`, `o200k_base`, `p50k_base`,
    /// `r50k_base`).
    pub fn new(encoding: &str) -> Result<Self> {
        Ok(Self::from_encoding(Encoding::from_name(encoding)?))
    }

    /// The tokenizer of an OpenAI model name; chat accounting prices images as that model's
    /// family does ([`ImagePricing::for_model`]).
    pub fn for_model(model: &str) -> Result<Self> {
        Ok(Self::from_encoding(Encoding::for_model(model)?)
            .with_image_pricing(ImagePricing::for_model(model)))
    }

    /// This tokenizer with another image pricing for chat accounting.
    pub fn with_image_pricing(self, images: ImagePricing) -> Self {
        Self { images, ..self }
    }

    /// How chat accounting prices images.
    pub fn image_pricing(&self) -> ImagePricing {
        self.images
    }

    /// The tokenizer of an [`Encoding`]. The first call for an encoding parses its vocabulary.
    pub fn from_encoding(encoding: Encoding) -> Self {
        Self {
            encoding,
            vocab: encoding.vocab(),
            images: ImagePricing::DEFAULT,
        }
    }

    /// The encoding.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The encoding's name.
    pub fn name(&self) -> &'static str {
        self.encoding.name()
    }

    /// Number of tokens of `text`: `len(tiktoken.get_encoding(name).encode_ordinary(text))`.
    pub fn count(&self, text: &str) -> usize {
        let mut tokens = 0;
        self.vocab.for_each_piece(text, |piece| {
            tokens += self.vocab.piece_tokens(piece.as_bytes())
        });
        tokens
    }

    /// Counts of many texts, spread over the threads of the rayon pool when the input is large.
    /// Fails with [`Error::Overflow`] if a count does not fit in 32 bits.
    pub fn count_many<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Result<Vec<u32>> {
        let bytes: usize = texts.iter().map(|t| t.as_ref().len()).sum();
        let count = |text: &S| u32::try_from(self.count(text.as_ref()));
        let counts: std::result::Result<Vec<u32>, _> =
            if bytes < PARALLEL_MIN_BYTES || texts.len() < 2 {
                texts.iter().map(count).collect()
            } else {
                texts.par_iter().with_min_len(8).map(count).collect()
            };
        counts.map_err(|_| Error::Overflow("a count exceeds 2^32 - 1 tokens"))
    }

    /// A fast offline text embedding: the pieces of `text` (as split for this encoding) hashed
    /// into `dim` signed buckets, L2-normalized (all zeros for empty text). Near-duplicate texts
    /// (repeated status polls, retried commands) have a cosine near 1. Not a semantic model.
    pub fn embed(&self, text: &str, dim: usize) -> Vec<f32> {
        let mut vector = vec![0.0f32; dim];
        if dim == 0 {
            return vector;
        }
        self.vocab.for_each_piece(text, |piece| {
            let mut hasher = rustc_hash::FxHasher::default();
            std::hash::Hasher::write(&mut hasher, piece.as_bytes());
            let hash = std::hash::Hasher::finish(&hasher);
            let bucket = (hash % dim as u64) as usize;
            vector[bucket] += if hash >> 63 == 1 { -1.0 } else { 1.0 };
        });
        let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
        if norm > 0.0 {
            vector.iter_mut().for_each(|v| *v /= norm);
        }
        vector
    }

    /// [`embed`](Self::embed) of many texts, row-major `texts.len() x dim`, over the cores.
    pub fn embed_many<S: AsRef<str> + Sync>(&self, texts: &[S], dim: usize) -> Result<Vec<f32>> {
        if dim == 0 || dim > 1 << 16 {
            return Err(Error::InvalidArgument(format!(
                "dim must be in 1..=65536, got {dim}"
            )));
        }
        let len = texts.len().checked_mul(dim).ok_or_else(|| {
            Error::InvalidArgument(format!("{} texts x dim {dim} overflows", texts.len()))
        })?;
        let mut out = vec![0.0f32; len];
        out.par_chunks_mut(dim)
            .zip(texts.par_iter())
            .for_each(|(row, text)| row.copy_from_slice(&self.embed(text.as_ref(), dim)));
        Ok(out)
    }

    /// The pieces `text` is split into before the byte-pair merges (for inspection and tests).
    pub fn pieces<'t>(&self, text: &'t str) -> Vec<&'t str> {
        let mut pieces = Vec::new();
        self.vocab.for_each_piece(text, |piece| pieces.push(piece));
        pieces
    }

    /// Token ids of `text`, as `tiktoken`'s `encode_ordinary` (special-token text is ordinary).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        self.vocab.bpe.encode_ordinary(text)
    }

    /// The text of token ids. Fails on an id outside the vocabulary, or when the ids do not form
    /// valid UTF-8 (a multi-byte character cut between ids).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let bytes = self
            .vocab
            .bpe
            .decode_bytes(ids)
            .map_err(|e| Error::UnknownToken {
                token: e.token,
                encoding: self.name(),
            })?;
        String::from_utf8(bytes).map_err(|e| Error::InvalidUtf8 {
            what: "decoded token bytes",
            valid_up_to: e.utf8_error().valid_up_to(),
        })
    }

    /// Number of ordinary tokens in the vocabulary (special tokens excluded).
    pub fn vocab_size(&self) -> usize {
        self.vocab.ranks.len()
    }
}

/// A heuristic token estimator for models without a public vocabulary: `ceil(chars /
/// chars_per_token)`, counting Unicode scalar values. Not exact; use [`Tokenizer`] where a
/// vocabulary exists.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeuristicCounter {
    chars_per_token: f64,
}

impl HeuristicCounter {
    /// The default ratio, typical of English prose with OpenAI's vocabularies.
    pub const DEFAULT_CHARS_PER_TOKEN: f64 = 4.0;

    /// An estimator with the given ratio, which must be finite and > 0.
    pub fn new(chars_per_token: f64) -> Result<Self> {
        if chars_per_token.is_finite() && chars_per_token > 0.0 {
            Ok(Self { chars_per_token })
        } else {
            Err(Error::InvalidArgument(format!(
                "chars_per_token must be a finite number > 0, got {chars_per_token}"
            )))
        }
    }

    /// The ratio of characters per token.
    pub fn chars_per_token(&self) -> f64 {
        self.chars_per_token
    }

    /// The estimated number of tokens of `text`.
    pub fn count(&self, text: &str) -> u64 {
        let chars = text.chars().count() as f64;
        (chars / self.chars_per_token).ceil() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLES: &[&str] = &[
        "",
        "hello world",
        "Hello, World!  How are   you?\n\n\tFine.\r\n",
        "   leading and trailing   ",
        "I'm here, you're there; they'll've THE'S 'S",
        "numbers 1234567 and 3.14159, 2026-11-21",
        "unicode: naïve café, Ελληνικά, русский, 中文字符, 日本語のテキスト, 한국어",
        "emoji 👍🏽🎉 family 👨‍👩‍👧 flags 🇫🇷",
        "code:\n    fn main() {\n        println!(\"{}\", x);\n    }\n",
        "{\"reservation_id\": \"ABC123\", \"flights\": [{\"origin\": \"JFK\"}]}",
        " \u{a0}\u{2003}x \u{3000}y\u{85}z",
        "path/to/file.py:42: error: something/went\\wrong//",
        "a\n\n\n  b  \n  \n c",
        "ſ's K's 'S 'LL 'Ve",
        "\u{300}\u{301}abc\u{300} ABCdef DEFghi ÀÉÎõü",
    ];

    #[test]
    fn counts_equal_tiktoken_rs_on_samples() {
        for encoding in Encoding::ALL {
            let tokenizer = Tokenizer::from_encoding(encoding);
            for sample in SAMPLES {
                assert_eq!(
                    tokenizer.count(sample),
                    tokenizer.encode(sample).len(),
                    "{} on {sample:?}",
                    encoding.name()
                );
            }
        }
    }

    #[test]
    fn long_runs_count_like_tiktoken_rs() {
        let tokenizer = Tokenizer::new("cl100k_base").unwrap();
        for text in [
            "a".repeat(10_000),
            " ".repeat(5_000) + "x",
            "ab".repeat(3_000),
        ] {
            assert_eq!(tokenizer.count(&text), tokenizer.encode(&text).len());
        }
    }

    #[test]
    fn small_and_large_merges_agree() {
        let vocab = Encoding::Cl100kBase.vocab();
        for text in [
            "abcdefghij",
            "aaaaaaaaaaaaaaaaaaaaaaaaa",
            "xyzzyxyzzy qwerty",
            "😀😀😀é",
        ] {
            let bytes = text.as_bytes();
            assert_eq!(
                merge_count_small(&vocab.ranks, bytes),
                merge_count_large(&vocab.ranks, bytes),
                "{text}"
            );
        }
    }

    /// A small deterministic generator for the differential tests (no test dependency).
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((self.0 >> 33) % n as u64) as usize
        }
    }

    #[test]
    fn every_token_merges_to_itself() {
        // The condition under which the backtracking counter equals the byte-pair merges.
        for encoding in Encoding::ALL {
            let vocab = encoding.vocab();
            for token in vocab.ranks.keys() {
                let count = if token.len() < SMALL_PIECE {
                    merge_count_small(&vocab.ranks, token)
                } else {
                    merge_count_large(&vocab.ranks, token)
                };
                assert_eq!(count, 1, "{} token {token:?}", encoding.name());
            }
        }
    }

    #[test]
    fn backtracking_counts_equal_the_merges() {
        let alphabets: &[&[&str]] = &[
            &["a"],
            &["a", "b"],
            &["a", "aa", "b", "ab"],
            &["e", "r", "t", "s", "in", "er", "th"],
            &["0", "1", "=", "-", "_", "*", "/", "\\"],
            &["é", "ü", "a", "e", "\u{301}"],
            &["中", "文", "字", "符", "日", "本"],
            &["👍", "🏽", "\u{200d}", "🎉"],
            &[" ", "\n", "\t", "\u{a0}", "\u{3000}"],
            &["http", "://", "www", ".", "com", "/", "?", "=", "&"],
        ];
        let mut rng = Lcg(7);
        for encoding in Encoding::ALL {
            let vocab = encoding.vocab();
            let backtrack = vocab.backtrack();
            // Pieces the encoder finished within its budget (the rest fall back to the heap).
            let mut finished = 0;
            for round in 0..400 {
                let alphabet = alphabets[round % alphabets.len()];
                let parts = 1 + rng.below(if round % 7 == 0 { 3000 } else { 300 });
                let mut piece = String::new();
                for _ in 0..parts {
                    piece.push_str(alphabet[rng.below(alphabet.len())]);
                }
                let got = backtrack.count(piece.as_bytes(), &mut PairCache::new());
                let expected = merge_count_large(&vocab.ranks, piece.as_bytes());
                assert!(
                    got.is_none_or(|n| n == expected),
                    "{} on {piece:?}: {got:?} != {expected}",
                    encoding.name()
                );
                finished += usize::from(got.is_some());
            }
            // Arbitrary bytes, including ones that are not UTF-8.
            for _ in 0..200 {
                let len = 1 + rng.below(600);
                let bytes: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                let got = backtrack.count(&bytes, &mut PairCache::new());
                let expected = merge_count_large(&vocab.ranks, &bytes);
                assert!(
                    got.is_none_or(|n| n == expected),
                    "{} on {bytes:?}: {got:?} != {expected}",
                    encoding.name()
                );
                finished += usize::from(got.is_some());
            }
            assert!(finished > 500, "{}: {finished} of 600", encoding.name());
        }
    }

    #[test]
    fn adversarial_runs_count_like_tiktoken_rs() {
        for encoding in Encoding::ALL {
            let t = Tokenizer::from_encoding(encoding);
            for text in [
                "a".repeat(100_000),
                "ab".repeat(30_000),
                "=".repeat(50_000),
                "0".repeat(20_000),
                "é".repeat(20_000),
                "👍".repeat(5_000),
                "xyz".repeat(20_000),
            ] {
                assert_eq!(
                    t.count(&text),
                    t.encode(&text).len(),
                    "{} on {:?}...",
                    encoding.name(),
                    &text[..8]
                );
            }
        }
    }

    /// ASCII punctuation, the characters `[^\s\p{L}\p{N}]+` pieces are made of.
    const PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

    #[test]
    fn runs_of_one_byte_count_like_tiktoken_rs() {
        // Every ASCII byte's run table against the byte-pair merges: `tiktoken-rs` itself up to
        // 300 bytes and at a few long lengths, the heap merge (equal to it) at every 37th length
        // up to 5000.
        for encoding in Encoding::ALL {
            let vocab = encoding.vocab();
            for byte in 1..128u8 {
                let Some(run) = vocab.run_counts(byte) else {
                    continue;
                };
                assert_eq!(run.count(1), 1);
                for n in (2..=300).chain([4096, 4999, 5000]) {
                    let piece = vec![byte; n];
                    let expected = tiktoken_rs::byte_pair_split(&piece, &vocab.ranks).len();
                    assert_eq!(run.count(n), expected, "{} {byte} * {n}", encoding.name());
                }
                for n in (301..5000).step_by(37).chain([100_000]) {
                    let piece = vec![byte; n];
                    let expected = merge_count_large(&vocab.ranks, &piece);
                    assert_eq!(run.count(n), expected, "{} {byte} * {n}", encoding.name());
                }
            }
        }
    }

    #[test]
    fn every_punctuation_run_has_a_table() {
        for encoding in Encoding::ALL {
            for byte in PUNCTUATION.bytes().chain(*b" \n\tax") {
                assert!(
                    encoding.vocab().run_counts(byte).is_some(),
                    "{} {:?}",
                    encoding.name(),
                    byte as char
                );
            }
        }
    }

    #[test]
    fn affixed_runs_count_like_the_merges() {
        // Runs with up to 16 bytes before and after (any bytes, runs of them included), short
        // enough to be computed position by position and long enough to use the table's period.
        let mut rng = Lcg(1818);
        let alphabet: Vec<u8> = PUNCTUATION.bytes().chain(*b" \n\t/xa\xc3\xa9").collect();
        for encoding in Encoding::ALL {
            let vocab = encoding.vocab();
            let backtrack = vocab.backtrack();
            let mut checked = 0;
            for round in 0..300 {
                let byte = alphabet[rng.below(alphabet.len())];
                let affix = |rng: &mut Lcg| -> Vec<u8> {
                    let len = rng.below(MAX_AFFIX + 1);
                    let other = alphabet[rng.below(alphabet.len())];
                    (0..len)
                        .map(|_| {
                            if rng.below(3) == 0 {
                                other
                            } else {
                                alphabet[rng.below(alphabet.len())]
                            }
                        })
                        .collect()
                };
                let head = affix(&mut rng);
                let tail = affix(&mut rng);
                let m = backtrack.max_len + rng.below(if round % 3 == 0 { 4000 } else { 400 });
                let piece = [head, vec![byte; m], tail].concat();
                let Some(run) = affixed_run(&piece, backtrack.max_len) else {
                    continue;
                };
                let Some(table) = vocab.run_counts(piece[run.start]) else {
                    continue;
                };
                let got = table.count_affixed(&vocab.ranks, backtrack, &piece, run);
                let expected = merge_count_large(&vocab.ranks, &piece);
                assert_eq!(got, Some(expected), "{} on {piece:?}", encoding.name());
                checked += 1;
            }
            assert!(checked > 200, "{}: {checked}", encoding.name());
        }
    }

    #[test]
    fn pieces_with_several_runs_count_like_the_merges() {
        // Runs of random lengths (long ones among them) between random bytes.
        let mut rng = Lcg(18_18);
        let alphabet: Vec<u8> = PUNCTUATION.bytes().chain(*b" \n\t/xa\xc3\xa9").collect();
        for encoding in Encoding::ALL {
            let vocab = encoding.vocab();
            let mut checked = 0;
            for _ in 0..120 {
                let mut piece = Vec::new();
                for _ in 0..1 + rng.below(5) {
                    let byte = alphabet[rng.below(alphabet.len())];
                    let len = [
                        1 + rng.below(40),
                        30 + rng.below(170),
                        200 + rng.below(400),
                        400 + rng.below(1500),
                    ][rng.below(4)];
                    piece.extend(std::iter::repeat_n(byte, len));
                    for _ in 0..rng.below(6) {
                        piece.push(alphabet[rng.below(alphabet.len())]);
                    }
                }
                let Some(got) = vocab.count_with_runs(&piece) else {
                    continue;
                };
                let expected = merge_count_large(&vocab.ranks, &piece);
                assert_eq!(got, expected, "{} on {piece:?}", encoding.name());
                checked += 1;
            }
            assert!(checked > 50, "{}: {checked}", encoding.name());
        }
    }

    #[test]
    fn punctuation_runs_in_text_count_like_tiktoken_rs() {
        // Whole texts through the split pattern: runs alone, after a space or a letter, before
        // newlines and slashes, and two runs in one piece.
        let mut rng = Lcg(18);
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let t = Tokenizer::from_encoding(encoding);
            for c in PUNCTUATION.chars() {
                let d = PUNCTUATION
                    .chars()
                    .nth(rng.below(PUNCTUATION.len()))
                    .unwrap();
                let n = 1 + rng.below(3000);
                let run = c.to_string().repeat(n);
                for text in [
                    run.clone(),
                    format!(" {run}"),
                    format!("x{run}"),
                    format!("{run}\n\n"),
                    format!("{run}//"),
                    format!("{run}{}", d.to_string().repeat(1 + rng.below(500))),
                    format!("{}{run}", d.to_string().repeat(1 + rng.below(500))),
                    format!("a {run} b {run}"),
                ] {
                    assert_eq!(
                        t.count(&text),
                        t.encode(&text).len(),
                        "{} on {c:?} * {n} in {:?}...",
                        encoding.name(),
                        &text[..text.len().min(12)]
                    );
                }
            }
        }
    }

    #[test]
    fn known_counts() {
        let cl100k = Tokenizer::new("cl100k_base").unwrap();
        assert_eq!(cl100k.count("hello world"), 2);
        assert_eq!(cl100k.encode("hello world"), vec![15339, 1917]);
        assert_eq!(cl100k.decode(&[15339, 1917]).unwrap(), "hello world");
        assert_eq!(cl100k.vocab_size(), 100_256);
        let o200k = Tokenizer::for_model("gpt-4o-2024-08-06").unwrap();
        assert_eq!(o200k.name(), "o200k_base");
        for prefixed in [
            "openai:gpt-4o",
            "openai/o3",
            "ft:gpt-4o-mini-2024-07-18:org::x1",
        ] {
            assert_eq!(Encoding::for_model(prefixed).unwrap(), Encoding::O200kBase);
        }
        assert!(Encoding::for_model("openai:claude-3").is_err());
        assert_eq!(o200k.vocab_size(), 199_998);
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let err = Tokenizer::new("cl100k").unwrap_err();
        assert!(err.to_string().contains("o200k_base"), "{err}");
        let err = Tokenizer::for_model("llama-3").unwrap_err();
        assert!(err.to_string().contains("gpt-4o"), "{err}");
    }

    #[test]
    fn decode_errors() {
        let t = Tokenizer::new("cl100k_base").unwrap();
        assert!(matches!(
            t.decode(&[4_000_000]),
            Err(Error::UnknownToken { .. })
        ));
        // 'é' is two bytes; its first-byte token alone is not valid UTF-8.
        let ids = t.encode("é");
        let first_byte = t
            .encode_bytes_for_test(&[0xC3])
            .expect("single bytes are tokens");
        assert!(ids.len() == 1);
        assert!(matches!(
            t.decode(&[first_byte]),
            Err(Error::InvalidUtf8 { .. })
        ));
    }

    impl Tokenizer {
        fn encode_bytes_for_test(&self, bytes: &[u8]) -> Option<u32> {
            self.vocab.ranks.get(bytes).copied()
        }
    }

    #[test]
    fn embeddings_are_unit_vectors_and_near_duplicates_are_close() {
        let t = Tokenizer::new("cl100k_base").unwrap();
        let a = t.embed("status: 3 jobs running, 2 queued", 64);
        let b = t.embed("status: 3 jobs running, 2 queued", 64);
        let c = t.embed("the weather in Paris is sunny", 64);
        let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>();
        assert!((dot(&a, &a) - 1.0).abs() < 1e-5);
        assert!((dot(&a, &b) - 1.0).abs() < 1e-5);
        assert!(dot(&a, &c) < 0.9);
        assert_eq!(t.embed("", 8), vec![0.0; 8]);
        let many = t.embed_many(&["x y", "x y"], 16).unwrap();
        assert_eq!(many[..16], many[16..]);
        assert!(t.embed_many(&["x"], 0).is_err());
    }

    #[test]
    fn count_many_matches_count() {
        let t = Tokenizer::new("o200k_base").unwrap();
        let texts: Vec<String> = (0..2000)
            .map(|i| format!("message {i}: {}", "lorem ipsum ".repeat(i % 50)))
            .collect();
        let many = t.count_many(&texts).unwrap();
        for (text, &n) in texts.iter().zip(&many) {
            assert_eq!(n as usize, t.count(text));
        }
    }
}
