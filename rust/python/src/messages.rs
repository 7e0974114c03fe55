//! Reading OpenAI chat message dicts into the core's borrowed `ChatMessage`, one message at a
//! time (the strings are borrowed from the Python objects, not copied).

use ctxwindow_core::Error;
use ctxwindow_core::chat::{ChatMessage, Part, ToolCall};
use ctxwindow_core::image::{ImageDetail, data_url_image_size};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::errors::{to_py, type_name};

const ROLES: &[&str] = &[
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
];

enum RawPart {
    Text(PyBackedStr),
    Image {
        detail: ImageDetail,
        size: Option<(u32, u32)>,
    },
}

fn malformed(py: Python<'_>, index: usize, reason: String) -> PyErr {
    to_py(py, Error::MalformedMessage { index, reason })
}

fn optional_str(
    dict: &Bound<'_, PyDict>,
    key: &str,
    index: usize,
) -> PyResult<Option<PyBackedStr>> {
    match dict.get_item(key)? {
        None => Ok(None),
        Some(value) if value.is_none() => Ok(None),
        Some(value) => string(&value, index, key).map(Some),
    }
}

fn string(value: &Bound<'_, PyAny>, index: usize, what: &str) -> PyResult<PyBackedStr> {
    let py = value.py();
    let Ok(text) = value.cast::<PyString>() else {
        return Err(malformed(
            py,
            index,
            format!("{what} must be a str, not {}", type_name(value)),
        ));
    };
    crate::errors::tiktoken_text(text)
}

fn sequence<'py>(
    value: &Bound<'py, PyAny>,
    index: usize,
    what: &str,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        value.try_iter()?.collect()
    } else {
        Err(malformed(
            value.py(),
            index,
            format!("{what} must be a list, not {}", type_name(value)),
        ))
    }
}

fn dict<'a, 'py>(
    value: &'a Bound<'py, PyAny>,
    index: usize,
    what: &str,
) -> PyResult<&'a Bound<'py, PyDict>> {
    value.cast::<PyDict>().map_err(|_| {
        malformed(
            value.py(),
            index,
            format!("{what} must be a dict, not {}", type_name(value)),
        )
    })
}

fn dimension(image: &Bound<'_, PyDict>, key: &str, index: usize) -> PyResult<Option<u32>> {
    match image.get_item(key)? {
        None => Ok(None),
        Some(value) if value.is_none() => Ok(None),
        Some(value) => value.extract::<u32>().map(Some).map_err(|_| {
            malformed(
                image.py(),
                index,
                format!("image {key} must be an int of pixels, got {value}"),
            )
        }),
    }
}

fn image_part(part: &Bound<'_, PyDict>, index: usize) -> PyResult<RawPart> {
    let py = part.py();
    let Some(image) = part.get_item("image_url")? else {
        return Err(malformed(
            py,
            index,
            "an image_url part needs an 'image_url' key".to_owned(),
        ));
    };
    if image.is_instance_of::<PyString>() {
        let url = string(&image, index, "image_url")?;
        return Ok(RawPart::Image {
            detail: ImageDetail::Auto,
            size: data_url_image_size(&url),
        });
    }
    let image = dict(&image, index, "image_url")?;
    let detail = match optional_str(image, "detail", index)? {
        None => ImageDetail::Auto,
        Some(name) => ImageDetail::from_name(&name).ok_or_else(|| {
            malformed(
                py,
                index,
                format!(
                    "image detail must be 'low', 'high' or 'auto', got {:?}",
                    &*name
                ),
            )
        })?,
    };
    let size = match (
        dimension(image, "width", index)?,
        dimension(image, "height", index)?,
    ) {
        (Some(width), Some(height)) => Some((width, height)),
        _ => match optional_str(image, "url", index)? {
            Some(url) => data_url_image_size(&url),
            None => None,
        },
    };
    Ok(RawPart::Image { detail, size })
}

fn content_parts(content: &Bound<'_, PyAny>, index: usize) -> PyResult<Vec<RawPart>> {
    if content.is_none() {
        return Ok(Vec::new());
    }
    if content.is_instance_of::<PyString>() {
        return Ok(vec![RawPart::Text(string(content, index, "content")?)]);
    }
    let mut parts = Vec::new();
    for part in sequence(content, index, "content (when not a str)")? {
        let part = dict(&part, index, "a content part")?;
        let kind = optional_str(part, "type", index)?.ok_or_else(|| {
            malformed(part.py(), index, "a content part needs a 'type'".to_owned())
        })?;
        match &*kind {
            "text" | "refusal" | "input_text" | "output_text" => {
                let key = if &*kind == "refusal" {
                    "refusal"
                } else {
                    "text"
                };
                let text = optional_str(part, key, index)?.ok_or_else(|| {
                    malformed(
                        part.py(),
                        index,
                        format!("a '{}' part needs a str '{key}'", &*kind),
                    )
                })?;
                parts.push(RawPart::Text(text));
            }
            "image_url" => parts.push(image_part(part, index)?),
            other => {
                return Err(malformed(
                    part.py(),
                    index,
                    format!(
                        "unsupported content part type '{other}' (supported: text, refusal, image_url)"
                    ),
                ));
            }
        }
    }
    Ok(parts)
}

fn tool_calls(value: &Bound<'_, PyAny>, index: usize) -> PyResult<Vec<(PyBackedStr, PyBackedStr)>> {
    if value.is_none() {
        return Ok(Vec::new());
    }
    let mut calls = Vec::new();
    for call in sequence(value, index, "tool_calls")? {
        let call = dict(&call, index, "a tool call")?;
        let Some(function) = call.get_item("function")? else {
            return Err(malformed(
                call.py(),
                index,
                "a tool call needs a 'function' with 'name' and 'arguments'".to_owned(),
            ));
        };
        let function = dict(&function, index, "a tool call's function")?;
        let name = optional_str(function, "name", index)?.ok_or_else(|| {
            malformed(
                call.py(),
                index,
                "a tool call's function needs a 'name'".to_owned(),
            )
        })?;
        let arguments = optional_str(function, "arguments", index)?.ok_or_else(|| {
            malformed(
                call.py(),
                index,
                "a tool call's function needs 'arguments' (a JSON string)".to_owned(),
            )
        })?;
        calls.push((name, arguments));
    }
    Ok(calls)
}

/// Reads `message` (the `index`-th of its list) and calls `f` on it.
pub fn with_message<R>(
    message: &Bound<'_, PyAny>,
    index: usize,
    f: impl FnOnce(&ChatMessage<'_>) -> PyResult<R>,
) -> PyResult<R> {
    let py = message.py();
    let message = dict(message, index, "a message")?;
    let role = optional_str(message, "role", index)?
        .ok_or_else(|| malformed(py, index, "missing 'role'".to_owned()))?;
    if !ROLES.contains(&&*role) {
        return Err(malformed(
            py,
            index,
            format!("unknown role '{}' (known: {})", &*role, ROLES.join(", ")),
        ));
    }
    let raw_parts = match message.get_item("content")? {
        Some(content) => content_parts(&content, index)?,
        None => Vec::new(),
    };
    let name = optional_str(message, "name", index)?;
    let tool_call_id = optional_str(message, "tool_call_id", index)?;
    let calls = match message.get_item("tool_calls")? {
        Some(calls) => tool_calls(&calls, index)?,
        None => Vec::new(),
    };
    let chat = ChatMessage {
        role: &role,
        parts: raw_parts
            .iter()
            .map(|part| match part {
                RawPart::Text(text) => Part::Text(text),
                RawPart::Image { detail, size } => Part::Image {
                    detail: *detail,
                    size: *size,
                },
            })
            .collect(),
        name: name.as_deref(),
        tool_call_id: tool_call_id.as_deref(),
        tool_calls: calls
            .iter()
            .map(|(name, arguments)| ToolCall { name, arguments })
            .collect(),
    };
    f(&chat)
}
