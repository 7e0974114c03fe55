//! The characters-per-token estimate, for models without a public vocabulary.

use crate::{Error, Result};

/// A heuristic token estimator for models without a public vocabulary: `ceil(chars /
/// chars_per_token)`, counting Unicode scalar values. Not exact; use [`Tokenizer`](super::Tokenizer) where a
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
