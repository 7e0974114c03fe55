//! Image token accounting by the published tile formula, and image dimensions read from the
//! header of PNG, GIF, JPEG and WebP data (so a `data:` URL never counts as text). Which model
//! is billed by which [`ImagePricing`] is in the model table ([`crate::models`]:
//! [`ImagePricing::for_model`]).

use base64::Engine as _;

/// The `detail` of an image part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageDetail {
    /// A fixed 512 x 512 rendition: [`LOW_DETAIL_TOKENS`].
    Low,
    /// Tiles of 512 px after the standard resize.
    High,
    /// The provider chooses; counted as `High`, which is never less.
    Auto,
}

impl ImageDetail {
    /// Parses `"low"`, `"high"` or `"auto"`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "low" => Some(Self::Low),
            "high" => Some(Self::High),
            "auto" => Some(Self::Auto),
            _ => None,
        }
    }
}

/// Tokens of a low-detail image, and the base of a high-detail one.
pub const LOW_DETAIL_TOKENS: u64 = 85;
/// Tokens per 512 px tile of a high-detail image.
pub const TOKENS_PER_TILE: u64 = 170;
/// Most tiles an image can have after the resize (768 x 2048: 2 x 4).
pub const MAX_TILES: u64 = 8;

/// Tokens of an image part for GPT-4o (see [`ImagePricing::for_model`] for other models). `size`
/// is `(width, height)` in pixels when known; without it a high-detail image counts the upper
/// bound (`85 + 170 * 8 = 1445`) so a budget stays safe.
///
/// High detail: the image is scaled to fit in 2048 x 2048, then (if its shorter side is longer)
/// so that its shorter side is 768 px; it costs 85 plus 170 per 512 px tile.
pub fn image_tokens(detail: ImageDetail, size: Option<(u32, u32)>) -> u64 {
    ImagePricing::DEFAULT.tokens(detail, size)
}

/// How a model family bills an image.
///
/// Source: OpenAI, "Images and vision", section "Calculating costs"
/// (<https://platform.openai.com/docs/guides/images-vision#calculating-costs>): a table of base
/// and tile tokens for the tile models, and the 32 px patch algorithm with its per-model
/// multipliers for the patch models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImagePricing {
    /// 512 px tiles after the standard resize (fit in 2048 x 2048, shorter side at most 768):
    /// `base` plus `tile` per tile at high detail, `base` alone at low detail.
    Tiles {
        /// Tokens of a low-detail image, and the base of a high-detail one.
        base: u64,
        /// Tokens per 512 px tile.
        tile: u64,
    },
    /// 32 px patches, at most [`MAX_PATCHES`] (a larger image is scaled down to fit), times a
    /// per-model multiplier; `detail` does not apply.
    Patches {
        /// The multiplier in hundredths (162 for 1.62).
        multiplier_percent: u64,
    },
    /// Anthropic's Claude: `width x height / 750` tokens, after a resize (aspect kept) that
    /// brings the long edge within 1568 px and the image within [`CLAUDE_MAX_IMAGE_TOKENS`];
    /// `detail` does not apply; an unknown size counts that maximum. Source: Anthropic,
    /// "Vision", section "Evaluate image size"
    /// (<https://docs.anthropic.com/en/docs/build-with-claude/vision#evaluate-image-size>).
    Area,
    /// Google's Gemini: [`GEMINI_TILE_TOKENS`] for an image whose sides are both at most 384 px,
    /// else that many per 768 x 768 tile; `detail` does not apply; an unknown size counts four
    /// tiles (a 1536 px square). Source: Gemini API, "Image understanding", section "Technical
    /// details" (<https://ai.google.dev/gemini-api/docs/image-understanding#technical-details-image>).
    GeminiTiles,
}

/// Most tokens Claude bills for an image (the resize keeps it within about 1.15 megapixels).
pub const CLAUDE_MAX_IMAGE_TOKENS: u64 = 1600;
/// Tokens of a small Gemini image, and of each 768 px tile of a larger one.
pub const GEMINI_TILE_TOKENS: u64 = 258;

/// Most 32 px patches an image of a patch model is billed for.
pub const MAX_PATCHES: u64 = 1536;

impl ImagePricing {
    /// GPT-4o's tiles (85 + 170 per tile), also used for models the table does not name.
    pub const DEFAULT: Self = Self::Tiles {
        base: LOW_DETAIL_TOKENS,
        tile: TOKENS_PER_TILE,
    };

    /// Tokens of an image part; `size` is `(width, height)` in pixels when known, and an
    /// unknown size counts the most the model can bill (high detail for tile models).
    pub fn tokens(self, detail: ImageDetail, size: Option<(u32, u32)>) -> u64 {
        match self {
            Self::Tiles { base, .. } if detail == ImageDetail::Low => base,
            Self::Tiles { base, tile } => {
                let tiles = size.map_or(MAX_TILES, |(w, h)| high_detail_tiles(w, h));
                base + tile * tiles
            }
            Self::Patches { multiplier_percent } => {
                let patches = size.map_or(MAX_PATCHES, |(w, h)| image_patches(w, h));
                // The docs give no rounding; the API bills 1536 patches at 1.62 as 2488
                // (1536 x 1.62 = 2488.32), so the fraction is dropped.
                patches * multiplier_percent / 100
            }
            Self::Area => size.map_or(CLAUDE_MAX_IMAGE_TOKENS, |(w, h)| claude_image_tokens(w, h)),
            Self::GeminiTiles => size.map_or(4 * GEMINI_TILE_TOKENS, |(w, h)| {
                if w <= 384 && h <= 384 {
                    GEMINI_TILE_TOKENS
                } else {
                    GEMINI_TILE_TOKENS * u64::from(w.div_ceil(768)) * u64::from(h.div_ceil(768))
                }
            }),
        }
    }
}

/// Tokens Claude bills for a `width` x `height` image: `ceil(w x h / 750)` after scaling down
/// (aspect kept) so that the long edge is at most 1568 px and the count at most
/// [`CLAUDE_MAX_IMAGE_TOKENS`] (1092 x 1092 gives 1590).
pub fn claude_image_tokens(width: u32, height: u32) -> u64 {
    let (w, h) = (f64::from(width), f64::from(height));
    let edge = (1568.0 / w.max(h)).min(1.0);
    let area = (CLAUDE_MAX_IMAGE_TOKENS as f64 * 750.0 / (w * h))
        .sqrt()
        .min(1.0);
    let shrink = edge.min(area);
    let tokens = ((w * shrink).floor() * (h * shrink).floor() / 750.0).ceil() as u64;
    tokens.min(CLAUDE_MAX_IMAGE_TOKENS)
}

/// Number of 32 px patches a patch model bills for a `width` x `height` image: the patches
/// covering it, or, above [`MAX_PATCHES`], those of the image scaled down (aspect kept) by
/// `sqrt(1536 * 32^2 / (width * height))`, then further so that its limiting side is a whole
/// number of patches (the published algorithm; 1800 x 2400 gives 33 x 44 = 1452).
pub fn image_patches(width: u32, height: u32) -> u64 {
    const PATCH: f64 = 32.0;
    let (w, h) = (f64::from(width), f64::from(height));
    let covering = u64::from(width.div_ceil(32)) * u64::from(height.div_ceil(32));
    if covering <= MAX_PATCHES {
        return covering;
    }
    let shrink = (MAX_PATCHES as f64 * PATCH * PATCH / (w * h)).sqrt();
    let (sw, sh) = (w * shrink / PATCH, h * shrink / PATCH);
    let fit = (sw.floor() / sw).min(sh.floor() / sh);
    // A side that is mathematically a whole number of patches must not round up over it.
    let patches = |side: f64| (side * fit - 1e-9).ceil().max(1.0) as u64;
    (patches(sw) * patches(sh)).min(MAX_PATCHES)
}

/// Number of 512 px tiles of a high-detail image of `width` x `height` after the resize.
pub fn high_detail_tiles(width: u32, height: u32) -> u64 {
    if width == 0 || height == 0 {
        return 0;
    }
    let (mut w, mut h) = (f64::from(width), f64::from(height));
    let longest = w.max(h);
    if longest > 2048.0 {
        let scale = 2048.0 / longest;
        w *= scale;
        h *= scale;
    }
    let shortest = w.min(h);
    if shortest > 768.0 {
        let scale = 768.0 / shortest;
        w *= scale;
        h *= scale;
    }
    let tiles = |side: f64| (side / 512.0).ceil().max(1.0) as u64;
    tiles(w) * tiles(h)
}

/// `(width, height)` of a PNG, GIF, JPEG or WebP image from its leading bytes.
pub fn image_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let be16 = |at: usize| Some(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?));
    let le16 = |at: usize| Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?));
    let be32 = |at: usize| Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
    let le24 = |at: usize| {
        let b = bytes.get(at..at + 3)?;
        Some(u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16)
    };
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Some((be32(16)?, be32(20)?));
    }
    if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        return Some((u32::from(le16(6)?), u32::from(le16(8)?)));
    }
    if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        return match bytes.get(12..16)? {
            b"VP8 " => Some((u32::from(le16(26)? & 0x3fff), u32::from(le16(28)? & 0x3fff))),
            b"VP8L" => {
                let bits = u32::from_le_bytes(bytes.get(21..25)?.try_into().ok()?);
                Some(((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1))
            }
            b"VP8X" => Some((le24(24)? + 1, le24(27)? + 1)),
            _ => None,
        };
    }
    if bytes.starts_with(&[0xFF, 0xD8]) {
        let mut at = 2;
        while at + 4 <= bytes.len() {
            if bytes[at] != 0xFF {
                return None;
            }
            let marker = bytes[at + 1];
            if marker == 0xFF {
                at += 1;
                continue;
            }
            let is_sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
            if is_sof {
                return Some((u32::from(be16(at + 7)?), u32::from(be16(at + 5)?)));
            }
            if matches!(marker, 0xD0..=0xD9 | 0x01) {
                at += 2;
                continue;
            }
            at += 2 + usize::from(be16(at + 2)?);
        }
    }
    None
}

/// `(width, height)` of the image in a base64 `data:` URL, when its header can be read.
pub fn data_url_image_size(url: &str) -> Option<(u32, u32)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, payload) = rest.split_once(',')?;
    if !meta.ends_with(";base64") {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(payload.trim())
        .ok()?;
    image_size(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_examples() {
        // 1024 x 1024 high: 768 x 768, 4 tiles.
        assert_eq!(image_tokens(ImageDetail::High, Some((1024, 1024))), 765);
        // 2048 x 4096 high: 1024 x 2048, then 768 x 1536, 6 tiles.
        assert_eq!(image_tokens(ImageDetail::High, Some((2048, 4096))), 1105);
        // 4096 x 8192 low: 85.
        assert_eq!(image_tokens(ImageDetail::Low, Some((4096, 8192))), 85);
        assert_eq!(image_tokens(ImageDetail::Auto, None), 1445);
        assert_eq!(image_tokens(ImageDetail::High, Some((100, 100))), 255);
    }

    #[test]
    fn tile_families() {
        // The docs' examples scale with each family's base and tile tokens.
        let mini = ImagePricing::for_model("gpt-4o-mini-2024-07-18");
        assert_eq!(
            mini,
            ImagePricing::Tiles {
                base: 2833,
                tile: 5667
            }
        );
        assert_eq!(
            mini.tokens(ImageDetail::High, Some((1024, 1024))),
            2833 + 4 * 5667
        );
        assert_eq!(mini.tokens(ImageDetail::Low, Some((1024, 1024))), 2833);
        assert_eq!(mini.tokens(ImageDetail::Auto, None), 2833 + 8 * 5667);
        for model in [
            "gpt-4o",
            "gpt-4o-2024-08-06",
            "gpt-4.1",
            "gpt-4.1-2025-04-14",
            "gpt-4.5-preview",
            "unknown-model",
        ] {
            assert_eq!(
                ImagePricing::for_model(model).tokens(ImageDetail::High, Some((2048, 4096))),
                1105,
                "{model}"
            );
        }
        let o3 = ImagePricing::for_model("o3");
        assert_eq!(
            o3.tokens(ImageDetail::High, Some((1024, 1024))),
            75 + 4 * 150
        );
        let gpt5 = ImagePricing::for_model("gpt-5-2025-08-07");
        assert_eq!(
            gpt5.tokens(ImageDetail::High, Some((1024, 1024))),
            70 + 4 * 140
        );
        let cua = ImagePricing::for_model("computer-use-preview");
        assert_eq!(cua.tokens(ImageDetail::Low, None), 65);
    }

    #[test]
    fn patch_families() {
        // The docs' examples: 1024 x 1024 is 32 x 32 = 1024 patches; 1800 x 2400 is scaled to
        // 1056 x 1408, 33 x 44 = 1452 patches.
        assert_eq!(image_patches(1024, 1024), 1024);
        assert_eq!(image_patches(1800, 2400), 1452);
        assert_eq!(image_patches(2400, 1800), 1452);
        assert_eq!(image_patches(1, 1), 1);
        assert_eq!(image_patches(33, 1), 2);
        // Never more than the cap, whatever the shape.
        for (w, h) in [
            (4000, 1474),
            (10_000, 10_000),
            (1, 100_000),
            (100_000, 1),
            (u32::MAX, u32::MAX),
        ] {
            assert!(
                (1..=MAX_PATCHES).contains(&image_patches(w, h)),
                "{w} x {h}"
            );
        }
        let mini = ImagePricing::for_model("gpt-4.1-mini");
        assert_eq!(
            mini,
            ImagePricing::Patches {
                multiplier_percent: 162
            }
        );
        assert_eq!(
            mini.tokens(ImageDetail::High, Some((1024, 1024))),
            1024 * 162 / 100
        );
        // Detail does not apply; an unknown size bills the cap: 1536 x 1.62 = 2488.
        assert_eq!(mini.tokens(ImageDetail::Low, None), 2488);
        let nano = ImagePricing::for_model("gpt-4.1-nano-2025-04-14");
        assert_eq!(
            nano.tokens(ImageDetail::High, Some((1800, 2400))),
            1452 * 246 / 100
        );
        let o4 = ImagePricing::for_model("o4-mini");
        assert_eq!(
            o4.tokens(ImageDetail::Auto, Some((1024, 1024))),
            1024 * 172 / 100
        );
        assert_eq!(
            ImagePricing::for_model("gpt-5-mini"),
            ImagePricing::Patches {
                multiplier_percent: 162
            }
        );
    }

    #[test]
    fn reads_headers() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&640u32.to_be_bytes());
        png.extend_from_slice(&480u32.to_be_bytes());
        assert_eq!(image_size(&png), Some((640, 480)));
        let gif = b"GIF89a\x20\x03\x58\x02";
        assert_eq!(image_size(gif), Some((800, 600)));
        let jpeg = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x01,
            0x2C, 0x01, 0x90,
        ];
        assert_eq!(image_size(&jpeg), Some((400, 300)));
        let url = format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(&png)
        );
        assert_eq!(data_url_image_size(&url), Some((640, 480)));
        assert_eq!(data_url_image_size("https://example.com/a.png"), None);
    }
}
