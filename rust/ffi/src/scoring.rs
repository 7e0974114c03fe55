//! `ctxw_score*` and `ctxw_select_*`: batch retention scoring and eviction selection over
//! caller-owned arrays. Stateless and thread-safe: any number of calls may run at once.

use std::ffi::{CStr, c_char};

use ctxwindow_core::score::{self, Columns, Floats, Policy, RetentionParams};
use ctxwindow_core::select::{self, Selection, Stop};

use crate::castable::{Castable, try_ref_from_ptr};
use crate::status::{array, boundary, core_error, ctxw_status, fail, non_null};
use ctxw_status::*;

/// The input columns of a scoring call. Every non-NULL pointer points to `len` values (the
/// embedding to `len * embedding_dim`, row-major); NULL means the column is absent. The caller
/// owns every array; the library only reads them during the call. A length whose size in bytes
/// overflows (`len * embedding_dim * 4` included) is `CTXW_OVERFLOW`.
#[repr(C)]
pub struct ctxw_columns {
    /// Number of items.
    pub len: usize,
    /// Tokens of each item (>= 0), or NULL.
    pub tokens: *const i64,
    /// Turn each item was created at, or NULL.
    pub created_turn: *const i64,
    /// Turn each item was last used at, or NULL.
    pub last_access_turn: *const i64,
    /// Use count of each item (>= 0), or NULL.
    pub access_count: *const i64,
    /// Content type codes 0..=5 (0 system prompt, 1 tool definition, 2 user message,
    /// 3 assistant response, 4 tool result, 5 memory injection), or NULL.
    pub content_type: *const u8,
    /// Explicit priority in [0, 1], or NULL.
    pub priority: *const f64,
    /// Pinned items (never evicted), one byte each: 0 is false, any other value true; or NULL.
    pub pinned: *const u8,
    /// Reference count of each item (>= 0), or NULL.
    pub reference_count: *const i64,
    /// Row-major `len x embedding_dim` float32 embeddings, or NULL.
    pub embedding: *const f32,
    /// The task embedding (`embedding_dim` float32 values), or NULL.
    pub task_embedding: *const f32,
    /// Width of the embeddings (ignored when they are NULL).
    pub embedding_dim: usize,
}

impl Castable for ctxw_columns {}

/// Parameters of the `retention` policy.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ctxw_retention_params {
    /// Age scale in turns (values below 1 count as 1). Default 30.
    pub max_age_turns: f64,
    /// Weight of `exp(-age / max_age_turns)`. Default 0.7.
    pub recency_weight: f64,
    /// Weight of `min(ln(access_count + 1) / ln 5, 1)`. Default 0.3.
    pub frequency_weight: f64,
}

/// The default `retention` parameters (30, 0.7, 0.3). Thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn ctxw_retention_params_default() -> ctxw_retention_params {
    let d = RetentionParams::default();
    ctxw_retention_params {
        max_age_turns: d.max_age_turns,
        recency_weight: d.recency_weight,
        frequency_weight: d.frequency_weight,
    }
}

/// # Safety
/// `ptr` is NULL or valid for `len` reads.
unsafe fn column<'a, T>(
    ptr: *const T,
    len: usize,
    what: &'static str,
) -> Result<Option<&'a [T]>, ctxw_status> {
    if ptr.is_null() {
        Ok(None)
    } else {
        // SAFETY: non-null and valid for len reads (caller's contract).
        unsafe { array(ptr, len, what) }.map(Some)
    }
}

/// # Safety
/// Every non-NULL pointer of `columns` is valid for its documented length.
unsafe fn borrow_columns(columns: &ctxw_columns) -> Result<Columns<'_>, ctxw_status> {
    let n = columns.len;
    let dim = columns.embedding_dim;
    let embedding_len = if columns.embedding.is_null() {
        0
    } else {
        n.checked_mul(dim).ok_or_else(|| {
            fail(
                CTXW_OVERFLOW,
                format!("columns.len {n} x embedding_dim {dim} overflows"),
            )
        })?
    };
    // SAFETY: each pointer is NULL or valid for the length documented in ctxw_columns.
    unsafe {
        Ok(Columns {
            tokens: column(columns.tokens, n, "tokens")?,
            created_turn: column(columns.created_turn, n, "created_turn")?,
            last_access_turn: column(columns.last_access_turn, n, "last_access_turn")?,
            access_count: column(columns.access_count, n, "access_count")?,
            content_type: column(columns.content_type, n, "content_type")?,
            priority: column(columns.priority, n, "priority")?.map(Floats::F64),
            pinned: column(columns.pinned, n, "pinned")?,
            reference_count: column(columns.reference_count, n, "reference_count")?,
            embedding: column(columns.embedding, embedding_len, "embedding")?.map(Floats::F32),
            task_embedding: column(columns.task_embedding, dim, "task_embedding")?.map(Floats::F32),
        })
    }
}

fn run_score(
    policy: &Policy,
    current_turn: i64,
    columns: *const ctxw_columns,
    out: *mut f64,
    out_len: usize,
) -> ctxw_status {
    let columns = try_ref_from_ptr!(columns);
    if columns.len != out_len {
        return fail(
            CTXW_INVALID_ARGUMENT,
            format!(
                "out holds {out_len} values but columns.len is {}",
                columns.len
            ),
        );
    }
    if out_len > 0 && out.is_null() {
        return fail(CTXW_NULL_ARGUMENT, "argument `out` is NULL");
    }
    if crate::status::byte_len::<f64>(out_len).is_none() {
        return fail(
            CTXW_OVERFLOW,
            format!("`out` of {out_len} values overflows the address space"),
        );
    }
    // SAFETY: the column pointers are valid for their lengths (caller's contract).
    let borrowed = match unsafe { borrow_columns(columns) } {
        Ok(borrowed) => borrowed,
        Err(status) => return status,
    };
    if borrowed.item_count().unwrap_or(0) == 0 && columns.len > 0 {
        return fail(
            CTXW_INVALID_ARGUMENT,
            format!("columns.len is {} but no column is given", columns.len),
        );
    }
    let out: &mut [f64] = if out_len == 0 {
        &mut []
    } else {
        // SAFETY: out is non-null and valid for out_len writes (caller's contract).
        unsafe { std::slice::from_raw_parts_mut(out, out_len) }
    };
    match score::score(policy, current_turn, &borrowed, out, None) {
        Ok(()) => CTXW_OK,
        Err(err) => core_error(err),
    }
}

/// Scores `columns->len` items under the policy named `policy` (`"retention"`, `"fifo"`,
/// `"lru"`, `"priority"`, `"type_ttl"` or `"hybrid"`, NUL-terminated) with its default parameters,
/// writing one float64 per item to `out` (`out_len` must equal `columns->len`). Higher = keep;
/// pinned items and system prompts score +infinity. Work is spread over the cores; results do
/// not depend on the number of threads. `CTXW_INVALID_ARGUMENT` (with a message naming the
/// column) for a missing required column, negative counts, content types outside 0..=5, NaN or
/// infinite floats. The columns are never changed; on error the content of `out` is unspecified
/// (negative counts and non-finite embeddings are found while scoring).
///
/// # Safety
/// `policy` NUL-terminated; `columns` valid, with every non-NULL pointer valid for its length;
/// `out` valid for `out_len` writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_score(
    policy: *const c_char,
    current_turn: i64,
    columns: *const ctxw_columns,
    out: *mut f64,
    out_len: usize,
) -> ctxw_status {
    boundary(|| {
        non_null!(policy);
        // SAFETY: non-null and NUL-terminated (caller's contract).
        let Ok(name) = unsafe { CStr::from_ptr(policy) }.to_str() else {
            return fail(CTXW_INVALID_UTF8, "the policy name is not valid UTF-8");
        };
        match Policy::by_name(name) {
            Ok(policy) => run_score(&policy, current_turn, columns, out, out_len),
            Err(err) => core_error(err),
        }
    })
}

/// Scores under `retention` with the given parameters (NULL: the defaults). Otherwise as
/// `ctxw_score`.
///
/// # Safety
/// As `ctxw_score`; `params` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_score_retention(
    current_turn: i64,
    columns: *const ctxw_columns,
    params: *const ctxw_retention_params,
    out: *mut f64,
    out_len: usize,
) -> ctxw_status {
    boundary(|| {
        let params = if params.is_null() {
            ctxw_retention_params_default()
        } else {
            // SAFETY: non-null and valid (caller's contract).
            unsafe { *params }
        };
        let policy = Policy::Retention(RetentionParams {
            max_age_turns: params.max_age_turns,
            recency_weight: params.recency_weight,
            frequency_weight: params.frequency_weight,
        });
        run_score(&policy, current_turn, columns, out, out_len)
    })
}

#[allow(clippy::too_many_arguments)]
fn run_select(
    scores: *const f64,
    len: usize,
    tokens: *const i64,
    pinned: *const u8,
    content_type: *const u8,
    min_keep: usize,
    stop: Stop,
    out_indices: *mut usize,
    cap: usize,
    out_len: *mut usize,
) -> ctxw_status {
    non_null!(out_len);
    if len > 0 {
        non_null!(scores);
    }
    // SAFETY: each pointer is NULL or valid for len reads (caller's contract).
    let selection = unsafe {
        let columns = (|| {
            Ok::<_, ctxw_status>(Selection {
                scores: column(scores, len, "scores")?.unwrap_or(&[]),
                tokens: column(tokens, len, "tokens")?,
                pinned: column(pinned, len, "pinned")?,
                content_type: column(content_type, len, "content_type")?,
                min_keep,
            })
        })();
        match columns {
            Ok(selection) => selection,
            Err(status) => return status,
        }
    };
    let chosen = match select::select_evictions(&selection, stop) {
        Ok(chosen) => chosen,
        Err(err) => return core_error(err),
    };
    // SAFETY: out_len checked non-null.
    unsafe { *out_len = chosen.len() };
    if chosen.len() > cap {
        return fail(
            CTXW_BUFFER_TOO_SMALL,
            format!("{} indices selected, the buffer holds {cap}", chosen.len()),
        );
    }
    if !chosen.is_empty() {
        if out_indices.is_null() {
            return fail(CTXW_NULL_ARGUMENT, "argument `out_indices` is NULL");
        }
        // SAFETY: out_indices is valid for cap >= chosen.len() writes (caller's contract).
        unsafe { std::ptr::copy_nonoverlapping(chosen.as_ptr(), out_indices, chosen.len()) };
    }
    CTXW_OK
}

/// Selects items to evict by ratio: `evict_count = min(ceil(len * ratio), max(len - min_keep,
/// 0))` over the ranks of all items (lowest score first, ties by index); pinned items, system
/// prompts (content type 0) and +infinity scores inside those ranks lower the count. Writes the
/// indices in eviction order to `out_indices` (capacity `cap`; `len` always suffices) and their
/// number to `*out_len` (also on `CTXW_BUFFER_TOO_SMALL`). `tokens`, `pinned` and `content_type`
/// may be NULL; `pinned` holds one byte per item, any non-zero value meaning pinned.
/// `CTXW_OVERFLOW` when `len` values of a column overflow the address space.
/// `CTXW_INVALID_ARGUMENT` for NaN scores or a ratio outside [0, 1].
///
/// # Safety
/// `scores` valid for `len` reads (NULL only when `len` is 0); each of `tokens`, `pinned`,
/// `content_type` NULL or valid for `len` reads; `out_indices` valid for `cap` writes; `out_len`
/// valid.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ctxw_select_by_ratio(
    scores: *const f64,
    len: usize,
    pinned: *const u8,
    content_type: *const u8,
    ratio: f64,
    min_keep: usize,
    out_indices: *mut usize,
    cap: usize,
    out_len: *mut usize,
) -> ctxw_status {
    boundary(|| {
        run_select(
            scores,
            len,
            std::ptr::null(),
            pinned,
            content_type,
            min_keep,
            Stop::Ratio(ratio),
            out_indices,
            cap,
            out_len,
        )
    })
}

/// Selects items to evict, lowest score first (ties by index), until the freed `tokens` reach
/// `target_free_tokens` or every evictable item is selected, never more than `len - min_keep`.
/// Output as `ctxw_select_by_ratio`. `CTXW_NULL_ARGUMENT` if `tokens` is NULL (and `len > 0`);
/// `CTXW_INVALID_ARGUMENT` for NaN scores or negative tokens.
///
/// # Safety
/// As `ctxw_select_by_ratio`, and `tokens` valid for `len` reads.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ctxw_select_by_tokens(
    scores: *const f64,
    tokens: *const i64,
    len: usize,
    pinned: *const u8,
    content_type: *const u8,
    target_free_tokens: u64,
    min_keep: usize,
    out_indices: *mut usize,
    cap: usize,
    out_len: *mut usize,
) -> ctxw_status {
    boundary(|| {
        if len > 0 {
            non_null!(tokens);
        }
        let tokens = if len == 0 { [].as_ptr() } else { tokens };
        run_select(
            scores,
            len,
            tokens,
            pinned,
            content_type,
            min_keep,
            Stop::TargetFreeTokens(target_free_tokens),
            out_indices,
            cap,
            out_len,
        )
    })
}
