//! Token estimates for models whose vocabulary is not public (Anthropic's Claude, Google's
//! Gemini): an exact count with a public vocabulary, scaled by the ratio the provider's billing
//! shows, plus a safety margin so that the estimate errs high.
//!
//! A scaled count follows the content (code, JSON, other scripts) far better than a
//! characters-per-token rule, because both vocabularies are byte-pair encodings trained on similar
//! text. The ratios are measured on recorded API calls; a window then calibrates the estimate to
//! what the provider bills with `record_usage`.
//!
//! ```
//! use ctxwindow_core::estimate::Estimate;
//!
//! let claude = Estimate::for_model("claude-sonnet-4-5").unwrap();
//! assert_eq!(claude.family(), "claude");
//! assert!(claude.count("hello world") >= 2);
//! ```

use crate::error::{Error, Result};
use crate::image::ImagePricing;
pub use crate::models::{PROFILES, Profile};
use crate::tokenize::Tokenizer;

/// The model names with an estimate, as patterns (`"claude-*, ..."`).
pub fn known_models() -> String {
    let patterns: Vec<String> = PROFILES
        .iter()
        .flat_map(|p| p.prefixes.iter().map(|prefix| format!("{prefix}*")))
        .collect();
    format!(
        "{} (also after a provider prefix such as anthropic: or us.anthropic.)",
        patterns.join(", ")
    )
}

/// The largest scale an estimate takes: far beyond any vocabulary's ratio to another, and small
/// enough that no count of a text Python can hold overflows.
pub const MAX_SCALE: f64 = 100.0;

/// A token estimate: `ceil(exact count with the family's public vocabulary x scale)`.
#[derive(Debug, Clone)]
pub struct Estimate {
    family: &'static str,
    base: Tokenizer,
    scale: f64,
    tool_overhead: u64,
    images: ImagePricing,
}

impl Estimate {
    /// The estimate of a model without a public vocabulary (`claude-...`, `gemini-...`); the
    /// error names the families known.
    pub fn for_model(model: &str) -> Result<Self> {
        let profile = Profile::for_model(model).ok_or_else(|| Error::UnknownModel {
            name: model.to_owned(),
            known: known_models(),
        })?;
        Ok(Self {
            images: ImagePricing::for_model(model),
            ..Self::from_profile(profile)
        })
    }

    /// The estimate of a profile, with its own scale.
    pub fn from_profile(profile: &'static Profile) -> Self {
        Self {
            family: profile.family,
            base: Tokenizer::from_encoding(profile.encoding),
            scale: profile.scale(),
            tool_overhead: profile.tool_overhead,
            images: profile.images,
        }
    }

    /// The same estimate with another scale, which must be > 0 and at most [`MAX_SCALE`].
    pub fn with_scale(self, scale: f64) -> Result<Self> {
        if scale > 0.0 && scale <= MAX_SCALE {
            Ok(Self { scale, ..self })
        } else {
            Err(Error::InvalidArgument(format!(
                "scale must be a number > 0 and <= {MAX_SCALE}, got {scale}"
            )))
        }
    }

    /// How the family bills images (not scaled: the formulas are the provider's own).
    pub fn image_pricing(&self) -> ImagePricing {
        self.images
    }

    /// The family's name.
    pub fn family(&self) -> &'static str {
        self.family
    }

    /// The exact counter that is scaled.
    pub fn base(&self) -> &Tokenizer {
        &self.base
    }

    /// What exact counts are multiplied by.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Tokens added once to a prompt with tool definitions.
    pub fn tool_overhead(&self) -> u64 {
        self.tool_overhead
    }

    /// The estimate of a count of `base_tokens` base tokens.
    pub fn scale_count(&self, base_tokens: u64) -> u64 {
        (base_tokens as f64 * self.scale).ceil() as u64
    }

    /// The estimated number of tokens of `text`.
    pub fn count(&self, text: &str) -> u64 {
        self.scale_count(self.base.count(text) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_match_by_prefix() {
        for model in [
            "claude-sonnet-4-5",
            "claude-3-5-haiku-latest",
            "anthropic/claude-opus-4-1",
            "anthropic:claude-sonnet-4-5",
            "us.anthropic.claude-3-5-sonnet-20240620-v1:0",
        ] {
            assert_eq!(Estimate::for_model(model).unwrap().family(), "claude");
        }
        for model in [
            "gemini-2.5-pro",
            "google-gla:gemini-2.5-flash",
            "models/gemini-2.0-flash",
        ] {
            assert_eq!(Estimate::for_model(model).unwrap().family(), "gemini");
        }
        for model in ["llama-3", "myclaude-1", "gpt-4o", "claude"] {
            assert!(Estimate::for_model(model).is_err(), "{model}");
        }
        let error = Estimate::for_model("llama-3").unwrap_err().to_string();
        assert!(error.contains("claude-*"), "{error}");
    }

    #[test]
    fn estimates_err_high_and_scale_monotonically() {
        let claude = Estimate::for_model("claude-sonnet-4-5").unwrap();
        let text = "The quick brown fox jumps over the lazy dog. ".repeat(50);
        let base = claude.base().count(&text) as u64;
        assert!(claude.count(&text) >= base);
        assert_eq!(claude.count(""), 0);
        let lower = claude.clone().with_scale(0.5).unwrap();
        assert!(lower.count(&text) <= claude.count(&text));
        assert!(claude.clone().with_scale(f64::NAN).is_err());
        assert!(claude.with_scale(0.0).is_err());
    }
}
