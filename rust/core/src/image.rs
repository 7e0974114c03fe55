//! Image token accounting by the published tile formula, and image dimensions read from the
//! header of PNG, GIF, JPEG and WebP data (so a `data:` URL never counts as text).

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

/// Tokens of an image part. `size` is `(width, height)` in pixels when known; without it a
/// high-detail image counts the upper bound (`85 + 170 * 8 = 1445`) so a budget stays safe.
///
/// High detail: the image is scaled to fit in 2048 x 2048, then (if its shorter side is longer)
/// so that its shorter side is 768 px; it costs 85 plus 170 per 512 px tile.
pub fn image_tokens(detail: ImageDetail, size: Option<(u32, u32)>) -> u64 {
    match (detail, size) {
        (ImageDetail::Low, _) => LOW_DETAIL_TOKENS,
        (_, None) => LOW_DETAIL_TOKENS + TOKENS_PER_TILE * MAX_TILES,
        (_, Some((width, height))) => {
            LOW_DETAIL_TOKENS + TOKENS_PER_TILE * high_detail_tiles(width, height)
        }
    }
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
