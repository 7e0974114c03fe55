//! `Bm25Index`: the core's BM25 index of archived messages, for recall.

use ctxwindow_core::lexical::{Bm25Index, words};
use pyo3::prelude::*;

use pyo3::types::PyBool;

use crate::errors::{Kind, error, extract_count, extract_text, type_name};

#[pyclass(module = "ctxwindow._native", name = "Bm25Index")]
#[derive(Default)]
pub struct PyBm25Index {
    inner: Bm25Index,
}

#[pymethods]
impl PyBm25Index {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Indexes `text` as the next document; returns its number (0, 1, 2, ...).
    fn add(&mut self, text: &Bound<'_, PyAny>) -> PyResult<usize> {
        let text = extract_text(text, "text")?;
        Ok(self.inner.add(&text))
    }

    /// Forgets the documents numbered `documents` and above (the newest), as if never added.
    fn truncate(&mut self, documents: &Bound<'_, PyAny>) -> PyResult<()> {
        let documents = extract_count(documents, "documents")?;
        self.inner
            .truncate(usize::try_from(documents).unwrap_or(usize::MAX));
        Ok(())
    }

    /// The `limit` best documents for `query`: `(document, score, coverage)`, best first (ties:
    /// newer first); coverage is the idf-weighted share of the query's distinct terms the
    /// document contains. Documents sharing no term with the query are left out.
    fn search(
        &self,
        py: Python<'_>,
        query: &Bound<'_, PyAny>,
        limit: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<(usize, f32, f32)>> {
        let query = extract_text(query, "query")?;
        let limit = extract_count(limit, "limit")?;
        let limit = usize::try_from(limit).map_err(|_| {
            error(
                py,
                Kind::InvalidArgument,
                format!("limit {limit} is too large"),
            )
        })?;
        let inner = &self.inner;
        let hits = py.detach(|| inner.search(&query, limit));
        Ok(hits
            .into_iter()
            .map(|h| (h.document, h.score, h.coverage))
            .collect())
    }

    /// The index terms of `text` (lowercased, function words and single letters dropped,
    /// plurals stemmed unless `stem=False`).
    #[staticmethod]
    #[pyo3(signature = (text, stem = None))]
    fn terms(text: &Bound<'_, PyAny>, stem: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
        let text = extract_text(text, "text")?;
        let stem = match stem {
            None => true,
            Some(flag) => flag.cast::<PyBool>().map(|b| b.is_true()).map_err(|_| {
                error(
                    flag.py(),
                    Kind::InvalidType,
                    format!("stem must be a bool, not {}", type_name(flag)),
                )
            })?,
        };
        Ok(words(&text, stem))
    }

    /// Documents in the index (the next document's number).
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!("Bm25Index(documents={})", self.inner.len())
    }
}
