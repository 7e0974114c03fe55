//! Token counters for Python: the exact `Tokenizer`, the `HeuristicTokenizer` estimator and the
//! `CallableTokenizer` adapter, sharing the chat accounting of the core.

use ctxwindow_core::chat::{REPLY_PRIMING_TOKENS, message_tokens, message_tokens_with};
use ctxwindow_core::estimate::{Estimate, MAX_SCALE, Profile, known_models};
use ctxwindow_core::image::{ImageDetail, ImagePricing};
use ctxwindow_core::tokenize::HeuristicCounter;
use ctxwindow_core::{Encoding, Tokenizer};
use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyString, PyTuple};

use crate::errors::{IntoPyResult, Kind, error, extract_count, extract_text, type_name};
use crate::messages::with_message;

/// Texts at least this long are counted with the GIL released.
const DETACH_MIN_BYTES: usize = 16 * 1024;

fn borrow_texts(strings: &[Bound<'_, PyAny>]) -> PyResult<Vec<PyBackedStr>> {
    strings
        .iter()
        .enumerate()
        .map(|(i, text)| extract_text(text, &format!("texts[{i}]")))
        .collect()
}

fn collect<'py>(iterable: &Bound<'py, PyAny>, what: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if iterable.is_instance_of::<PyString>() {
        return Err(error(
            iterable.py(),
            Kind::InvalidType,
            format!("{what} must be a sequence of str, not a single str"),
        ));
    }
    let iter = iterable.try_iter().map_err(|_| {
        error(
            iterable.py(),
            Kind::InvalidType,
            format!("{what} must be an iterable, not {}", type_name(iterable)),
        )
    })?;
    iter.collect()
}

/// Counts of many texts with any text counter, as a numpy uint32 array.
fn count_many_with<'py>(
    texts: &Bound<'py, PyAny>,
    mut count: impl FnMut(&str) -> PyResult<u64>,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let py = texts.py();
    let objects = collect(texts, "texts")?;
    let counts = borrow_texts(&objects)?
        .into_iter()
        .map(|text| {
            let tokens = count(&text)?;
            u32::try_from(tokens).map_err(|_| {
                error(
                    py,
                    Kind::InvalidArgument,
                    format!("count {tokens} exceeds 2**32 - 1"),
                )
            })
        })
        .collect::<PyResult<Vec<u32>>>()?;
    Ok(PyArray1::from_vec(py, counts))
}

/// Chat accounting of `messages` with any text counter.
fn count_messages_with(
    messages: &Bound<'_, PyAny>,
    images: ImagePricing,
    mut count: impl FnMut(&str) -> PyResult<u64>,
) -> PyResult<u64> {
    let messages = collect(messages, "messages")?;
    let mut total = REPLY_PRIMING_TOKENS;
    for (index, message) in messages.iter().enumerate() {
        let tokens = with_message(message, index, |m| {
            message_tokens_with(m, images, &mut count)
        })?;
        total = total.saturating_add(tokens);
    }
    Ok(total)
}

/// `count(text)` of a Python str, with the GIL released for a long one.
fn count_text<T: Send>(
    py: Python<'_>,
    text: &Bound<'_, PyAny>,
    count: impl Fn(&str) -> T + Sync,
) -> PyResult<T> {
    let text = extract_text(text, "text")?;
    Ok(if text.len() >= DETACH_MIN_BYTES {
        py.detach(|| count(&text))
    } else {
        count(&text)
    })
}

/// Exact counts of an iterable of str, spread over cores with the GIL released.
fn exact_counts(
    py: Python<'_>,
    tokenizer: &Tokenizer,
    texts: &Bound<'_, PyAny>,
) -> PyResult<Vec<u32>> {
    let objects = collect(texts, "texts")?;
    let strs = borrow_texts(&objects)?;
    py.detach(|| tokenizer.count_many(&strs)).py_err(py)
}

/// An exact tokenizer; see `ctxwindow.Tokenizer`.
#[pyclass(frozen, module = "ctxwindow._native", name = "Tokenizer")]
pub struct PyTokenizer {
    inner: Tokenizer,
    /// The model name it was made for (its image pricing), kept for pickling.
    model: Option<String>,
}

#[pymethods]
impl PyTokenizer {
    #[new]
    fn new(py: Python<'_>, encoding: &Bound<'_, PyAny>) -> PyResult<Self> {
        let name = extract_text(encoding, "encoding")?;
        let inner = py.detach(|| Tokenizer::new(&name)).py_err(py)?;
        Ok(Self { inner, model: None })
    }

    /// The tokenizer of an OpenAI model name (`gpt-4o`, `gpt-4.1-mini`, `o3`, `gpt-4`, ...); for
    /// a model without a public vocabulary (`claude-...`, `gemini-...`), its `EstimateTokenizer`.
    #[staticmethod]
    fn for_model<'py>(py: Python<'py>, model: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let name = extract_text(model, "model")?;
        if Encoding::for_model(&name).is_err() && Profile::for_model(&name).is_some() {
            let estimate = Estimate::for_model(&name).py_err(py)?;
            let tokenizer = PyEstimateTokenizer {
                inner: estimate,
                model: name.to_string(),
            };
            return Ok(Bound::new(py, tokenizer)?.into_any());
        }
        let inner = py.detach(|| Tokenizer::for_model(&name)).map_err(|e| {
            error(
                py,
                Kind::UnknownEncoding,
                format!(
                    "{e}; models without a public vocabulary get an estimate: {}",
                    known_models()
                ),
            )
        })?;
        let tokenizer = Self {
            inner,
            model: Some(name.to_string()),
        };
        Ok(Bound::new(py, tokenizer)?.into_any())
    }

    /// The encoding's name.
    #[getter]
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    /// Always True: counts equal `tiktoken`'s.
    #[getter]
    fn exact(&self) -> bool {
        true
    }

    /// Number of ordinary tokens in the vocabulary.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    /// Number of tokens of `text` (`len(tiktoken encode_ordinary(text))`).
    fn count(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<usize> {
        count_text(py, text, |text| self.inner.count(text))
    }

    /// Counts of many texts as a numpy uint32 array, spread over cores with the GIL released.
    fn count_many<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        Ok(PyArray1::from_vec(
            py,
            exact_counts(py, &self.inner, texts)?,
        ))
    }

    /// Token ids of `text` (special-token text is encoded as ordinary text).
    fn encode(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        let text = extract_text(text, "text")?;
        Ok(if text.len() >= DETACH_MIN_BYTES {
            py.detach(|| self.inner.encode(&text))
        } else {
            self.inner.encode(&text)
        })
    }

    /// The text of token ids.
    fn decode(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<String> {
        let objects = collect(ids, "ids")?;
        let ids = objects
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let id = extract_count(id, &format!("ids[{i}]"))?;
                u32::try_from(id).map_err(|_| {
                    error(
                        py,
                        Kind::InvalidArgument,
                        format!(
                            "token id {id} is not in the vocabulary of {}",
                            self.inner.name()
                        ),
                    )
                })
            })
            .collect::<PyResult<Vec<u32>>>()?;
        self.inner.decode(&ids).py_err(py)
    }

    /// Hashed bag-of-pieces embeddings of texts: a float32 array of shape (len(texts), dim),
    /// rows L2-normalized. Fast and offline; for near-duplicate detection, not semantics.
    #[pyo3(signature = (texts, dim = 256))]
    fn embed_many<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        dim: usize,
    ) -> PyResult<Bound<'py, numpy::PyArray2<f32>>> {
        let objects = collect(texts, "texts")?;
        let strs = borrow_texts(&objects)?;
        let flat = py.detach(|| self.inner.embed_many(&strs, dim)).py_err(py)?;
        let rows = strs.len();
        let array = PyArray1::from_vec(py, flat);
        array.reshape([rows, dim])
    }

    /// The pieces the encoding's pattern splits `text` into before the merges.
    fn pieces(&self, text: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        let text = extract_text(text, "text")?;
        Ok(self
            .inner
            .pieces(&text)
            .into_iter()
            .map(str::to_owned)
            .collect())
    }

    /// Tokens of one chat message in a prompt (framing included, reply priming excluded).
    fn count_message(&self, message: &Bound<'_, PyAny>) -> PyResult<u64> {
        with_message(message, 0, |m| Ok(self.inner.count_message(m)))
    }

    /// Tokens of a list of chat messages in a prompt, reply priming included.
    fn count_messages(&self, messages: &Bound<'_, PyAny>) -> PyResult<u64> {
        count_messages_with(messages, self.inner.image_pricing(), |text| {
            Ok(self.inner.count(text) as u64)
        })
    }

    fn __repr__(&self) -> String {
        format!("Tokenizer({:?})", self.inner.name())
    }

    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let class = py.get_type::<Self>().into_any();
        Ok(match &self.model {
            Some(model) => (
                class.getattr("for_model")?,
                PyTuple::new(py, [model.as_str()])?,
            ),
            None => (class, PyTuple::new(py, [self.inner.name()])?),
        })
    }
}

/// The estimate for a model without a public vocabulary: an exact count with a public one,
/// scaled by the billed ratio with a safety margin; see `ctxwindow.EstimateTokenizer`.
#[pyclass(frozen, module = "ctxwindow._native", name = "EstimateTokenizer")]
pub struct PyEstimateTokenizer {
    inner: Estimate,
    model: String,
}

#[pymethods]
impl PyEstimateTokenizer {
    #[new]
    #[pyo3(signature = (model, scale = None), text_signature = "(model, scale=None)")]
    fn new(
        py: Python<'_>,
        model: &Bound<'_, PyAny>,
        scale: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let name = extract_text(model, "model")?;
        let mut inner = Estimate::for_model(&name).py_err(py)?;
        if let Some(scale) = scale {
            if scale.is_instance_of::<pyo3::types::PyBool>() {
                return Err(error(
                    py,
                    Kind::InvalidType,
                    "scale must be a number, not bool",
                ));
            }
            let value: f64 = scale.extract().map_err(|_| {
                if scale.is_instance_of::<pyo3::types::PyInt>() {
                    error(
                        py,
                        Kind::InvalidArgument,
                        format!("scale must be a number > 0 and <= {MAX_SCALE}, got {scale}"),
                    )
                } else {
                    error(
                        py,
                        Kind::InvalidType,
                        format!("scale must be a number, not {}", type_name(scale)),
                    )
                }
            })?;
            inner = inner.with_scale(value).py_err(py)?;
        }
        Ok(Self {
            inner,
            model: name.to_string(),
        })
    }

    /// `"<family>-estimate"`, e.g. `"claude-estimate"`: never mistaken for an exact count.
    #[getter]
    fn name(&self) -> String {
        format!("{}-estimate", self.inner.family())
    }

    /// Always False: counts are estimates.
    #[getter]
    fn exact(&self) -> bool {
        false
    }

    /// The model name the estimate was made for.
    #[getter]
    fn model(&self) -> &str {
        &self.model
    }

    /// The model family (`"claude"`, `"gemini"`).
    #[getter]
    fn family(&self) -> &'static str {
        self.inner.family()
    }

    /// The public encoding whose exact counts are scaled.
    #[getter]
    fn encoding(&self) -> &'static str {
        self.inner.base().name()
    }

    /// What exact counts are multiplied by: the family's measured ratio times `1 + margin`
    /// unless given.
    #[getter]
    fn scale(&self) -> f64 {
        self.inner.scale()
    }

    /// The family's measured ratio of billed tokens to tokens of `encoding`.
    #[getter]
    fn ratio(&self) -> f64 {
        Profile::for_family(self.inner.family()).map_or(1.0, |p| p.ratio)
    }

    /// The family's safety margin (0.1 is 10%) included in the default scale.
    #[getter]
    fn margin(&self) -> f64 {
        Profile::for_family(self.inner.family()).map_or(0.0, |p| p.margin)
    }

    /// Tokens the provider adds to a prompt that defines tools (its hidden tool-use
    /// instructions), counted once by `ctxwindow.tools.count_tools`.
    #[getter]
    fn tool_overhead(&self) -> u64 {
        self.inner.tool_overhead()
    }

    /// Estimated tokens of `text`.
    fn count(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<u64> {
        count_text(py, text, |text| self.inner.count(text))
    }

    /// Estimates of many texts as a numpy uint32 array, spread over cores with the GIL released.
    fn count_many<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let scaled = exact_counts(py, self.inner.base(), texts)?
            .into_iter()
            .map(|tokens| {
                let estimate = self.inner.scale_count(u64::from(tokens));
                u32::try_from(estimate).map_err(|_| {
                    error(
                        py,
                        Kind::InvalidArgument,
                        format!("count {estimate} exceeds 2**32 - 1"),
                    )
                })
            })
            .collect::<PyResult<Vec<u32>>>()?;
        Ok(PyArray1::from_vec(py, scaled))
    }

    /// Estimated tokens of one chat message (framing included; images as the family bills them).
    fn count_message(&self, message: &Bound<'_, PyAny>) -> PyResult<u64> {
        with_message(message, 0, |m| {
            message_tokens_with(m, self.inner.image_pricing(), |text| {
                Ok(self.inner.count(text))
            })
        })
    }

    /// Estimated tokens of a list of chat messages, reply priming included.
    fn count_messages(&self, messages: &Bound<'_, PyAny>) -> PyResult<u64> {
        count_messages_with(messages, self.inner.image_pricing(), |text| {
            Ok(self.inner.count(text))
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "EstimateTokenizer({:?}, scale={})",
            self.model,
            self.inner.scale()
        )
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (String, f64))> {
        let class = py.get_type::<Self>().into_any();
        Ok((class, (self.model.clone(), self.inner.scale())))
    }
}

/// A heuristic estimator (`ceil(chars / chars_per_token)`) for models without a public
/// vocabulary; see `ctxwindow.HeuristicTokenizer`.
#[pyclass(frozen, module = "ctxwindow._native", name = "HeuristicTokenizer")]
pub struct PyHeuristicTokenizer {
    inner: HeuristicCounter,
}

#[pymethods]
impl PyHeuristicTokenizer {
    #[new]
    #[pyo3(signature = (chars_per_token = None), text_signature = "(chars_per_token=4.0)")]
    fn new(py: Python<'_>, chars_per_token: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let Some(chars_per_token) = chars_per_token else {
            return Ok(Self {
                inner: HeuristicCounter::new(HeuristicCounter::DEFAULT_CHARS_PER_TOKEN)
                    .py_err(py)?,
            });
        };
        if chars_per_token.is_instance_of::<pyo3::types::PyBool>() {
            return Err(error(
                py,
                Kind::InvalidType,
                "chars_per_token must be a number, not bool",
            ));
        }
        let ratio: f64 = chars_per_token.extract().map_err(|_| {
            error(
                py,
                Kind::InvalidType,
                format!(
                    "chars_per_token must be a number, not {}",
                    type_name(chars_per_token)
                ),
            )
        })?;
        Ok(Self {
            inner: HeuristicCounter::new(ratio).py_err(py)?,
        })
    }

    /// `"heuristic-<ratio>"`.
    #[getter]
    fn name(&self) -> String {
        format!("heuristic-{}", self.inner.chars_per_token())
    }

    /// Always False: counts are estimates.
    #[getter]
    fn exact(&self) -> bool {
        false
    }

    /// The ratio of characters per token.
    #[getter]
    fn chars_per_token(&self) -> f64 {
        self.inner.chars_per_token()
    }

    /// Estimated tokens of `text`.
    fn count(&self, text: &Bound<'_, PyAny>) -> PyResult<u64> {
        Ok(self.inner.count(&extract_text(text, "text")?))
    }

    /// Estimates of many texts as a numpy uint32 array.
    fn count_many<'py>(&self, texts: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<u32>>> {
        count_many_with(texts, |text| Ok(self.inner.count(text)))
    }

    /// Estimated tokens of one chat message (framing included).
    fn count_message(&self, message: &Bound<'_, PyAny>) -> PyResult<u64> {
        with_message(message, 0, |m| {
            message_tokens(m, |text| Ok(self.inner.count(text)))
        })
    }

    /// Estimated tokens of a list of chat messages, reply priming included.
    fn count_messages(&self, messages: &Bound<'_, PyAny>) -> PyResult<u64> {
        count_messages_with(messages, ImagePricing::DEFAULT, |text| {
            Ok(self.inner.count(text))
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "HeuristicTokenizer(chars_per_token={})",
            self.inner.chars_per_token()
        )
    }
}

/// Any callable `(str) -> int` as a token counter, with the same chat accounting; see
/// `ctxwindow.CallableTokenizer`.
#[pyclass(frozen, module = "ctxwindow._native", name = "CallableTokenizer")]
pub struct PyCallableTokenizer {
    counter: Py<PyAny>,
    name: String,
    exact: bool,
}

impl PyCallableTokenizer {
    fn call(&self, py: Python<'_>, text: &str) -> PyResult<u64> {
        let result = self.counter.call1(py, (text,))?;
        let result = result.bind(py);
        extract_count(
            result,
            &format!("the token count returned by {}", self.name),
        )
    }
}

#[pymethods]
impl PyCallableTokenizer {
    #[new]
    #[pyo3(signature = (counter, name = None, exact = false))]
    fn new(
        py: Python<'_>,
        counter: Py<PyAny>,
        name: Option<String>,
        exact: bool,
    ) -> PyResult<Self> {
        let bound = counter.bind(py);
        if !bound.is_callable() {
            return Err(error(
                py,
                Kind::InvalidType,
                format!(
                    "counter must be callable (str) -> int, not {}",
                    type_name(bound)
                ),
            ));
        }
        let name = match name {
            Some(name) => name,
            None => bound
                .getattr("__qualname__")
                .and_then(|n| n.extract::<String>())
                .unwrap_or_else(|_| "callable".to_owned()),
        };
        Ok(Self {
            counter,
            name,
            exact,
        })
    }

    /// The counter's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Whether the callable's counts are exact, as declared at construction.
    #[getter]
    fn exact(&self) -> bool {
        self.exact
    }

    /// Tokens of `text` by the callable.
    fn count(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<u64> {
        self.call(py, &extract_text(text, "text")?)
    }

    /// Counts of many texts as a numpy uint32 array.
    fn count_many<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        count_many_with(texts, |text| self.call(py, text))
    }

    /// Tokens of one chat message (framing included).
    fn count_message(&self, py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<u64> {
        with_message(message, 0, |m| {
            message_tokens(m, |text| self.call(py, text))
        })
    }

    /// Tokens of a list of chat messages, reply priming included.
    fn count_messages(&self, py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<u64> {
        count_messages_with(messages, ImagePricing::DEFAULT, |text| self.call(py, text))
    }

    fn __repr__(&self) -> String {
        format!(
            "CallableTokenizer(name={:?}, exact={})",
            self.name, self.exact
        )
    }
}

/// The names of the supported encodings.
#[pyfunction]
pub fn encoding_names() -> Vec<&'static str> {
    Encoding::ALL.iter().map(|e| e.name()).collect()
}

/// The encoding name of an OpenAI model.
#[pyfunction]
pub fn encoding_for_model(py: Python<'_>, model: &Bound<'_, PyAny>) -> PyResult<&'static str> {
    let model = extract_text(model, "model")?;
    Encoding::for_model(&model).map(Encoding::name).py_err(py)
}

/// Tokens of an image part: `detail` in low/high/auto, `width` and `height` in pixels (unknown:
/// the most the model can bill), priced as `model`'s family does (GPT-4o's when None).
#[pyfunction]
#[pyo3(signature = (detail = "auto", width = None, height = None, model = None))]
pub fn image_tokens(
    py: Python<'_>,
    detail: &str,
    width: Option<u32>,
    height: Option<u32>,
    model: Option<&str>,
) -> PyResult<u64> {
    let detail = ImageDetail::from_name(detail).ok_or_else(|| {
        error(
            py,
            Kind::InvalidArgument,
            format!("detail must be 'low', 'high' or 'auto', got {detail:?}"),
        )
    })?;
    let size = width.zip(height);
    let pricing = model.map_or(ImagePricing::DEFAULT, ImagePricing::for_model);
    Ok(pricing.tokens(detail, size))
}
