//! The C ABI of `ctxwindow-core`. The header `include/ctxwindow.h` is generated from this crate
//! by a pinned cbindgen and committed; the test `header_is_current` fails when it drifts.
//!
//! Conventions (rustls-ffi is the model):
//! - every function returns a [`ctxw_status`]; results go through out-parameters;
//! - every body runs inside a panic boundary: a panic becomes `CTXW_PANIC`, never an abort;
//! - NULL arguments return `CTXW_NULL_ARGUMENT`; nothing asserts;
//! - handles are opaque; each constructor has a `_free` that accepts NULL;
//! - on any status other than `CTXW_OK`, the objects passed in are unchanged and the
//!   out-parameters are left as they were (except `out_len` on `CTXW_BUFFER_TOO_SMALL`, which
//!   receives the length needed);
//! - the text of the last error on the calling thread is available through
//!   [`ctxw_last_error_message`].
#![allow(non_camel_case_types)]

mod castable;
mod history;
mod scoring;
mod status;
mod tokenizer;

pub use history::*;
pub use scoring::*;
pub use status::*;
pub use tokenizer::*;
