//! The one error type of the core. Each frontend maps it once: Python to typed exceptions that also
//! subclass the matching builtin, C to a `ctxw_status` code plus a message.

/// Everything that can go wrong in the core. A call that returns an error leaves every object
/// exactly as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument is outside its allowed range; the message names it and says what is allowed.
    #[error("{0}")]
    InvalidArgument(String),
    /// `low_watermark` above `max_tokens` in an eviction.
    #[error("low_watermark ({low_watermark}) must not exceed max_tokens ({max_tokens})")]
    WatermarkAboveMax {
        /// The low watermark that was given.
        low_watermark: u64,
        /// The budget it must not exceed.
        max_tokens: u64,
    },
    /// A snapshot taken from a different history was passed to `rollback`.
    #[error("snapshot belongs to another TokenHistory")]
    ForeignSnapshot,
    /// A snapshot of this history that can no longer be restored.
    #[error("snapshot can no longer be restored: {0}")]
    SnapshotUnreachable(&'static str),
    /// An index outside the history.
    #[error("index {index} out of range for a history of {len} entries")]
    IndexOutOfRange {
        /// The index that was asked for (negative counts from the end).
        index: i64,
        /// The number of entries.
        len: usize,
    },
    /// A token total that does not fit in 64 bits.
    #[error("token total overflows 64 bits ({0})")]
    Overflow(&'static str),
    /// An encoding name that is not known.
    #[error("unknown encoding {name:?}; known encodings: {known}")]
    UnknownEncoding {
        /// The name that was given.
        name: String,
        /// The known names, comma separated.
        known: String,
    },
    /// A model name that maps to no known encoding.
    #[error("unknown model {name:?}; known models: {known} (and their dated or suffixed variants)")]
    UnknownModel {
        /// The name that was given.
        name: String,
        /// The known model names and prefixes, comma separated.
        known: String,
    },
    /// A token id that is not in the vocabulary.
    #[error("token id {token} is not in the vocabulary of {encoding}")]
    UnknownToken {
        /// The id.
        token: u32,
        /// The encoding it was looked up in.
        encoding: &'static str,
    },
    /// Bytes that are not valid UTF-8 (decoded ids, or text passed through the C ABI).
    #[error("{what} is not valid UTF-8 (first invalid byte at offset {valid_up_to})")]
    InvalidUtf8 {
        /// What was being decoded.
        what: &'static str,
        /// Length of the longest valid prefix.
        valid_up_to: usize,
    },
    /// A chat message that does not follow the accepted shapes.
    #[error("message {index}: {reason}")]
    MalformedMessage {
        /// Position of the message in the list.
        index: usize,
        /// What is wrong with it.
        reason: String,
    },
}

/// Result alias of the core.
pub type Result<T> = std::result::Result<T, Error>;
