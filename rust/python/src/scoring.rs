//! Batch scoring and selection over numpy columns. The Python wrapper (`ctxwindow.scoring`)
//! normalizes the columns to contiguous arrays of the dtypes read here, without copying those
//! that already are; this file only borrows them and releases the GIL for the work.

use ctxwindow_core::score::{self, Columns, Floats, Policy};
use ctxwindow_core::select::{self, Selection, Stop};
use numpy::{
    PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArrayDyn, PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{IntoPyResult, Kind, error};

/// A float column as borrowed from numpy, float32 or float64.
enum FloatArray<'py> {
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
}

impl<'py> FloatArray<'py> {
    fn extract(obj: Option<&Bound<'py, PyAny>>, name: &str) -> PyResult<Option<Self>> {
        let Some(obj) = obj else { return Ok(None) };
        if obj.is_none() {
            return Ok(None);
        }
        if let Ok(array) = obj.extract::<PyReadonlyArrayDyn<'py, f64>>() {
            return Ok(Some(FloatArray::F64(array)));
        }
        if let Ok(array) = obj.extract::<PyReadonlyArrayDyn<'py, f32>>() {
            return Ok(Some(FloatArray::F32(array)));
        }
        Err(error(
            obj.py(),
            Kind::InvalidType,
            format!("column {name} must be a float32 or float64 array"),
        ))
    }

    fn floats(&self, name: &str, py: Python<'_>) -> PyResult<Floats<'_>> {
        let not_contiguous = || {
            error(
                py,
                Kind::InvalidArgument,
                format!("column {name} must be C-contiguous"),
            )
        };
        Ok(match self {
            FloatArray::F32(a) => Floats::F32(a.as_slice().map_err(|_| not_contiguous())?),
            FloatArray::F64(a) => Floats::F64(a.as_slice().map_err(|_| not_contiguous())?),
        })
    }

    fn shape(&self) -> Vec<usize> {
        match self {
            FloatArray::F32(a) => a.shape().to_vec(),
            FloatArray::F64(a) => a.shape().to_vec(),
        }
    }
}

fn slice<'a, T: numpy::Element>(
    py: Python<'_>,
    array: &'a Option<PyReadonlyArray1<'_, T>>,
    name: &str,
) -> PyResult<Option<&'a [T]>> {
    array
        .as_ref()
        .map(|a| {
            a.as_slice().map_err(|_| {
                error(
                    py,
                    Kind::InvalidArgument,
                    format!("column {name} must be C-contiguous"),
                )
            })
        })
        .transpose()
}

fn param(params: &Bound<'_, PyDict>, key: &str, default: f64) -> PyResult<f64> {
    match params.get_item(key)? {
        None => Ok(default),
        Some(value) => value.extract::<f64>().map_err(|_| {
            error(
                params.py(),
                Kind::InvalidType,
                format!("parameter {key} must be a number, got {value}"),
            )
        }),
    }
}

fn param_array<const N: usize>(
    params: &Bound<'_, PyDict>,
    key: &str,
    default: [f64; N],
) -> PyResult<[f64; N]> {
    match params.get_item(key)? {
        None => Ok(default),
        Some(value) => value.extract::<[f64; N]>().map_err(|_| {
            error(
                params.py(),
                Kind::InvalidType,
                format!("parameter {key} must be {N} numbers, got {value}"),
            )
        }),
    }
}

fn sub_params<'py>(params: &Bound<'py, PyDict>, key: &str) -> PyResult<Bound<'py, PyDict>> {
    match params.get_item(key)? {
        None => Ok(PyDict::new(params.py())),
        Some(value) => value.cast_into::<PyDict>().map_err(|e| {
            error(
                params.py(),
                Kind::InvalidType,
                format!("parameter {key} must be a dict, got {}", e.into_inner()),
            )
        }),
    }
}

fn retention(p: &Bound<'_, PyDict>) -> PyResult<score::RetentionParams> {
    let d = score::RetentionParams::default();
    Ok(score::RetentionParams {
        max_age_turns: param(p, "max_age_turns", d.max_age_turns)?,
        recency_weight: param(p, "recency_weight", d.recency_weight)?,
        frequency_weight: param(p, "frequency_weight", d.frequency_weight)?,
    })
}

fn fifo(p: &Bound<'_, PyDict>) -> PyResult<score::FifoParams> {
    let d = score::FifoParams::default();
    Ok(score::FifoParams {
        half_life: param(p, "half_life", d.half_life)?,
    })
}

fn lru(p: &Bound<'_, PyDict>) -> PyResult<score::LruParams> {
    let d = score::LruParams::default();
    Ok(score::LruParams {
        half_life: param(p, "half_life", d.half_life)?,
        unreferenced_score: param(p, "unreferenced_score", d.unreferenced_score)?,
    })
}

fn priority(p: &Bound<'_, PyDict>) -> PyResult<score::PriorityParams> {
    let d = score::PriorityParams::default();
    Ok(score::PriorityParams {
        weights: param_array(p, "weights", d.weights)?,
        recency_turns: param(p, "recency_turns", d.recency_turns)?,
        source_prestige: param_array(p, "source_prestige", d.source_prestige)?,
        unknown_source: param(p, "unknown_source", d.unknown_source)?,
        reuse_saturation: param(p, "reuse_saturation", d.reuse_saturation)?,
        no_embedding_semantic: param(p, "no_embedding_semantic", d.no_embedding_semantic)?,
    })
}

fn type_ttl(p: &Bound<'_, PyDict>) -> PyResult<score::TypeTtlParams> {
    let d = score::TypeTtlParams::default();
    Ok(score::TypeTtlParams {
        ttl: param_array(p, "ttl", d.ttl)?,
    })
}

/// The policy of `name` with the canonical parameters built by `ctxwindow.scoring`.
fn policy(py: Python<'_>, name: &str, params: &Bound<'_, PyDict>) -> PyResult<Policy> {
    Ok(match Policy::by_name(name).py_err(py)? {
        Policy::Retention(_) => Policy::Retention(retention(params)?),
        Policy::Fifo(_) => Policy::Fifo(fifo(params)?),
        Policy::Lru(_) => Policy::Lru(lru(params)?),
        Policy::Priority(_) => Policy::Priority(priority(params)?),
        Policy::TypeTtl(_) => Policy::TypeTtl(type_ttl(params)?),
        Policy::Hybrid(d) => Policy::Hybrid(score::HybridParams {
            weights: param_array(params, "weights", d.weights)?,
            fifo: fifo(&sub_params(params, "fifo")?)?,
            lru: lru(&sub_params(params, "lru")?)?,
            priority: priority(&sub_params(params, "priority")?)?,
            type_ttl: type_ttl(&sub_params(params, "type_ttl")?)?,
        }),
    })
}

/// Scores over normalized columns (see `ctxwindow.scoring.score`).
#[pyfunction]
#[pyo3(signature = (
    policy_name, current_turn, params, *, tokens = None, created_turn = None,
    last_access_turn = None, access_count = None, content_type = None, priority = None,
    pinned = None, reference_count = None, embedding = None, task_embedding = None,
    threads = None, out = None
))]
#[allow(clippy::too_many_arguments)]
pub fn score_columns<'py>(
    py: Python<'py>,
    policy_name: &str,
    current_turn: i64,
    params: &Bound<'py, PyDict>,
    tokens: Option<PyReadonlyArray1<'py, i64>>,
    created_turn: Option<PyReadonlyArray1<'py, i64>>,
    last_access_turn: Option<PyReadonlyArray1<'py, i64>>,
    access_count: Option<PyReadonlyArray1<'py, i64>>,
    content_type: Option<PyReadonlyArray1<'py, u8>>,
    priority: Option<&Bound<'py, PyAny>>,
    pinned: Option<PyReadonlyArray1<'py, u8>>,
    reference_count: Option<PyReadonlyArray1<'py, i64>>,
    embedding: Option<&Bound<'py, PyAny>>,
    task_embedding: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
    out: Option<Bound<'py, PyArray1<f64>>>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let policy = self::policy(py, policy_name, params)?;
    let priority = FloatArray::extract(priority, "priority")?;
    let embedding = FloatArray::extract(embedding, "embedding")?;
    let task_embedding = FloatArray::extract(task_embedding, "task_embedding")?;
    if let Some(shape) = embedding.as_ref().map(FloatArray::shape)
        && shape.len() != 2
    {
        return Err(error(
            py,
            Kind::InvalidArgument,
            format!("embedding must be a 2-d array (n x dim), got shape {shape:?}"),
        ));
    }
    let columns = Columns {
        tokens: slice(py, &tokens, "tokens")?,
        created_turn: slice(py, &created_turn, "created_turn")?,
        last_access_turn: slice(py, &last_access_turn, "last_access_turn")?,
        access_count: slice(py, &access_count, "access_count")?,
        content_type: slice(py, &content_type, "content_type")?,
        priority: priority
            .as_ref()
            .map(|a| a.floats("priority", py))
            .transpose()?,
        pinned: slice(py, &pinned, "pinned")?,
        reference_count: slice(py, &reference_count, "reference_count")?,
        embedding: embedding
            .as_ref()
            .map(|a| a.floats("embedding", py))
            .transpose()?,
        task_embedding: task_embedding
            .as_ref()
            .map(|a| a.floats("task_embedding", py))
            .transpose()?,
    };
    let n = columns.item_count().py_err(py)?;
    // Without `out`, numpy allocates the output (large arrays get transparent huge pages there,
    // which makes first-touch page faults far cheaper than on a fresh Vec).
    let out = match out {
        Some(out) if out.len() == n => out,
        Some(out) => {
            return Err(error(
                py,
                Kind::InvalidArgument,
                format!("out holds {} values but there are {n} items", out.len()),
            ));
        }
        None => PyArray1::<f64>::zeros(py, n, false),
    };
    {
        let mut view = out.try_readwrite().map_err(|_| {
            error(
                py,
                Kind::InvalidArgument,
                "out must be a writable array not borrowed elsewhere",
            )
        })?;
        let slots = view
            .as_slice_mut()
            .map_err(|_| error(py, Kind::InvalidArgument, "out must be C-contiguous"))?;
        py.detach(|| score::score(&policy, current_turn, &columns, slots, threads))
            .py_err(py)?;
    }
    Ok(out)
}

/// Indices to evict over normalized columns (see `ctxwindow.scoring.select_evictions`).
#[pyfunction]
#[pyo3(signature = (
    scores, tokens = None, pinned = None, content_type = None, *, target_free_tokens = None,
    ratio = None, min_keep = 0
))]
#[allow(clippy::too_many_arguments)]
pub fn select_columns<'py>(
    py: Python<'py>,
    scores: PyReadonlyArray1<'py, f64>,
    tokens: Option<PyReadonlyArray1<'py, i64>>,
    pinned: Option<PyReadonlyArray1<'py, u8>>,
    content_type: Option<PyReadonlyArray1<'py, u8>>,
    target_free_tokens: Option<u64>,
    ratio: Option<f64>,
    min_keep: usize,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let stop = match (target_free_tokens, ratio) {
        (Some(target), None) => Stop::TargetFreeTokens(target),
        (None, Some(ratio)) => Stop::Ratio(ratio),
        _ => {
            return Err(error(
                py,
                Kind::InvalidArgument,
                "give exactly one of target_free_tokens and ratio",
            ));
        }
    };
    let scores = scores
        .as_slice()
        .map_err(|_| error(py, Kind::InvalidArgument, "scores must be C-contiguous"))?;
    let selection = Selection {
        scores,
        tokens: slice(py, &tokens, "tokens")?,
        pinned: slice(py, &pinned, "pinned")?,
        content_type: slice(py, &content_type, "content_type")?,
        min_keep,
    };
    let chosen = py
        .detach(|| select::select_evictions(&selection, stop))
        .py_err(py)?;
    let chosen: Vec<i64> = chosen.into_iter().map(|i| i as i64).collect();
    Ok(PyArray1::from_vec(py, chosen))
}

/// Order-preserving keys of float64 scores (see `ctxwindow.dask`).
#[pyfunction]
pub fn order_keys<'py>(
    py: Python<'py>,
    scores: PyReadonlyArray1<'py, f64>,
) -> PyResult<Bound<'py, PyArray1<u64>>> {
    let scores = scores
        .as_slice()
        .map_err(|_| error(py, Kind::InvalidArgument, "scores must be C-contiguous"))?;
    // numpy's allocation: large arrays get transparent huge pages (cheaper first touch).
    let keys = PyArray1::<u64>::zeros(py, scores.len(), false);
    {
        let mut view = keys.readwrite();
        let slots = view.as_slice_mut().expect("a new array is contiguous");
        py.detach(|| select::order_keys(scores, slots)).py_err(py)?;
    }
    Ok(keys)
}

/// One level of the key histogram (counts, and token sums when tokens are given) of
/// `ctxwindow.dask.select_evictions`.
#[pyfunction]
#[pyo3(signature = (keys, mask, tokens, level, prefix))]
#[allow(clippy::type_complexity)]
pub fn key_histogram<'py>(
    py: Python<'py>,
    keys: PyReadonlyArray1<'py, u64>,
    mask: Option<PyReadonlyArray1<'py, u8>>,
    tokens: Option<PyReadonlyArray1<'py, i64>>,
    level: u32,
    prefix: u64,
) -> PyResult<(Bound<'py, PyArray1<i64>>, Option<Bound<'py, PyArray1<i64>>>)> {
    let keys = keys
        .as_slice()
        .map_err(|_| error(py, Kind::InvalidArgument, "keys must be C-contiguous"))?;
    let mask = slice(py, &mask, "mask")?;
    let tokens_slice = slice(py, &tokens, "tokens")?;
    let bins = 1usize << select::KEY_DIGIT_BITS;
    let mut counts = vec![0i64; bins];
    let mut sums = vec![0i64; if tokens_slice.is_some() { bins } else { 0 }];
    py.detach(|| {
        select::key_histogram(
            keys,
            mask,
            tokens_slice,
            level,
            prefix,
            &mut counts,
            &mut sums,
        )
    })
    .py_err(py)?;
    let sums = tokens_slice.is_some().then(|| PyArray1::from_vec(py, sums));
    Ok((PyArray1::from_vec(py, counts), sums))
}
