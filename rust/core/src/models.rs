//! The model table: every per-model fact of the core in one place. A model name (after a
//! provider's prefix such as `openai:`, `openai/`, `anthropic:`, `us.anthropic.` or
//! `google-gla:`; dated snapshots and fine-tuned names through prefix rows) gives
//!
//! - how its tokens are counted: exactly with a public [`Encoding`], or estimated by a
//!   [`Profile`] (a family without a public vocabulary: a public encoding's count, scaled);
//! - how its images are billed ([`ImagePricing::for_model`]).
//!
//! The counting, estimating and image modules read this table; it reads none of them (only the
//! plain [`ImagePricing`] value type).
//!
//! ```
//! use ctxwindow_core::models::{Counting, Encoding, counting, model_names};
//!
//! assert_eq!(
//!     model_names("us.anthropic.claude-opus-4-1").collect::<Vec<_>>(),
//!     ["us.anthropic.claude-opus-4-1", "anthropic.claude-opus-4-1", "claude-opus-4-1"],
//! );
//! assert_eq!(counting("openai:gpt-4o-2024-08-06"), Some(Counting::Exact(Encoding::O200kBase)));
//! assert!(matches!(counting("claude-sonnet-4-5"), Some(Counting::Estimate(p)) if p.family == "claude"));
//! assert_eq!(counting("llama-3"), None);
//! ```

use crate::image::ImagePricing;
use crate::{Error, Result};

/// The byte-pair encodings with public vocabularies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// GPT-4, GPT-3.5-turbo, text-embedding-3-*.
    Cl100kBase,
    /// GPT-4o, GPT-4.1, GPT-5, o1/o3/o4.
    O200kBase,
    /// Codex and text-davinci-002/003.
    P50kBase,
    /// GPT-3 (davinci, curie, ...) and GPT-2.
    R50kBase,
}

impl Encoding {
    /// Every supported encoding.
    pub const ALL: [Encoding; 4] = [
        Encoding::Cl100kBase,
        Encoding::O200kBase,
        Encoding::P50kBase,
        Encoding::R50kBase,
    ];

    /// The encoding's name as `tiktoken` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Cl100kBase => "cl100k_base",
            Encoding::O200kBase => "o200k_base",
            Encoding::P50kBase => "p50k_base",
            Encoding::R50kBase => "r50k_base",
        }
    }

    /// Looks an encoding up by name; the error lists the known names.
    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|e| e.name() == name)
            .ok_or_else(|| Error::UnknownEncoding {
                name: name.to_owned(),
                known: Self::ALL.map(Encoding::name).join(", "),
            })
    }

    /// The encoding of an OpenAI model (`gpt-4o`, `gpt-4o-2024-08-06`, `gpt-4.1-mini`, `o3-mini`,
    /// `gpt-4`, `text-embedding-3-small`, ..., also after a provider's prefix such as `openai:`);
    /// the error lists the known names. For each of [`model_names`] in turn, an exact row of
    /// [`ENCODING_MODELS`] first, then the first matching row of [`ENCODING_PREFIXES`].
    pub fn for_model(model: &str) -> Result<Self> {
        for name in model_names(model) {
            if let Some(&(_, encoding)) = ENCODING_MODELS.iter().find(|(known, _)| *known == name) {
                return Ok(encoding);
            }
            if let Some(&(_, encoding)) = ENCODING_PREFIXES
                .iter()
                .find(|(prefix, _)| name.starts_with(prefix))
            {
                return Ok(encoding);
            }
        }
        let mut known: Vec<&str> = ENCODING_MODELS.iter().map(|(name, _)| *name).collect();
        known.extend(ENCODING_PREFIXES.iter().map(|(prefix, _)| *prefix));
        Err(Error::UnknownModel {
            name: model.to_owned(),
            known: known.join(", "),
        })
    }
}

/// A model name, then what follows each provider prefix in it (`openai:gpt-4o` gives itself
/// and `gpt-4o`; `us.anthropic.claude-opus-4-1-v1:0` gives `anthropic.claude-...`,
/// `claude-...` and `0`): the names every table of this module is searched for, in this order.
/// A prefix ends at any `:`, `/` or `.`.
pub fn model_names(model: &str) -> impl Iterator<Item = &str> {
    std::iter::once(model).chain(
        model
            .match_indices(PROVIDER_SEPARATORS)
            .map(move |(at, _)| &model[at + 1..]),
    )
}

/// The characters that end a provider's prefix in a model name (`openai:`, `models/`,
/// `us.anthropic.`).
pub const PROVIDER_SEPARATORS: [char; 3] = [':', '/', '.'];

/// Exact model names and their encodings, as Python `tiktoken` maps them. Encodings that differ
/// from a base one only by special tokens map to the base one, since ordinary text counts the
/// same.
pub const ENCODING_MODELS: &[(&str, Encoding)] = &[
    ("o1", Encoding::O200kBase),
    ("o3", Encoding::O200kBase),
    ("o4-mini", Encoding::O200kBase),
    ("gpt-5", Encoding::O200kBase),
    ("gpt-4.1", Encoding::O200kBase),
    ("gpt-4o", Encoding::O200kBase),
    ("gpt-4", Encoding::Cl100kBase),
    ("gpt-3.5-turbo", Encoding::Cl100kBase),
    ("gpt-3.5", Encoding::Cl100kBase),
    ("gpt-35-turbo", Encoding::Cl100kBase),
    ("davinci-002", Encoding::Cl100kBase),
    ("babbage-002", Encoding::Cl100kBase),
    ("text-embedding-ada-002", Encoding::Cl100kBase),
    ("text-embedding-3-small", Encoding::Cl100kBase),
    ("text-embedding-3-large", Encoding::Cl100kBase),
    ("text-davinci-003", Encoding::P50kBase),
    ("text-davinci-002", Encoding::P50kBase),
    ("text-davinci-001", Encoding::R50kBase),
    ("text-curie-001", Encoding::R50kBase),
    ("text-babbage-001", Encoding::R50kBase),
    ("text-ada-001", Encoding::R50kBase),
    ("davinci", Encoding::R50kBase),
    ("curie", Encoding::R50kBase),
    ("babbage", Encoding::R50kBase),
    ("ada", Encoding::R50kBase),
    ("code-davinci-002", Encoding::P50kBase),
    ("code-davinci-001", Encoding::P50kBase),
    ("code-cushman-002", Encoding::P50kBase),
    ("code-cushman-001", Encoding::P50kBase),
    ("davinci-codex", Encoding::P50kBase),
    ("cushman-codex", Encoding::P50kBase),
    ("text-davinci-edit-001", Encoding::P50kBase),
    ("code-davinci-edit-001", Encoding::P50kBase),
    ("gpt2", Encoding::R50kBase),
    ("gpt-2", Encoding::R50kBase),
];

/// Model-name prefixes (dated and fine-tuned variants) and their encodings, as Python `tiktoken`
/// maps them; the first match wins.
pub const ENCODING_PREFIXES: &[(&str, Encoding)] = &[
    ("o1-", Encoding::O200kBase),
    ("o3-", Encoding::O200kBase),
    ("o4-mini-", Encoding::O200kBase),
    ("gpt-5", Encoding::O200kBase),
    ("gpt-4.5-", Encoding::O200kBase),
    ("gpt-4.1-", Encoding::O200kBase),
    ("chatgpt-4o-", Encoding::O200kBase),
    ("gpt-4o-", Encoding::O200kBase),
    ("gpt-4-", Encoding::Cl100kBase),
    ("gpt-3.5-turbo-", Encoding::Cl100kBase),
    ("gpt-35-turbo-", Encoding::Cl100kBase),
    ("gpt-oss-", Encoding::O200kBase),
    ("ft:gpt-4o", Encoding::O200kBase),
    ("ft:gpt-4", Encoding::Cl100kBase),
    ("ft:gpt-3.5-turbo", Encoding::Cl100kBase),
    ("ft:davinci-002", Encoding::Cl100kBase),
    ("ft:babbage-002", Encoding::Cl100kBase),
];

/// What is known of a model family without a public vocabulary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    /// The family's name (`"claude"`), which estimates are named after.
    pub family: &'static str,
    /// Model names of the family start with one of these, possibly after a provider's prefix
    /// ending in `:`, `/` or `.` (`anthropic:claude-...`, `us.anthropic.claude-...`).
    pub prefixes: &'static [&'static str],
    /// The public vocabulary whose exact count is scaled.
    pub encoding: Encoding,
    /// Billed tokens per token of `encoding`, measured.
    pub ratio: f64,
    /// Added on top of `ratio` (0.1 is 10%) so the estimate errs high.
    pub margin: f64,
    /// Tokens a request with tool definitions is billed beyond them (the provider's hidden
    /// tool-use instructions), measured.
    pub tool_overhead: u64,
    /// How the family bills images.
    pub images: ImagePricing,
}

/// The known families without a public vocabulary.
///
/// Claude's ratio, tool overhead and margin are fitted on recorded Messages API calls
/// (`tests/data/anthropic_usage`, 68 calls of 48 recorded sessions, split in halves by session;
/// `tests/estimate_eval.py`): on the tuning half, the ratio is billed over `cl100k_base` tokens
/// summed over the calls without tools, the tool overhead the median of what calls with tools
/// were billed beyond their scaled count (the hidden tool-use instructions, about 300 tokens on
/// Claude 3.5 Haiku and Sonnet 4, about 500 on Sonnet 4.5 and later), and the margin the smallest
/// that leaves at most 5% of that half under-counted. `benches/bench_estimate.py` reports the
/// other half. Gemini's ratio is not measured (no recorded calls): its SentencePiece vocabulary of
/// 256k entries is not coarser than `o200k_base`, so the ratio is 1, with Claude's margin.
pub const PROFILES: &[Profile] = &[
    Profile {
        family: "claude",
        prefixes: &["claude-"],
        encoding: Encoding::Cl100kBase,
        ratio: CLAUDE_RATIO,
        margin: CLAUDE_MARGIN,
        tool_overhead: CLAUDE_TOOL_OVERHEAD,
        images: ImagePricing::Area,
    },
    Profile {
        family: "gemini",
        prefixes: &["gemini-"],
        encoding: Encoding::O200kBase,
        ratio: 1.0,
        margin: CLAUDE_MARGIN,
        tool_overhead: 0,
        images: ImagePricing::GeminiTiles,
    },
];

/// Claude's billed tokens per `cl100k_base` token (see [`PROFILES`]).
const CLAUDE_RATIO: f64 = 1.04;
/// The margin that leaves at most 5% of the recorded Claude calls under-counted.
const CLAUDE_MARGIN: f64 = 0.26;
/// Claude's hidden tool-use instructions, in tokens.
const CLAUDE_TOOL_OVERHEAD: u64 = 503;

impl Profile {
    /// The profile of a model name, if one of its prefixes matches one of [`model_names`] (the
    /// profiles in table order, each tried on every name).
    pub fn for_model(model: &str) -> Option<&'static Profile> {
        let names: Vec<&str> = model_names(model).collect();
        PROFILES.iter().find(|p| {
            p.prefixes
                .iter()
                .any(|prefix| names.iter().any(|name| name.starts_with(prefix)))
        })
    }

    /// The profile of a family name (`"claude"`).
    pub fn for_family(family: &str) -> Option<&'static Profile> {
        PROFILES.iter().find(|p| p.family == family)
    }

    /// `ratio x (1 + margin)`: what an estimate multiplies exact counts by.
    pub fn scale(&self) -> f64 {
        self.ratio * (1.0 + self.margin)
    }
}

/// How a model's tokens are counted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Counting {
    /// Exactly, with a public vocabulary.
    Exact(Encoding),
    /// Estimated by the family's profile.
    Estimate(&'static Profile),
}

/// How a model's tokens are counted: exactly when an encoding row matches (see
/// [`Encoding::for_model`]), else by the first profile that matches; `None` for a model the
/// table does not know.
pub fn counting(model: &str) -> Option<Counting> {
    match Encoding::for_model(model) {
        Ok(encoding) => Some(Counting::Exact(encoding)),
        Err(_) => Profile::for_model(model).map(Counting::Estimate),
    }
}

/// One row of the counting table, as [`counting_rows`] lists it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CountingRow {
    /// The model name (`"gpt-4o"`) or name prefix (`"gpt-4o-"`) the row matches.
    pub name: &'static str,
    /// Whether `name` is a prefix (`true`) or a whole name.
    pub prefix: bool,
    /// How matching models count.
    pub counting: Counting,
}

/// Every row of the counting table in the order a lookup tries them for each of
/// [`model_names`]: the exact encoding names, then the encoding prefixes, then the profiles'
/// prefixes (which apply only when no encoding row matches any of the names).
pub fn counting_rows() -> impl Iterator<Item = CountingRow> {
    let exact = ENCODING_MODELS.iter().map(|&(name, encoding)| CountingRow {
        name,
        prefix: false,
        counting: Counting::Exact(encoding),
    });
    let prefixes = ENCODING_PREFIXES
        .iter()
        .map(|&(name, encoding)| CountingRow {
            name,
            prefix: true,
            counting: Counting::Exact(encoding),
        });
    let profiles = PROFILES.iter().flat_map(|profile| {
        profile.prefixes.iter().map(move |&name| CountingRow {
            name,
            prefix: true,
            counting: Counting::Estimate(profile),
        })
    });
    exact.chain(prefixes).chain(profiles)
}

/// Model-name prefixes and their pricing, most specific first (the docs' table; a name that
/// matches none is priced as GPT-4o).
pub const IMAGE_PRICING: &[(&str, ImagePricing)] = &[
    // gpt-4o-mini: base 2833, tile 5667 (the same dollar cost as gpt-4o at its lower price).
    (
        "gpt-4o-mini",
        ImagePricing::Tiles {
            base: 2833,
            tile: 5667,
        },
    ),
    (
        "ft:gpt-4o-mini",
        ImagePricing::Tiles {
            base: 2833,
            tile: 5667,
        },
    ),
    // Patch models: gpt-4.1-mini x 1.62, gpt-4.1-nano x 2.46, o4-mini x 1.72, gpt-5-mini x 1.62,
    // gpt-5-nano x 2.46.
    (
        "gpt-4.1-mini",
        ImagePricing::Patches {
            multiplier_percent: 162,
        },
    ),
    (
        "ft:gpt-4.1-mini",
        ImagePricing::Patches {
            multiplier_percent: 162,
        },
    ),
    (
        "gpt-4.1-nano",
        ImagePricing::Patches {
            multiplier_percent: 246,
        },
    ),
    (
        "ft:gpt-4.1-nano",
        ImagePricing::Patches {
            multiplier_percent: 246,
        },
    ),
    (
        "o4-mini",
        ImagePricing::Patches {
            multiplier_percent: 172,
        },
    ),
    (
        "gpt-5-mini",
        ImagePricing::Patches {
            multiplier_percent: 162,
        },
    ),
    (
        "gpt-5-nano",
        ImagePricing::Patches {
            multiplier_percent: 246,
        },
    ),
    // gpt-5 and gpt-5-chat-latest: base 70, tile 140.
    (
        "gpt-5",
        ImagePricing::Tiles {
            base: 70,
            tile: 140,
        },
    ),
    // o1, o1-pro, o3: base 75, tile 150.
    (
        "o1",
        ImagePricing::Tiles {
            base: 75,
            tile: 150,
        },
    ),
    (
        "o3",
        ImagePricing::Tiles {
            base: 75,
            tile: 150,
        },
    ),
    // computer-use-preview: base 65, tile 129.
    (
        "computer-use-preview",
        ImagePricing::Tiles {
            base: 65,
            tile: 129,
        },
    ),
    // gpt-4o, gpt-4.1, gpt-4.5: base 85, tile 170 (also the default).
    ("gpt-4.1", ImagePricing::DEFAULT),
    ("gpt-4.5", ImagePricing::DEFAULT),
    ("gpt-4o", ImagePricing::DEFAULT),
    ("chatgpt-4o", ImagePricing::DEFAULT),
];

impl ImagePricing {
    /// The pricing of a model name (dated and fine-tuned names included): for each of
    /// [`model_names`] in turn, the first row of [`IMAGE_PRICING`] it starts with; else its
    /// estimate family's ([`Profile::images`]); else GPT-4o's.
    pub fn for_model(model: &str) -> Self {
        for name in model_names(model) {
            if let Some(&(_, pricing)) = IMAGE_PRICING
                .iter()
                .find(|(prefix, _)| name.starts_with(prefix))
            {
                return pricing;
            }
        }
        Profile::for_model(model).map_or(Self::DEFAULT, |profile| profile.images)
    }

    /// The pricing of a family without a public vocabulary (`"claude"`, `"gemini"`); GPT-4o's
    /// for another name.
    pub fn for_family(family: &str) -> Self {
        Profile::for_family(family).map_or(Self::DEFAULT, |profile| profile.images)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_after_each_provider_prefix() {
        let names = |model| model_names(model).collect::<Vec<_>>();
        assert_eq!(names("gpt-4o"), ["gpt-4o"]);
        assert_eq!(names("openai:gpt-4o"), ["openai:gpt-4o", "gpt-4o"]);
        assert_eq!(names("a.b/c:"), ["a.b/c:", "b/c:", "c:", ""]);
        assert_eq!(names(""), [""]);
        assert_eq!(names("é.ü"), ["é.ü", "ü"]);
    }

    #[test]
    fn every_row_is_found_by_its_own_name() {
        for row in counting_rows() {
            let model = if row.prefix {
                format!("{}x", row.name)
            } else {
                row.name.to_owned()
            };
            let found = counting(&model).expect("a row's own name is known");
            // An earlier row may claim the name with the same answer (`gpt-5` exact and prefix).
            match (found, row.counting) {
                (Counting::Exact(a), Counting::Exact(b)) => assert_eq!(a, b, "{model}"),
                (Counting::Estimate(a), Counting::Estimate(b)) => {
                    assert_eq!(a.family, b.family, "{model}")
                }
                other => panic!("{model}: {other:?}"),
            }
        }
    }

    #[test]
    fn encodings_win_over_profiles_and_profiles_over_nothing() {
        assert_eq!(
            counting("openai/o3"),
            Some(Counting::Exact(Encoding::O200kBase))
        );
        assert_eq!(
            counting("ft:gpt-4o-mini-2024-07-18:org::x1"),
            Some(Counting::Exact(Encoding::O200kBase))
        );
        assert!(matches!(
            counting("us.anthropic.claude-3-5-sonnet-20240620-v1:0"),
            Some(Counting::Estimate(p)) if p.family == "claude"
        ));
        assert!(matches!(
            counting("google-gla:gemini-2.5-flash"),
            Some(Counting::Estimate(p)) if p.family == "gemini"
        ));
        assert_eq!(counting("openai:claude"), None);
        assert_eq!(counting("myclaude-1"), None);
    }

    #[test]
    fn image_pricing_follows_the_model_then_the_family() {
        assert_eq!(
            ImagePricing::for_model("claude-sonnet-4-5"),
            ImagePricing::Area
        );
        assert_eq!(
            ImagePricing::for_model("models/gemini-2.0-flash"),
            ImagePricing::GeminiTiles
        );
        assert_eq!(ImagePricing::for_model("llama-3"), ImagePricing::DEFAULT);
        assert_eq!(ImagePricing::for_family("claude"), ImagePricing::Area);
        assert_eq!(ImagePricing::for_family("other"), ImagePricing::DEFAULT);
    }
}
