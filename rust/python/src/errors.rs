//! The one mapping of core errors to Python exceptions. The exception classes are defined in
//! `ctxwindow/errors.py` (each subclasses `CtxWindowError` and the matching builtin) and looked up
//! once.

use ctxwindow_core::Error;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;
use pyo3::types::PyType;

/// The exception classes of `ctxwindow.errors` raised from native code.
#[derive(Clone, Copy)]
pub enum Kind {
    InvalidArgument,
    InvalidType,
    UnknownEncoding,
    Snapshot,
    Index,
    InvalidText,
    MalformedMessage,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::InvalidArgument => "InvalidArgumentError",
            Kind::InvalidType => "InvalidTypeError",
            Kind::UnknownEncoding => "UnknownEncodingError",
            Kind::Snapshot => "SnapshotError",
            Kind::Index => "HistoryIndexError",
            Kind::InvalidText => "InvalidTextError",
            Kind::MalformedMessage => "MalformedMessageError",
        }
    }

    fn cell(self) -> &'static PyOnceLock<Py<PyType>> {
        static CELLS: [PyOnceLock<Py<PyType>>; 7] = [const { PyOnceLock::new() }; 7];
        &CELLS[self as usize]
    }
}

/// A Python exception of `kind` with `message`.
pub fn error(py: Python<'_>, kind: Kind, message: impl Into<String>) -> PyErr {
    let message = message.into();
    match kind
        .cell()
        .import(py, "ctxwindow.errors", kind.class_name())
    {
        Ok(class) => PyErr::from_type(class.clone(), message),
        Err(import_error) => import_error,
    }
}

/// The Python exception of a core error.
pub fn to_py(py: Python<'_>, err: Error) -> PyErr {
    let kind = match &err {
        Error::ForeignSnapshot | Error::SnapshotUnreachable(_) => Kind::Snapshot,
        Error::IndexOutOfRange { .. } => Kind::Index,
        Error::UnknownEncoding { .. } | Error::UnknownModel { .. } => Kind::UnknownEncoding,
        Error::InvalidUtf8 { .. } => Kind::InvalidText,
        Error::MalformedMessage { .. } => Kind::MalformedMessage,
        _ => Kind::InvalidArgument,
    };
    error(py, kind, err.to_string())
}

/// Extension to turn core results into Python results.
pub trait IntoPyResult<T> {
    /// Maps the error with [`to_py`].
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, Error> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|err| to_py(py, err))
    }
}

/// The name of an object's type, for messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|name| name.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

/// A non-negative integer argument (`int` or anything with `__index__`; never `bool` or
/// `float`), as u64.
pub fn extract_count(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    let py = obj.py();
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(error(
            py,
            Kind::InvalidType,
            format!("{what} must be an int, not bool"),
        ));
    }
    // The common case first: one C call for an in-range int.
    if let Ok(value) = obj.extract::<u64>() {
        return Ok(value);
    }
    let value: i128 = obj.extract().map_err(|_| {
        error(
            py,
            Kind::InvalidType,
            format!("{what} must be an int, not {}", type_name(obj)),
        )
    })?;
    let reason = if value < 0 {
        "must be >= 0"
    } else {
        "must be < 2**64"
    };
    Err(error(
        py,
        Kind::InvalidArgument,
        format!("{what} {reason}, got {value}"),
    ))
}

/// A `str` argument as UTF-8, read the way Python tiktoken's `encode` reads text: a string with
/// lone surrogates (which UTF-8 cannot carry) is first passed through
/// `text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")`, so each lone surrogate
/// becomes U+FFFD and a split surrogate pair becomes its character.
pub fn extract_text(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<PyBackedStr> {
    let py = obj.py();
    let Ok(text) = obj.cast::<PyString>() else {
        return Err(error(
            py,
            Kind::InvalidType,
            format!("{what} must be a str, not {}", type_name(obj)),
        ));
    };
    tiktoken_text(text)
}

/// `text` as UTF-8 with lone surrogates replaced as Python tiktoken replaces them (see
/// [`extract_text`]).
pub fn tiktoken_text(text: &Bound<'_, PyString>) -> PyResult<PyBackedStr> {
    if let Ok(utf8) = text.extract::<PyBackedStr>() {
        return Ok(utf8);
    }
    let py = text.py();
    text.call_method1(intern!(py, "encode"), ("utf-16", "surrogatepass"))?
        .call_method1(intern!(py, "decode"), ("utf-16", "replace"))?
        .extract::<PyBackedStr>()
}

/// A `str` argument that must be valid Unicode: `InvalidTypeError` for another type,
/// `InvalidTextError` naming the position of the first lone surrogate (UTF-8 cannot carry one,
/// and a name with one matches nothing).
pub fn extract_strict_text(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<PyBackedStr> {
    let py = obj.py();
    let Ok(text) = obj.cast::<PyString>() else {
        return Err(error(
            py,
            Kind::InvalidType,
            format!("{what} must be a str, not {}", type_name(obj)),
        ));
    };
    if let Ok(utf8) = text.extract::<PyBackedStr>() {
        return Ok(utf8);
    }
    // Surrogates pass through as three bytes each; the valid prefix counts the characters
    // before the first one.
    let bytes = text
        .call_method1(intern!(py, "encode"), ("utf-8", "surrogatepass"))?
        .extract::<Vec<u8>>()?;
    let valid = match std::str::from_utf8(&bytes) {
        Ok(_) => bytes.len(),
        Err(e) => e.valid_up_to(),
    };
    let position = String::from_utf8_lossy(&bytes[..valid]).chars().count();
    Err(error(
        py,
        Kind::InvalidText,
        format!(
            "{what} is not valid Unicode: a lone surrogate at position {position} (UTF-8 cannot \
             encode it)"
        ),
    ))
}
