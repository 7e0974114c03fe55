//! `ctxwindow._native`: the PyO3 translation of `ctxwindow-core`. Types, errors and the GIL are
//! handled here; every piece of logic lives in the core.

use pyo3::prelude::*;

mod errors;
mod history;
mod lexical;
mod messages;
mod models;
mod scoring;
mod tokenizer;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<history::PyTokenHistory>()?;
    m.add_class::<history::PySnapshot>()?;
    m.add_class::<tokenizer::PyTokenizer>()?;
    m.add_class::<lexical::PyBm25Index>()?;
    m.add_class::<tokenizer::PyHeuristicTokenizer>()?;
    m.add_class::<tokenizer::PyEstimateTokenizer>()?;
    m.add_class::<tokenizer::PyCallableTokenizer>()?;
    m.add_function(wrap_pyfunction!(tokenizer::encoding_names, m)?)?;
    m.add_function(wrap_pyfunction!(tokenizer::encoding_for_model, m)?)?;
    m.add_function(wrap_pyfunction!(tokenizer::image_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(models::model_names, m)?)?;
    m.add_function(wrap_pyfunction!(models::model_table, m)?)?;
    m.add_function(wrap_pyfunction!(scoring::score_columns, m)?)?;
    m.add_function(wrap_pyfunction!(scoring::select_columns, m)?)?;
    m.add_function(wrap_pyfunction!(scoring::order_keys, m)?)?;
    m.add_function(wrap_pyfunction!(scoring::key_histogram, m)?)?;
    Ok(())
}
