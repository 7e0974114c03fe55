//! `ctxw_history_*`: the token-tracked FIFO over opaque `uint64_t` payloads (handles, indices or
//! ids of the caller's messages).

use ctxwindow_core::{Snapshot, TokenHistory};

use crate::castable::{
    BoxCastable, Castable, free_box, set_boxed, try_mut_from_ptr, try_ref_from_ptr,
};
use crate::status::{boundary, core_error, ctxw_status, fail, guarded, non_null};
use ctxw_status::*;

/// A token-tracked FIFO history of `uint64_t` payloads. Opaque. Not thread-safe: calls on one
/// history must not overlap (distinct histories are independent).
pub struct ctxw_history {
    inner: TokenHistory<u64>,
}

/// A restorable point of one history. Opaque. Immutable once taken.
pub struct ctxw_snapshot {
    inner: Snapshot,
}

impl Castable for ctxw_history {}
impl BoxCastable for ctxw_history {}
impl Castable for ctxw_snapshot {}
impl BoxCastable for ctxw_snapshot {}

/// Creates an empty history in `*out`. The caller owns it and frees it with
/// `ctxw_history_free`.
///
/// # Safety
/// `out` must be a valid pointer to a `ctxw_history *`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_history_new(out: *mut *mut ctxw_history) -> ctxw_status {
    boundary(|| {
        non_null!(out);
        let history = ctxw_history {
            inner: TokenHistory::new(),
        };
        // SAFETY: out checked non-null; the caller guarantees it is valid for writes.
        unsafe { set_boxed(out, history) };
        CTXW_OK
    })
}

/// Frees a history from `ctxw_history_new`. NULL is accepted and ignored. Snapshots taken from it
/// stay valid objects (they hold no payloads) but can no longer be restored anywhere. The
/// thread's last error is kept.
///
/// # Safety
/// `history` must be NULL or a pointer from `ctxw_history_new` not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_history_free(history: *mut ctxw_history) {
    let _ = guarded(|| {
        // SAFETY: NULL or a pointer from ctxw_history_new not yet freed (caller's contract).
        unsafe { free_box(history) };
        CTXW_OK
    });
}

/// Appends `payload` costing `tokens`. `starts_group` is a byte: 0 attaches the entry to the
/// group of the previous entry (a tool result to its call), any other value starts a new group.
/// `CTXW_OVERFLOW` if the total would exceed 2^64-1.
///
/// # Safety
/// `history` must be a valid history pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_history_push(
    history: *mut ctxw_history,
    payload: u64,
    tokens: u64,
    starts_group: u8,
) -> ctxw_status {
    boundary(|| {
        let history = try_mut_from_ptr!(history);
        match history.inner.push(payload, tokens, starts_group != 0) {
            Ok(()) => CTXW_OK,
            Err(err) => core_error(err),
        }
    })
}

/// Evicts the oldest whole groups until `total + overhead <= target`, where the target is
/// `*low_watermark` when `low_watermark` is not NULL (it must not exceed `max_tokens`) and
/// `max_tokens` otherwise; nothing while `total + overhead <= max_tokens`. The evicted payloads
/// are written oldest first to `out_payloads` (capacity `cap`) and their number to `*out_len`.
///
/// If `cap` is too small, nothing is evicted, `*out_len` receives the number needed and
/// `CTXW_BUFFER_TOO_SMALL` is returned. `out_payloads` may be NULL when `cap` is 0. The caller
/// owns the buffer.
///
/// # Safety
/// `history` must be a valid history pointer; `low_watermark` NULL or valid; `out_payloads` valid
/// for `cap` writes (or NULL with `cap` 0); `out_len` valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_history_evict(
    history: *mut ctxw_history,
    max_tokens: u64,
    overhead: u64,
    low_watermark: *const u64,
    out_payloads: *mut u64,
    cap: usize,
    out_len: *mut usize,
) -> ctxw_status {
    boundary(|| {
        let history = try_mut_from_ptr!(history);
        non_null!(out_len);
        let low_watermark = if low_watermark.is_null() {
            None
        } else {
            // SAFETY: non-null and valid for reads by the caller's contract.
            Some(unsafe { *low_watermark })
        };
        let needed = match history
            .inner
            .plan_evict(max_tokens, overhead, low_watermark)
        {
            Ok(needed) => needed,
            Err(err) => return core_error(err),
        };
        if needed > cap {
            // SAFETY: out_len checked non-null above.
            unsafe { *out_len = needed };
            return fail(
                CTXW_BUFFER_TOO_SMALL,
                format!("eviction needs room for {needed} payloads, the buffer holds {cap}"),
            );
        }
        if needed > 0 && out_payloads.is_null() {
            return fail(CTXW_NULL_ARGUMENT, "argument `out_payloads` is NULL");
        }
        let evicted = match history.inner.evict(max_tokens, overhead, low_watermark) {
            Ok(evicted) => evicted,
            Err(err) => return core_error(err),
        };
        history.inner.release_unreachable();
        if !evicted.is_empty() {
            // SAFETY: out_payloads is non-null with room for cap >= evicted.len() values, and
            // does not overlap the history's memory (caller's contract).
            unsafe {
                std::ptr::copy_nonoverlapping(evicted.as_ptr(), out_payloads, evicted.len());
            }
        }
        // SAFETY: out_len checked non-null above.
        unsafe { *out_len = evicted.len() };
        CTXW_OK
    })
}

/// Writes the number of entries to `*out`.
///
/// # Safety
/// `history` must be a valid history pointer and `out` valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_history_len(
    history: *const ctxw_history,
    out: *mut usize,
) -> ctxw_status {
    boundary(|| {
        let history = try_ref_from_ptr!(history);
        non_null!(out);
        // SAFETY: out is non-null and valid for a write by the caller's contract.
        unsafe { *out = history.inner.len() };
        CTXW_OK
    })
}

/// Writes the sum of the entries' tokens to `*out`.
///
/// # Safety
/// `history` must be a valid history pointer and `out` valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_history_total_tokens(
    history: *const ctxw_history,
    out: *mut u64,
) -> ctxw_status {
    boundary(|| {
        let history = try_ref_from_ptr!(history);
        non_null!(out);
        // SAFETY: out is non-null and valid for a write by the caller's contract.
        unsafe { *out = history.inner.total_tokens() };
        CTXW_OK
    })
}

/// Reads the entry at `index` (0 is the oldest): its payload, tokens and group flag. Any of the
/// out-pointers may be NULL when that value is not wanted. `CTXW_INDEX_OUT_OF_RANGE` past the end.
///
/// # Safety
/// `history` must be a valid history pointer; each non-NULL out-pointer valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_history_get(
    history: *const ctxw_history,
    index: usize,
    out_payload: *mut u64,
    out_tokens: *mut u64,
    out_starts_group: *mut bool,
) -> ctxw_status {
    boundary(|| {
        let history = try_ref_from_ptr!(history);
        let Some((&payload, tokens, starts_group)) = history.inner.get(index) else {
            return core_error(ctxwindow_core::Error::IndexOutOfRange {
                index: i64::try_from(index).unwrap_or(i64::MAX),
                len: history.inner.len(),
            });
        };
        // SAFETY: each pointer is written only when non-null; valid by the caller's contract.
        unsafe {
            if !out_payload.is_null() {
                *out_payload = payload;
            }
            if !out_tokens.is_null() {
                *out_tokens = tokens;
            }
            if !out_starts_group.is_null() {
                *out_starts_group = starts_group;
            }
        }
        CTXW_OK
    })
}

/// Marks the current state in `*out` for `ctxw_history_rollback`. O(1); holds no payload copy.
/// The caller owns the snapshot and frees it with `ctxw_snapshot_free`; while it lives, the
/// history keeps the entries evicted after it.
///
/// # Safety
/// `history` must be a valid history pointer and `out` valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_history_snapshot(
    history: *mut ctxw_history,
    out: *mut *mut ctxw_snapshot,
) -> ctxw_status {
    boundary(|| {
        let history = try_mut_from_ptr!(history);
        non_null!(out);
        let snapshot = ctxw_snapshot {
            inner: history.inner.snapshot(),
        };
        // SAFETY: out checked non-null and valid by the caller's contract.
        unsafe { set_boxed(out, snapshot) };
        CTXW_OK
    })
}

/// Frees a snapshot. NULL is accepted and ignored. The thread's last error is kept.
///
/// # Safety
/// `snapshot` must be NULL or a pointer from `ctxw_history_snapshot` not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_snapshot_free(snapshot: *mut ctxw_snapshot) {
    let _ = guarded(|| {
        // SAFETY: NULL or a pointer from ctxw_history_snapshot not yet freed (caller's contract).
        unsafe { free_box(snapshot) };
        CTXW_OK
    });
}

/// Restores exactly the state at `snapshot`: entries evicted since come back, entries pushed
/// since are dropped. `CTXW_FOREIGN_SNAPSHOT` for a snapshot of another history,
/// `CTXW_SNAPSHOT_UNREACHABLE` when a rollback to an older snapshot discarded its branch.
///
/// # Safety
/// `history` must be a valid history pointer and `snapshot` a valid snapshot pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_history_rollback(
    history: *mut ctxw_history,
    snapshot: *const ctxw_snapshot,
) -> ctxw_status {
    boundary(|| {
        let history = try_mut_from_ptr!(history);
        let snapshot = try_ref_from_ptr!(snapshot);
        match history.inner.rollback(&snapshot.inner) {
            Ok(_) => {
                history.inner.release_unreachable();
                CTXW_OK
            }
            Err(err) => core_error(err),
        }
    })
}

/// Removes every entry (a rollback to an earlier snapshot restores them).
///
/// # Safety
/// `history` must be a valid history pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ctxw_history_clear(history: *mut ctxw_history) -> ctxw_status {
    boundary(|| {
        try_mut_from_ptr!(history).inner.clear();
        CTXW_OK
    })
}
