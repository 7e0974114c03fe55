//! Exact token counting, identical to OpenAI's `tiktoken` `encode_ordinary`.
//!
//! Vocabularies come from `tiktoken-rs` (compiled into the crate, nothing downloaded) and are
//! parsed once per process. Encoding and decoding use `tiktoken-rs` directly. Counting takes a
//! faster path that gives the same numbers without materializing ids:
//!
//! 1. The text is split into pieces by the encoding's pattern compiled with the `regex` crate
//!    instead of `fancy-regex` (`pretokenize.rs`).
//! 2. A piece that is itself a token counts 1 (one hash lookup, the common case); otherwise the
//!    byte-pair merges run on the piece and only the number of parts is kept. Short pieces run
//!    `tiktoken`'s merge loop on the stack. Long ones rest on the prefix property of byte-pair
//!    encoding (the `bpe` crate's basis, see `RunCounts`): a run of one byte (`"=" * 10**6`
//!    is one piece) is counted in O(1) from a per-byte table and the period of its counts; a
//!    piece with a run of `LONG_RUN` (32) bytes or more, whatever surrounds it, follows the prefix
//!    recurrence and skips each long run by its table (`runs.rs`); any other
//!    long piece runs the linear backtracking encoder of the `bpe` crate (`backtrack.rs`).
//!
//! Differential tests hold the counts to Python `tiktoken` and to `tiktoken-rs`.
//!
//! One algorithm per file: `pretokenize.rs` (the split), `vocab.rs` (the vocabulary and the choice
//! of algorithm per piece), `merge.rs` (the byte-pair merges), `backtrack.rs` (the linear
//! counter), `runs.rs` (run tables and the recurrence over runs), `trie.rs`, `embed.rs` (hashed
//! embeddings of the pieces) and `heuristic.rs` (the characters-per-token estimate).

mod backtrack;
mod embed;
mod heuristic;
mod merge;
mod pretokenize;
mod runs;
#[cfg(test)]
mod tests;
mod trie;
mod vocab;

use rayon::prelude::*;

use crate::image::ImagePricing;
pub use crate::models::Encoding;
use crate::{Error, Result};
pub use heuristic::HeuristicCounter;
use vocab::Vocab;

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

/// Texts per rayon task of `count_many`: fewer would cost more in scheduling than in counting.
const PARALLEL_MIN_TEXTS: usize = 8;

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
        self.vocab.pretokenizer.for_each_piece(text, |piece| {
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
                texts
                    .par_iter()
                    .with_min_len(PARALLEL_MIN_TEXTS)
                    .map(count)
                    .collect()
            };
        counts.map_err(|_| Error::Overflow("a count exceeds 2^32 - 1 tokens"))
    }

    /// The pieces `text` is split into before the byte-pair merges (for inspection and tests).
    pub fn pieces<'t>(&self, text: &'t str) -> Vec<&'t str> {
        let mut pieces = Vec::new();
        self.vocab
            .pretokenizer
            .for_each_piece(text, |piece| pieces.push(piece));
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
