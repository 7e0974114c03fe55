//! Chat accounting: the tokens a list of chat messages costs in a prompt, following OpenAI's
//! published convention.
//!
//! - 3 tokens of framing per message, plus 1 when the message has a `name`;
//! - the tokens of every string value of the message: role, content text parts, name,
//!   tool_call_id;
//! - for each tool call, the tokens of its function name and of its arguments string, plus 3;
//! - image parts by the model's [`ImagePricing`] (never their URL or base64 data);
//! - 3 tokens for the priming of the reply, once per list.

use crate::Tokenizer;
use crate::image::{ImageDetail, ImagePricing};

/// Framing tokens of every message.
pub const TOKENS_PER_MESSAGE: u64 = 3;
/// Extra tokens of a message that has a `name`.
pub const TOKENS_PER_NAME: u64 = 1;
/// Framing tokens of each tool call.
pub const TOKENS_PER_TOOL_CALL: u64 = 3;
/// Tokens priming the reply, once per list of messages.
pub const REPLY_PRIMING_TOKENS: u64 = 3;

/// One part of a message's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part<'a> {
    /// Text (a `text` or `refusal` part, or a string content).
    Text(&'a str),
    /// An image, with its size in pixels when known.
    Image {
        /// The requested detail.
        detail: ImageDetail,
        /// `(width, height)` when known.
        size: Option<(u32, u32)>,
    },
}

/// A function call made by an assistant message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall<'a> {
    /// The function's name.
    pub name: &'a str,
    /// The arguments, as the JSON string the model produced.
    pub arguments: &'a str,
}

/// A chat message, borrowed from whatever the frontend holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatMessage<'a> {
    /// `system`, `user`, `assistant`, `tool`, ...
    pub role: &'a str,
    /// The content, in order.
    pub parts: Vec<Part<'a>>,
    /// The optional participant name.
    pub name: Option<&'a str>,
    /// The call a tool result answers.
    pub tool_call_id: Option<&'a str>,
    /// The calls an assistant message makes.
    pub tool_calls: Vec<ToolCall<'a>>,
}

/// Tokens of one message in a prompt (framing included, reply priming excluded), with any text
/// counter: an exact [`Tokenizer`], a [`HeuristicCounter`](crate::tokenize::HeuristicCounter), or a
/// frontend's callable.
/// Images are priced as GPT-4o prices them.
pub fn message_tokens<E>(
    message: &ChatMessage<'_>,
    count: impl FnMut(&str) -> Result<u64, E>,
) -> Result<u64, E> {
    message_tokens_with(message, ImagePricing::DEFAULT, count)
}

/// [`message_tokens`] with the image pricing of a given model family.
pub fn message_tokens_with<E>(
    message: &ChatMessage<'_>,
    images: ImagePricing,
    mut count: impl FnMut(&str) -> Result<u64, E>,
) -> Result<u64, E> {
    let mut tokens = TOKENS_PER_MESSAGE + count(message.role)?;
    for part in &message.parts {
        tokens += match *part {
            Part::Text(text) => count(text)?,
            Part::Image { detail, size } => images.tokens(detail, size),
        };
    }
    if let Some(name) = message.name {
        tokens += TOKENS_PER_NAME + count(name)?;
    }
    if let Some(id) = message.tool_call_id {
        tokens += count(id)?;
    }
    for call in &message.tool_calls {
        tokens += TOKENS_PER_TOOL_CALL + count(call.name)? + count(call.arguments)?;
    }
    Ok(tokens)
}

impl Tokenizer {
    /// Tokens of one message in a prompt (framing included, reply priming excluded).
    pub fn count_message(&self, message: &ChatMessage<'_>) -> u64 {
        let exact = |text: &str| Ok::<u64, std::convert::Infallible>(self.count(text) as u64);
        match message_tokens_with(message, self.image_pricing(), exact) {
            Ok(tokens) => tokens,
            Err(never) => match never {},
        }
    }

    /// Tokens of a whole list of messages in a prompt, reply priming included.
    pub fn count_messages(&self, messages: &[ChatMessage<'_>]) -> u64 {
        REPLY_PRIMING_TOKENS + messages.iter().map(|m| self.count_message(m)).sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_convention() {
        let t = Tokenizer::new("cl100k_base").unwrap();
        let user = ChatMessage {
            role: "user",
            parts: vec![Part::Text("hello world")],
            ..Default::default()
        };
        // 3 framing + "user" (1) + "hello world" (2)
        assert_eq!(t.count_message(&user), 6);
        let named = ChatMessage {
            name: Some("bob"),
            ..user.clone()
        };
        assert_eq!(t.count_message(&named), 6 + 1 + 1);
        let call = ChatMessage {
            role: "assistant",
            tool_calls: vec![ToolCall {
                name: "get_weather",
                arguments: "{\"city\": \"Paris\"}",
            }],
            ..Default::default()
        };
        let expected =
            3 + 1 + 3 + t.count("get_weather") as u64 + t.count("{\"city\": \"Paris\"}") as u64;
        assert_eq!(t.count_message(&call), expected);
        let image = ChatMessage {
            role: "user",
            parts: vec![Part::Image {
                detail: ImageDetail::Low,
                size: None,
            }],
            ..Default::default()
        };
        assert_eq!(t.count_message(&image), 3 + 1 + 85);
        assert_eq!(t.count_messages(&[user, image]), 6 + 89 + 3);
        assert_eq!(t.count_messages(&[]), 3);
    }

    #[test]
    fn images_are_priced_by_the_model() {
        let image = ChatMessage {
            role: "user",
            parts: vec![Part::Image {
                detail: ImageDetail::High,
                size: Some((1024, 1024)),
            }],
            ..Default::default()
        };
        let cost = |model: &str| Tokenizer::for_model(model).unwrap().count_message(&image) - 4;
        assert_eq!(cost("gpt-4o"), 765);
        assert_eq!(cost("gpt-4o-mini"), 2833 + 4 * 5667);
        assert_eq!(cost("gpt-4.1-mini"), 1024 * 162 / 100);
        assert_eq!(cost("o4-mini"), 1024 * 172 / 100);
        // An encoding alone has no model: GPT-4o's pricing.
        assert_eq!(
            Tokenizer::new("o200k_base").unwrap().count_message(&image) - 4,
            765
        );
    }
}
