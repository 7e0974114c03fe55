//! `ctxw_tokenizer_*`: exact token counts.

use std::ffi::{CStr, c_char};

use ctxwindow_core::{Error, Tokenizer};

use crate::castable::{BoxCastable, Castable, free_box, set_boxed, try_ref_from_ptr};
use crate::status::{array, boundary, core_error, ctxw_status, fail, guarded, non_null};
use ctxw_status::*;

/// An exact tokenizer of one encoding. Opaque. Immutable, so thread-safe: one tokenizer may be
/// used from many threads at once.
pub struct ctxw_tokenizer {
    inner: Tokenizer,
    name: &'static CStr,
}

impl Castable for ctxw_tokenizer {}
impl BoxCastable for ctxw_tokenizer {}

fn name_cstr(tokenizer: &Tokenizer) -> &'static CStr {
    match tokenizer.name() {
        "cl100k_base" => c"cl100k_base",
        "o200k_base" => c"o200k_base",
        "p50k_base" => c"p50k_base",
        _ => c"r50k_base",
    }
}

/// # Safety
/// `ptr` must be NULL or point to `len` readable bytes.
unsafe fn text<'a>(
    ptr: *const c_char,
    len: usize,
    what: &'static str,
) -> Result<&'a str, ctxw_status> {
    if len == 0 {
        return Ok("");
    }
    if ptr.is_null() {
        return Err(fail(
            CTXW_NULL_ARGUMENT,
            format!("argument `{what}` is NULL"),
        ));
    }
    // SAFETY: ptr is non-null with len readable bytes (caller's contract).
    let bytes = unsafe { array(ptr.cast::<u8>(), len, what) }?;
    std::str::from_utf8(bytes).map_err(|e| {
        core_error(Error::InvalidUtf8 {
            what,
            valid_up_to: e.valid_up_to(),
        })
    })
}

fn new_tokenizer(
    name: *const c_char,
    out: *mut *mut ctxw_tokenizer,
    make: fn(&str) -> ctxwindow_core::Result<Tokenizer>,
) -> ctxw_status {
    non_null!(name, out);
    // SAFETY: name is non-null and NUL-terminated (caller's contract).
    let name = unsafe { CStr::from_ptr(name) };
    let Ok(name) = name.to_str() else {
        return fail(CTXW_INVALID_UTF8, "the name is not valid UTF-8");
    };
    match make(name) {
        Ok(inner) => {
            let tokenizer = ctxw_tokenizer {
                name: name_cstr(&inner),
                inner,
            };
            // SAFETY: out is non-null and valid for a write (caller's contract).
            unsafe { set_boxed(out, tokenizer) };
            CTXW_OK
        }
        Err(err) => core_error(err),
    }
}

/// Creates in `*out` the tokenizer of an encoding: `"cl100k_base"`, `"o200k_base"`,
/// `"p50k_base"` or `"r50k_base"` (NUL-terminated). `CTXW_UNKNOWN_ENCODING` otherwise (the last
/// error message lists the known names). The vocabulary is parsed once per process. The caller
/// owns the tokenizer and frees it with `ctxw_tokenizer_free`.
///
/// # Safety
/// `encoding` must be a NUL-terminated string and `out` valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_tokenizer_new(
    encoding: *const c_char,
    out: *mut *mut ctxw_tokenizer,
) -> ctxw_status {
    boundary(|| new_tokenizer(encoding, out, Tokenizer::new))
}

/// Creates in `*out` the tokenizer of an OpenAI model name (`"gpt-4o"`, `"gpt-4"`, ...).
/// `CTXW_UNKNOWN_MODEL` otherwise. Ownership as `ctxw_tokenizer_new`.
///
/// # Safety
/// `model` must be a NUL-terminated string and `out` valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_tokenizer_for_model(
    model: *const c_char,
    out: *mut *mut ctxw_tokenizer,
) -> ctxw_status {
    boundary(|| new_tokenizer(model, out, Tokenizer::for_model))
}

/// Frees a tokenizer. NULL is accepted and ignored. The thread's last error is kept.
///
/// # Safety
/// `tokenizer` must be NULL or a pointer from `ctxw_tokenizer_new`/`_for_model` not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_tokenizer_free(tokenizer: *mut ctxw_tokenizer) {
    let _ = guarded(|| {
        // SAFETY: NULL or a pointer from ctxw_tokenizer_new/_for_model not yet freed (caller's
        // contract).
        unsafe { free_box(tokenizer) };
        CTXW_OK
    });
}

/// Writes to `*out_name` the encoding's name, a static NUL-terminated string the caller must not
/// free.
///
/// # Safety
/// `tokenizer` must be a valid tokenizer pointer and `out_name` valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_tokenizer_name(
    tokenizer: *const ctxw_tokenizer,
    out_name: *mut *const c_char,
) -> ctxw_status {
    boundary(|| {
        let tokenizer = try_ref_from_ptr!(tokenizer);
        non_null!(out_name);
        // SAFETY: out_name is non-null and valid for a write by the caller's contract.
        unsafe { *out_name = tokenizer.name.as_ptr() };
        CTXW_OK
    })
}

/// Writes to `*out` the number of tokens of the UTF-8 text `text` of `len` bytes (no NUL
/// needed; `text` may be NULL when `len` is 0), equal to `tiktoken`'s `encode_ordinary` length.
/// `CTXW_INVALID_UTF8` if the bytes are not UTF-8.
///
/// # Safety
/// `tokenizer` must be valid; `text` valid for `len` reads; `out` valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_tokenizer_count(
    tokenizer: *const ctxw_tokenizer,
    text: *const c_char,
    len: usize,
    out: *mut u64,
) -> ctxw_status {
    boundary(|| {
        let tokenizer = try_ref_from_ptr!(tokenizer);
        non_null!(out);
        // SAFETY: text is valid for len reads (caller's contract).
        let text = match unsafe { self::text(text, len, "text") } {
            Ok(text) => text,
            Err(status) => return status,
        };
        // SAFETY: out is non-null and valid for a write by the caller's contract.
        unsafe { *out = tokenizer.inner.count(text) as u64 };
        CTXW_OK
    })
}

/// Counts `n` texts (`texts[i]` of `lens[i]` bytes, UTF-8) into `out_counts[0..n]`, spread over
/// the cores. On any invalid text nothing is written and its status is returned. `CTXW_OVERFLOW`
/// if a count exceeds 2^32 - 1.
///
/// # Safety
/// `texts` and `lens` valid for `n` reads, each `texts[i]` valid for `lens[i]` reads, and
/// `out_counts` valid for `n` writes. They may be NULL when `n` is 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_tokenizer_count_many(
    tokenizer: *const ctxw_tokenizer,
    texts: *const *const c_char,
    lens: *const usize,
    n: usize,
    out_counts: *mut u32,
) -> ctxw_status {
    boundary(|| {
        let tokenizer = &try_ref_from_ptr!(tokenizer).inner;
        if n == 0 {
            return CTXW_OK;
        }
        non_null!(texts, lens, out_counts);
        // SAFETY: texts and lens are valid for n reads (caller's contract).
        let (ptrs, lens) = match unsafe { (array(texts, n, "texts"), array(lens, n, "lens")) } {
            (Ok(ptrs), Ok(lens)) => (ptrs, lens),
            (Err(status), _) | (_, Err(status)) => return status,
        };
        let mut strs = Vec::with_capacity(n);
        for (&ptr, &len) in ptrs.iter().zip(lens) {
            // SAFETY: each texts[i] is valid for lens[i] reads (caller's contract).
            match unsafe { text(ptr, len, "texts[i]") } {
                Ok(text) => strs.push(text),
                Err(status) => return status,
            }
        }
        match tokenizer.count_many(&strs) {
            Ok(counts) => {
                // SAFETY: out_counts is valid for n writes (caller's contract).
                unsafe { std::ptr::copy_nonoverlapping(counts.as_ptr(), out_counts, n) };
                CTXW_OK
            }
            Err(err) => core_error(err),
        }
    })
}
