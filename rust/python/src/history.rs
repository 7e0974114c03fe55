//! `TokenHistory` for Python: the core history over Python objects, behind a mutex so the object
//! can be shared between threads. The lock is never held while Python code may run: payloads that
//! leave the history are dropped (or returned) after the lock is released.

use std::sync::{Mutex, MutexGuard};

use ctxwindow_core::{Snapshot, TokenHistory};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::errors::{IntoPyResult, Kind, error, extract_count, type_name};

/// A token-tracked FIFO of Python objects; see `ctxwindow.TokenHistory`.
#[pyclass(frozen, module = "ctxwindow._native", name = "TokenHistory")]
pub struct PyTokenHistory {
    inner: Mutex<TokenHistory<Py<PyAny>>>,
}

/// A restorable point of one `TokenHistory`.
#[pyclass(frozen, module = "ctxwindow._native", name = "HistorySnapshot")]
pub struct PySnapshot {
    inner: Snapshot,
}

#[pymethods]
impl PySnapshot {
    /// Number of entries the history held when the snapshot was taken.
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// Token total of the history when the snapshot was taken.
    #[getter]
    fn total_tokens(&self) -> u64 {
        self.inner.total_tokens()
    }

    fn __repr__(&self) -> String {
        format!(
            "HistorySnapshot(len={}, total_tokens={})",
            self.inner.len(),
            self.inner.total_tokens()
        )
    }
}

fn extract_index(index: &Bound<'_, PyAny>) -> PyResult<Index> {
    let py = index.py();
    if index.is_instance_of::<pyo3::types::PyBool>() {
        return Err(error(
            py,
            Kind::InvalidType,
            "history index must be an int, not bool",
        ));
    }
    if let Ok(index) = index.extract::<isize>() {
        return Ok(Index::Fits(index));
    }
    // An int (or `__index__`) beyond the platform's range is out of range of any history.
    match py
        .import(intern!(py, "operator"))?
        .call_method1(intern!(py, "index"), (index,))
    {
        Ok(value) => Ok(Index::TooLarge(value.str()?.to_string())),
        Err(_) => Err(error(
            py,
            Kind::InvalidType,
            format!("history index must be an int, not {}", type_name(index)),
        )),
    }
}

/// A history index as Python gave it.
enum Index {
    /// Within the platform's `isize`.
    Fits(isize),
    /// Beyond it (its decimal digits), so beyond any history.
    TooLarge(String),
}

impl PyTokenHistory {
    fn lock(&self) -> MutexGuard<'_, TokenHistory<Py<PyAny>>> {
        // A panic inside the core cannot leave the history half-changed (every mutation is
        // planned before it is applied), so a poisoned lock still guards a consistent value.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The position of `index` (negative counts from the end) in a history of `len` entries, or
    /// `Err(len)` when it is out of range.
    fn resolve(index: isize, len: usize) -> Result<usize, usize> {
        let resolved = if index < 0 {
            isize::try_from(len).ok().and_then(|n| index.checked_add(n))
        } else {
            Some(index)
        };
        match resolved.and_then(|i| usize::try_from(i).ok()) {
            Some(i) if i < len => Ok(i),
            _ => Err(len),
        }
    }

    fn index_error(py: Python<'_>, index: &str, len: usize) -> PyErr {
        error(
            py,
            Kind::Index,
            format!("index {index} out of range for a history of {len} entries"),
        )
    }
}

#[pymethods]
impl PyTokenHistory {
    #[new]
    fn new() -> Self {
        Self {
            inner: Mutex::new(TokenHistory::new()),
        }
    }

    /// Appends `item` with its token count; `starts_group=False` attaches it to the group of the
    /// previous entry (a tool result to its call).
    #[pyo3(
        signature = (item, tokens, starts_group = None),
        text_signature = "(self, item, tokens, starts_group=True)"
    )]
    fn push(
        &self,
        py: Python<'_>,
        item: Py<PyAny>,
        tokens: &Bound<'_, PyAny>,
        starts_group: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let tokens = extract_count(tokens, "tokens")?;
        let starts_group = match starts_group {
            None => true,
            Some(flag) => match flag.cast::<pyo3::types::PyBool>() {
                Ok(flag) => flag.is_true(),
                Err(_) => {
                    return Err(error(
                        py,
                        Kind::InvalidType,
                        format!("starts_group must be a bool, not {}", type_name(flag)),
                    ));
                }
            },
        };
        // On error the core drops `item` under the lock; the caller still holds a reference to
        // it, so that drop only decrements a count and runs no Python code.
        let result = self.lock().push(item, tokens, starts_group);
        result.py_err(py)
    }

    /// Drops the oldest whole groups until `total + overhead <= target` (target: `low_watermark`
    /// if given, else `max_tokens`); nothing while `total + overhead <= max_tokens`. Returns the
    /// evicted items, oldest first.
    #[pyo3(
        signature = (max_tokens, overhead = None, low_watermark = None),
        text_signature = "(self, max_tokens, overhead=0, low_watermark=None)"
    )]
    fn evict<'py>(
        &self,
        py: Python<'py>,
        max_tokens: &Bound<'py, PyAny>,
        overhead: Option<&Bound<'py, PyAny>>,
        low_watermark: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let max_tokens = extract_count(max_tokens, "max_tokens")?;
        let overhead = match overhead {
            Some(overhead) => extract_count(overhead, "overhead")?,
            None => 0,
        };
        let low_watermark = match low_watermark {
            Some(value) if !value.is_none() => Some(extract_count(value, "low_watermark")?),
            _ => None,
        };
        let (evicted, released) = {
            let mut history = self.lock();
            let evicted = history.evict(max_tokens, overhead, low_watermark);
            (evicted, history.release_unreachable())
        };
        drop(released);
        PyList::new(py, evicted.py_err(py)?)
    }

    /// A marker of the current state for `rollback`. Cheap: no copy of the items.
    fn snapshot(&self) -> PySnapshot {
        let (snapshot, released) = {
            let mut history = self.lock();
            let snapshot = history.snapshot();
            (snapshot, history.release_unreachable())
        };
        drop(released);
        PySnapshot { inner: snapshot }
    }

    /// Restores exactly the state at `snapshot` (entries evicted since come back, entries pushed
    /// since are dropped).
    fn rollback(&self, py: Python<'_>, snapshot: &Bound<'_, PyAny>) -> PyResult<()> {
        let Ok(snapshot) = snapshot.cast::<PySnapshot>() else {
            return Err(error(
                py,
                Kind::InvalidType,
                format!(
                    "rollback expects a snapshot from TokenHistory.snapshot(), not {}",
                    type_name(snapshot)
                ),
            ));
        };
        let (discarded, released) = {
            let mut history = self.lock();
            let discarded = history.rollback(&snapshot.get().inner);
            (discarded, history.release_unreachable())
        };
        drop(released);
        discarded.map(drop).py_err(py)
    }

    /// Removes every entry (a rollback to an earlier snapshot restores them).
    fn clear(&self) {
        let removed = self.lock().clear();
        drop(removed);
    }

    /// Sum of the tokens of the entries.
    #[getter]
    fn total_tokens(&self) -> u64 {
        self.lock().total_tokens()
    }

    /// Number of evicted entries kept aside for live snapshots.
    #[getter]
    fn kept_for_snapshots(&self) -> usize {
        self.lock().kept_for_snapshots()
    }

    fn __len__(&self) -> usize {
        self.lock().len()
    }

    fn __getitem__(&self, py: Python<'_>, index: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.entry(py, index).map(|(item, _, _)| item)
    }

    /// `(item, tokens, starts_group)` of the entry at `index` (negative counts from the end).
    fn entry(&self, py: Python<'_>, index: &Bound<'_, PyAny>) -> PyResult<(Py<PyAny>, u64, bool)> {
        let index = extract_index(index)?;
        // The lock is held only to copy the entry: the exception of a bad index is created after
        // it is released (creating a Python object may run a finalizer that uses this history).
        let found = {
            let history = self.lock();
            match &index {
                Index::Fits(index) => Self::resolve(*index, history.len()).map(|i| {
                    let (item, tokens, starts_group) = history.get(i).expect("index resolved");
                    (item.clone_ref(py), tokens, starts_group)
                }),
                Index::TooLarge(_) => Err(history.len()),
            }
        };
        found.map_err(|len| match index {
            Index::Fits(index) => Self::index_error(py, &index.to_string(), len),
            Index::TooLarge(digits) => Self::index_error(py, &digits, len),
        })
    }

    /// Every entry as `(item, tokens, starts_group)`, oldest first.
    fn entries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let entries: Vec<(Py<PyAny>, u64, bool)> = self
            .lock()
            .iter()
            .map(|(item, tokens, starts_group)| (item.clone_ref(py), tokens, starts_group))
            .collect();
        PyList::new(py, entries)
    }

    /// Token counts of the entries, oldest first.
    fn token_counts(&self) -> Vec<u64> {
        self.lock().iter().map(|(_, tokens, _)| tokens).collect()
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let items: Vec<Py<PyAny>> = self
            .lock()
            .iter()
            .map(|(item, _, _)| item.clone_ref(py))
            .collect();
        PyList::new(py, items)?.try_iter().map(Bound::into_any)
    }

    fn __repr__(&self) -> String {
        let history = self.lock();
        format!(
            "TokenHistory(len={}, total_tokens={})",
            history.len(),
            history.total_tokens()
        )
    }
}
