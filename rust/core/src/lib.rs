//! # ctxwindow-core
//!
//! The hot data structures and kernels of `ctxwindow`, free of any Python or C concern:
//!
//! - [`TokenHistory`]: a token-tracked FIFO of conversation entries whose eviction drops whole
//!   groups (a tool call leaves with its results) and costs O(k) for k evicted entries, whatever the
//!   length of the history; with cheap snapshots and rollback.
//! - [`Tokenizer`]: exact token counts, identical to OpenAI's `tiktoken` (`encode_ordinary`), for
//!   `cl100k_base`, `o200k_base`, `p50k_base` and `r50k_base`, through a counting path that never
//!   materializes token ids; plus the chat accounting of [`chat`].
//! - [`score`] and [`select`]: batch retention scoring of millions of items from columns, and the
//!   choice of what to evict.
//!
//! ```
//! use ctxwindow_core::{TokenHistory, Tokenizer};
//!
//! let tokenizer = Tokenizer::new("cl100k_base").unwrap();
//! assert_eq!(tokenizer.count("hello world"), 2);
//!
//! let mut history = TokenHistory::new();
//! history.push("user: hi", 5, true).unwrap();
//! history.push("assistant: calls a tool", 7, true).unwrap();
//! history.push("tool: result", 9, false).unwrap(); // same group as the call
//! let evicted = history.evict(10, 0, None).unwrap();
//! assert_eq!(evicted, vec!["user: hi", "assistant: calls a tool", "tool: result"]);
//! assert_eq!(history.total_tokens(), 0);
//! ```
#![deny(missing_docs)]

pub mod chat;
mod error;
pub mod estimate;
pub mod history;
pub mod image;
pub mod lexical;
pub mod models;
pub mod score;
pub mod select;
pub mod tokenize;

pub use error::{Error, Result};
pub use history::{Snapshot, TokenHistory};
pub use models::Encoding;
pub use tokenize::Tokenizer;
