//! The pre-tokenizer: `text` split into pieces by the encoding's pattern, exactly as `tiktoken`
//! splits it, before any byte-pair merge.
//!
//! The patterns are compiled with the `regex` crate instead of `fancy-regex`. Their only
//! lookaround, `\s+(?!\S)`, is rewritten as `\s+` followed by a fix-up: a whitespace run of two
//! or more characters followed by a non-space character gives its last character to the next
//! piece (exactly what the backtracking of `\s+(?!\S)` does). The possessive quantifiers of the
//! patterns never change what matches there, so they are dropped.

use std::cell::RefCell;

use regex::Regex;
use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::{Anchored, Input, MatchKind};

use crate::models::Encoding;

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

/// Which pattern an encoding splits with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    Gpt2,
    Cl100k,
    O200k,
}

/// Bytes of lazy-DFA states a thread keeps per encoding. The patterns' DFAs stay far below it on
/// any text, so the cache is never cleared (clearing is disabled: a DFA that had to clear its
/// cache too often would give up and leave every piece to the slower `regex` search).
const DFA_CACHE_BYTES: usize = 8 << 20;

/// Number of encodings, each with its own DFA cache slot.
pub(super) const SLOTS: usize = Encoding::ALL.len();

thread_local! {
    /// One lazy-DFA cache per thread and encoding (a cache belongs to one DFA).
    static DFA_CACHES: RefCell<[Option<Cache>; SLOTS]> = const { RefCell::new([const { None }; SLOTS]) };
}

/// The split pattern of one encoding.
pub(super) struct PreTokenizer {
    /// The split pattern as a lazy DFA, searched anchored at each piece start: one forward
    /// pass per piece, no reverse search for the start (which is known).
    dfa: DFA,
    /// The same pattern for the rare case the lazy DFA gives up (it never should: the patterns
    /// have no Unicode word boundary and the cache is never capped).
    splitter: Regex,
    family: Family,
    /// Slot of this encoding's DFA cache in the thread-local [`DFA_CACHES`].
    slot: usize,
}

impl PreTokenizer {
    /// The pre-tokenizer of `family`'s pattern, caching its DFA states in thread-local `slot`.
    pub(super) fn new(family: Family, slot: usize) -> Self {
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
                    .cache_capacity(DFA_CACHE_BYTES)
                    .minimum_cache_clear_count(None),
            )
            .build(pattern)
            .expect("the encoding patterns compile to a lazy DFA");
        Self {
            dfa,
            splitter,
            family,
            slot,
        }
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
    pub(super) fn for_each_piece<'t>(&self, text: &'t str, mut f: impl FnMut(&'t str)) {
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
}
