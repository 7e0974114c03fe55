//! The model table of the core (`ctxwindow_core::models`), read from Python.

use ctxwindow_core::models::{self, Counting};
use pyo3::prelude::*;

use crate::errors::extract_strict_text;

/// `model`, then what follows each provider prefix in it (ending in `:`, `/` or `.`): the names
/// every model table is searched for, in order. A name with a lone surrogate is an
/// `InvalidTextError`.
#[pyfunction]
pub fn model_names(model: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let model = extract_strict_text(model, "model")?;
    Ok(models::model_names(&model).map(str::to_owned).collect())
}

/// The counting rows of the model table, in the order a lookup tries them: `(pattern, kind,
/// value)` where `pattern` is a model name or a prefix ending in `*`, `kind` is `"encoding"`
/// (`value`: the encoding's name) or `"estimate"` (`value`: the family's name).
#[pyfunction]
pub fn model_table() -> Vec<(String, &'static str, &'static str)> {
    models::counting_rows()
        .map(|row| {
            let pattern = if row.prefix {
                format!("{}*", row.name)
            } else {
                row.name.to_owned()
            };
            match row.counting {
                Counting::Exact(encoding) => (pattern, "encoding", encoding.name()),
                Counting::Estimate(profile) => (pattern, "estimate", profile.family),
            }
        })
        .collect()
}
