//! The only conversions between the C side's pointers and Rust references or boxes (rustls-ffi's
//! `Castable` is the model). A type C receives a pointer to says how it is held:
//!
//! - [`Castable`]: C hands the library a pointer to it, which is borrowed for one call
//!   ([`try_ref_from_ptr!`], [`try_mut_from_ptr!`]);
//! - [`BoxCastable`]: also an opaque handle the library allocates ([`set_boxed`]) and frees
//!   ([`free_box`]); C only ever holds the pointer.
//!
//! Each `ctxw_` function states the caller's side of the contract (a pointer is NULL or valid,
//! and a `_mut` one is not used by another call at the same time); the helpers check NULL and
//! turn a NULL argument into `CTXW_NULL_ARGUMENT`.

/// A type C passes to the library by pointer, borrowed for the length of one call.
pub(crate) trait Castable {}

/// An opaque handle: a `Box` the library allocates and C frees through the matching `_free`.
pub(crate) trait BoxCastable: Castable + Sized {}

/// The value behind `ptr`, or `None` for NULL.
///
/// # Safety
/// `ptr` is NULL or points to a valid `T` that nothing changes during `'a`.
pub(crate) unsafe fn try_from<'a, T: Castable>(ptr: *const T) -> Option<&'a T> {
    // SAFETY: NULL or valid and not changed during 'a (this function's contract).
    unsafe { ptr.as_ref() }
}

/// The value behind `ptr`, mutably, or `None` for NULL.
///
/// # Safety
/// `ptr` is NULL or points to a valid `T` that nothing else reads or changes during `'a`.
pub(crate) unsafe fn try_from_mut<'a, T: Castable>(ptr: *mut T) -> Option<&'a mut T> {
    // SAFETY: NULL or valid and unaliased during 'a (this function's contract).
    unsafe { ptr.as_mut() }
}

/// Moves `value` into a new box and writes its pointer to `*out`; C owns it from then on and
/// gives it back to [`free_box`].
///
/// # Safety
/// `out` is non-NULL and valid for a write.
pub(crate) unsafe fn set_boxed<T: BoxCastable>(out: *mut *mut T, value: T) {
    // SAFETY: out is non-NULL and valid for a write (this function's contract).
    unsafe { *out = Box::into_raw(Box::new(value)) };
}

/// Frees a handle from [`set_boxed`]; NULL is ignored.
///
/// # Safety
/// `ptr` is NULL or a pointer from [`set_boxed`] of the same `T`, not yet freed and not in use.
pub(crate) unsafe fn free_box<T: BoxCastable>(ptr: *mut T) {
    if !ptr.is_null() {
        // SAFETY: the pointer came from Box::into_raw in set_boxed and is freed once (contract).
        drop(unsafe { Box::from_raw(ptr) });
    }
}

/// `&T` from a `*const T` argument named by the identifier, or a `CTXW_NULL_ARGUMENT` return
/// naming it. Only inside a `ctxw_` function whose contract makes the pointer NULL or valid.
macro_rules! try_ref_from_ptr {
    ($ptr:ident) => {
        // SAFETY: the enclosing function's contract: NULL or a valid, unchanged value.
        match unsafe { $crate::castable::try_from($ptr) } {
            Some(value) => value,
            None => {
                return $crate::status::fail(
                    $crate::status::ctxw_status::CTXW_NULL_ARGUMENT,
                    concat!("argument `", stringify!($ptr), "` is NULL"),
                );
            }
        }
    };
}
pub(crate) use try_ref_from_ptr;

/// `&mut T` from a `*mut T` argument named by the identifier, or a `CTXW_NULL_ARGUMENT` return
/// naming it. Only inside a `ctxw_` function whose contract makes the pointer NULL or valid and
/// unaliased.
macro_rules! try_mut_from_ptr {
    ($ptr:ident) => {
        // SAFETY: the enclosing function's contract: NULL or a valid value no one else uses.
        match unsafe { $crate::castable::try_from_mut($ptr) } {
            Some(value) => value,
            None => {
                return $crate::status::fail(
                    $crate::status::ctxw_status::CTXW_NULL_ARGUMENT,
                    concat!("argument `", stringify!($ptr), "` is NULL"),
                );
            }
        }
    };
}
pub(crate) use try_mut_from_ptr;
