//! Status codes, the panic boundary and the per-thread last error message.

use std::cell::RefCell;
use std::ffi::{c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use ctxwindow_core::Error;

/// The result of every `ctxw_` function. Numbers are grouped by area and never reused.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ctxw_status {
    /// Success.
    CTXW_OK = 0,
    /// A required pointer argument was NULL.
    CTXW_NULL_ARGUMENT = 1,
    /// An argument is outside its allowed range.
    CTXW_INVALID_ARGUMENT = 2,
    /// The caller's buffer is too small; the length needed was written to `out_len`.
    CTXW_BUFFER_TOO_SMALL = 3,
    /// A token total, count or length (an array's size in bytes) does not fit its type.
    CTXW_OVERFLOW = 4,
    /// A Rust panic was caught at the boundary (a bug: please report it).
    CTXW_PANIC = 5,
    /// Text is not valid UTF-8.
    CTXW_INVALID_UTF8 = 6,
    /// History: a snapshot of another history.
    CTXW_FOREIGN_SNAPSHOT = 100,
    /// History: a snapshot on a branch a later rollback discarded.
    CTXW_SNAPSHOT_UNREACHABLE = 101,
    /// History: an index outside the history.
    CTXW_INDEX_OUT_OF_RANGE = 102,
    /// History: `low_watermark` above `max_tokens`.
    CTXW_WATERMARK_ABOVE_MAX = 103,
    /// Tokenizer: unknown encoding name.
    CTXW_UNKNOWN_ENCODING = 200,
    /// Tokenizer: unknown model name.
    CTXW_UNKNOWN_MODEL = 201,
    /// Tokenizer: a token id outside the vocabulary.
    CTXW_UNKNOWN_TOKEN = 202,
}

use ctxw_status::*;

impl ctxw_status {
    /// Every status, for the lookup from a C `uint32_t`.
    const ALL: [ctxw_status; 14] = [
        CTXW_OK,
        CTXW_NULL_ARGUMENT,
        CTXW_INVALID_ARGUMENT,
        CTXW_BUFFER_TOO_SMALL,
        CTXW_OVERFLOW,
        CTXW_PANIC,
        CTXW_INVALID_UTF8,
        CTXW_FOREIGN_SNAPSHOT,
        CTXW_SNAPSHOT_UNREACHABLE,
        CTXW_INDEX_OUT_OF_RANGE,
        CTXW_WATERMARK_ABOVE_MAX,
        CTXW_UNKNOWN_ENCODING,
        CTXW_UNKNOWN_MODEL,
        CTXW_UNKNOWN_TOKEN,
    ];

    /// The status whose number is `code`, if any (a lookup, never a transmute: C may pass any
    /// `uint32_t`).
    pub fn from_code(code: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|status| *status as u32 == code)
    }

    fn message(self) -> &'static std::ffi::CStr {
        match self {
            CTXW_OK => c"ok",
            CTXW_NULL_ARGUMENT => c"a required pointer argument was NULL",
            CTXW_INVALID_ARGUMENT => c"an argument is outside its allowed range",
            CTXW_BUFFER_TOO_SMALL => c"the buffer is too small; out_len holds the length needed",
            CTXW_OVERFLOW => c"a token total, count or length does not fit its type",
            CTXW_PANIC => c"internal error (a panic was caught at the C boundary)",
            CTXW_INVALID_UTF8 => c"text is not valid UTF-8",
            CTXW_FOREIGN_SNAPSHOT => c"snapshot belongs to another history",
            CTXW_SNAPSHOT_UNREACHABLE => c"snapshot can no longer be restored",
            CTXW_INDEX_OUT_OF_RANGE => c"index out of range",
            CTXW_WATERMARK_ABOVE_MAX => c"low_watermark must not exceed max_tokens",
            CTXW_UNKNOWN_ENCODING => c"unknown encoding name",
            CTXW_UNKNOWN_MODEL => c"unknown model name",
            CTXW_UNKNOWN_TOKEN => c"token id outside the vocabulary",
        }
    }
}

impl From<&Error> for ctxw_status {
    fn from(err: &Error) -> Self {
        match err {
            Error::InvalidArgument(_) | Error::MalformedMessage { .. } => CTXW_INVALID_ARGUMENT,
            Error::WatermarkAboveMax { .. } => CTXW_WATERMARK_ABOVE_MAX,
            Error::ForeignSnapshot => CTXW_FOREIGN_SNAPSHOT,
            Error::SnapshotUnreachable(_) => CTXW_SNAPSHOT_UNREACHABLE,
            Error::IndexOutOfRange { .. } => CTXW_INDEX_OUT_OF_RANGE,
            Error::Overflow(_) => CTXW_OVERFLOW,
            Error::UnknownEncoding { .. } => CTXW_UNKNOWN_ENCODING,
            Error::UnknownModel { .. } => CTXW_UNKNOWN_MODEL,
            Error::UnknownToken { .. } => CTXW_UNKNOWN_TOKEN,
            Error::InvalidUtf8 { .. } => CTXW_INVALID_UTF8,
            _ => CTXW_INVALID_ARGUMENT,
        }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn set_last_error(message: String) {
    LAST_ERROR.with(|last| *last.borrow_mut() = message);
}

/// A failed call's status, with its message recorded as the thread's last error.
pub(crate) fn fail(status: ctxw_status, message: impl Into<String>) -> ctxw_status {
    set_last_error(message.into());
    status
}

/// The status of a core error, with its message recorded.
pub(crate) fn core_error(err: Error) -> ctxw_status {
    let status = ctxw_status::from(&err);
    fail(status, err.to_string())
}

/// Runs `body` inside the panic boundary. The thread's last error is cleared first.
pub(crate) fn boundary(body: impl FnOnce() -> ctxw_status) -> ctxw_status {
    set_last_error(String::new());
    guarded(body)
}

/// Runs `body` inside the panic boundary, keeping the thread's last error (for the `_free`
/// functions, which a caller runs during cleanup between a failure and reading its message).
pub(crate) fn guarded(body: impl FnOnce() -> ctxw_status) -> ctxw_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(status) => status,
        Err(panic) => {
            let detail = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            fail(CTXW_PANIC, format!("panic at the C boundary: {detail}"))
        }
    }
}

/// Checks that the given pointers are not NULL.
macro_rules! non_null {
    ($($ptr:ident),+) => {
        $(
            if $ptr.is_null() {
                return $crate::status::fail(
                    $crate::status::ctxw_status::CTXW_NULL_ARGUMENT,
                    concat!("argument `", stringify!($ptr), "` is NULL"),
                );
            }
        )+
    };
}
pub(crate) use non_null;

/// A static, NUL-terminated description of `status`, any `uint32_t`: a number that is not a
/// `ctxw_status` gets the message "unknown status code". Never NULL; the caller must not free it.
/// Thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn ctxw_status_message(status: u32) -> *const c_char {
    ctxw_status::from_code(status)
        .map_or(c"unknown status code", ctxw_status::message)
        .as_ptr()
}

/// The size in bytes of `len` values of `T`, if it fits `isize` (the bound on any Rust slice).
pub(crate) fn byte_len<T>(len: usize) -> Option<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .filter(|&bytes| isize::try_from(bytes).is_ok())
}

/// A caller's array of `len` values as a slice, or `CTXW_OVERFLOW` when its size in bytes
/// overflows (such an array cannot exist; taking a slice of it would be undefined behaviour).
/// An empty slice for `len` 0, whatever `ptr` is.
///
/// # Safety
/// When `len > 0` and its size fits, `ptr` must be non-NULL, aligned and valid for `len` reads
/// for the lifetime `'a`.
pub(crate) unsafe fn array<'a, T>(
    ptr: *const T,
    len: usize,
    what: &'static str,
) -> Result<&'a [T], ctxw_status> {
    if len == 0 {
        return Ok(&[]);
    }
    if byte_len::<T>(len).is_none() {
        return Err(fail(
            CTXW_OVERFLOW,
            format!("`{what}` of {len} values overflows the address space"),
        ));
    }
    // SAFETY: len > 0 values whose size fits isize; ptr valid for them (caller's contract).
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Copies the message of the last failed `ctxw_` call on the calling thread (empty after a
/// success) into `buf` (capacity `cap` bytes), NUL-terminated. `*out_len` receives the message
/// length without the NUL. If `cap` is too small, nothing is copied and `CTXW_BUFFER_TOO_SMALL`
/// is returned. The caller owns `buf`. Thread-safe (the message is per thread).
///
/// # Safety
/// `buf` must point to `cap` writable bytes (or be NULL when `cap` is 0); `out_len` must be valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_last_error_message(
    buf: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> ctxw_status {
    // Not wrapped in `boundary`, which would clear the message being read.
    let result = catch_unwind(AssertUnwindSafe(|| {
        if out_len.is_null() {
            return CTXW_NULL_ARGUMENT;
        }
        LAST_ERROR.with(|last| {
            let last = last.borrow();
            let bytes = last.as_bytes();
            // SAFETY: out_len checked non-null above; the caller guarantees it is valid.
            unsafe { *out_len = bytes.len() };
            if cap < bytes.len() + 1 {
                return CTXW_BUFFER_TOO_SMALL;
            }
            if buf.is_null() {
                return CTXW_NULL_ARGUMENT;
            }
            // SAFETY: buf has cap >= len + 1 writable bytes (caller's contract), and does not
            // overlap our String.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
                *buf.add(bytes.len()) = 0;
            }
            CTXW_OK
        })
    }));
    result.unwrap_or(CTXW_PANIC)
}

/// The version of the library as `major * 10000 + minor * 100 + patch`. Thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn ctxw_version() -> c_int {
    let part = |s: &str| s.parse::<c_int>().unwrap_or(0);
    part(env!("CARGO_PKG_VERSION_MAJOR")) * 10_000
        + part(env!("CARGO_PKG_VERSION_MINOR")) * 100
        + part(env!("CARGO_PKG_VERSION_PATCH"))
}
