//! Images for the `read` tool (`spec/tools.md` §3.2–3.3): content sniffing of the four
//! supported types and the auto-resize that keeps an inline image under 2000×2000 px and a
//! base64 size under 4.5 MiB.
//!
//! Resize algorithm (as the reference's `resizeImage`): decode (GIF → first frame), apply the
//! EXIF orientation of JPEG and WebP files; if the oriented size fits and the original base64
//! is under the limit, send the original bytes untouched; otherwise fit into 2000×2000 keeping
//! the aspect ratio, resize with Lanczos3 and take the *first* encoding under the limit among
//! PNG, JPEG q80, q85, q70, q55, q40; if none fits, shrink both sides to ¾ (a side at 1 stays
//! 1) and retry down to 1×1. Any decode or encode failure is `None` ("could not be resized").
//!
//! Invariant: pure functions over bytes (no file access); never panics on malformed images.

use std::io::Cursor;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use image::codecs::jpeg::JpegEncoder;
use image::imageops::FilterType;
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader};

/// How many leading bytes the sniffer looks at.
pub const SNIFF_BYTES: usize = 4100;

/// Maximum width and height of an inline image.
pub const MAX_DIMENSION: u32 = 2000;

/// Base64 length an inline image must stay under (4.5 MiB).
pub const MAX_BASE64_BYTES: usize = 4_718_592;

/// Returns the MIME type of a supported image from its first bytes, or `None`.
///
/// JPEG (`FF D8 FF`, but not JPEG-LS `FF D8 FF F7`), PNG (not APNG: an `acTL` chunk before the
/// first `IDAT`), GIF (`GIF`), WebP (`RIFF` … `WEBP`). The extension plays no part.
pub fn sniff_image_mime(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return (head.get(3) != Some(&0xF7)).then_some("image/jpeg");
    }
    if head.starts_with(&[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A]) {
        return (!is_apng(head)).then_some("image/png");
    }
    if head.starts_with(b"GIF") {
        return Some("image/gif");
    }
    if head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WEBP") {
        return Some("image/webp");
    }
    None
}

/// True when a PNG's chunks (within the sniffed bytes) hold `acTL` before the first `IDAT`.
fn is_apng(head: &[u8]) -> bool {
    let mut pos = 8usize;
    while let Some(header) = head.get(pos..pos + 8) {
        let length = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
        match &header[4..8] {
            b"acTL" => return true,
            b"IDAT" => return false,
            _ => {}
        }
        pos = match pos.checked_add(12).and_then(|p| p.checked_add(length)) {
            Some(next) => next,
            None => return false,
        };
    }
    false
}

/// An image ready to send inline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineImage {
    /// Base64 of the bytes to send.
    pub data: String,
    /// Their MIME type.
    pub mime_type: String,
    /// Width after orientation, before resizing.
    pub original_width: u32,
    /// Height after orientation, before resizing.
    pub original_height: u32,
    /// Width sent.
    pub width: u32,
    /// Height sent.
    pub height: u32,
    /// True when the image was re-encoded.
    pub was_resized: bool,
}

impl InlineImage {
    /// Returns the coordinate-mapping note for a re-encoded image, `None` otherwise:
    /// `[Image: original WxH, displayed at wxh. Multiply coordinates by S to map to original image.]`.
    pub fn dimension_note(&self) -> Option<String> {
        if !self.was_resized {
            return None;
        }
        let scale = f64::from(self.original_width) / f64::from(self.width.max(1));
        Some(format!(
            "[Image: original {}x{}, displayed at {}x{}. Multiply coordinates by {} to map to original image.]",
            self.original_width,
            self.original_height,
            self.width,
            self.height,
            to_fixed_2(scale)
        ))
    }
}

/// JavaScript's `toFixed(2)` for the positive scale factors used here: half up on the exact
/// binary value, where `{:.2}` rounds a tie half to even. An exact tie `x.xx5` must be a
/// multiple of 1/8, so it is visible in `value * 1000`.
fn to_fixed_2(value: f64) -> String {
    let thousandths = value * 1000.0;
    if thousandths.fract() == 0.0 && (thousandths as i64).rem_euclid(10) == 5 {
        return format!("{:.2}", (thousandths + 5.0) / 1000.0);
    }
    format!("{value:.2}")
}

/// Decodes, orients and — when needed — shrinks an image; `None` when it cannot be decoded
/// or cannot fit the limits.
pub fn resize_for_inline(bytes: &[u8], mime_type: &str) -> Option<InlineImage> {
    let original_base64 = STANDARD.encode(bytes);
    let decoded = decode_oriented(bytes)?;
    let (original_width, original_height) = (decoded.width(), decoded.height());
    if original_width <= MAX_DIMENSION
        && original_height <= MAX_DIMENSION
        && original_base64.len() < MAX_BASE64_BYTES
    {
        return Some(InlineImage {
            data: original_base64,
            mime_type: mime_type.to_owned(),
            original_width,
            original_height,
            width: original_width,
            height: original_height,
            was_resized: false,
        });
    }
    let (mut width, mut height) = fit_within(original_width, original_height);
    loop {
        let resized = decoded.resize_exact(width, height, FilterType::Lanczos3);
        for (encoded, mime) in encodings(&resized) {
            let data = STANDARD.encode(&encoded);
            if data.len() < MAX_BASE64_BYTES {
                return Some(InlineImage {
                    data,
                    mime_type: mime.to_owned(),
                    original_width,
                    original_height,
                    width,
                    height,
                    was_resized: true,
                });
            }
        }
        if width == 1 && height == 1 {
            return None;
        }
        let next_width = if width == 1 {
            1
        } else {
            (width * 3 / 4).max(1)
        };
        let next_height = if height == 1 {
            1
        } else {
            (height * 3 / 4).max(1)
        };
        if (next_width, next_height) == (width, height) {
            return None;
        }
        (width, height) = (next_width, next_height);
    }
}

/// Fits a size into 2000×2000 keeping the aspect ratio (width first, then height, rounding
/// half up as `Math.round`).
pub fn fit_within(width: u32, height: u32) -> (u32, u32) {
    let (mut w, mut h) = (u64::from(width), u64::from(height));
    let max = u64::from(MAX_DIMENSION);
    if w > max {
        h = (h * max * 2 + w) / (w * 2);
        w = max;
    }
    if h > max {
        w = (w * max * 2 + h) / (h * 2);
        h = max;
    }
    // Both are at most 2000 now, or were already within u32.
    (
        u32::try_from(w).unwrap_or(MAX_DIMENSION).max(1),
        u32::try_from(h).unwrap_or(MAX_DIMENSION).max(1),
    )
}

/// The candidate encodings in the reference's order: PNG, then JPEG at 80, 85, 70, 55, 40.
fn encodings(image: &DynamicImage) -> Vec<(Vec<u8>, &'static str)> {
    let mut out = Vec::new();
    let mut png = Vec::new();
    if image
        .write_to(&mut Cursor::new(&mut png), ImageFormat::Png)
        .is_ok()
    {
        out.push((png, "image/png"));
    }
    let rgb = image.to_rgb8();
    for quality in [80u8, 85, 70, 55, 40] {
        let mut jpeg = Vec::new();
        if JpegEncoder::new_with_quality(&mut jpeg, quality)
            .encode_image(&rgb)
            .is_ok()
        {
            out.push((jpeg, "image/jpeg"));
        }
    }
    out
}

/// Decodes the first frame and applies the EXIF orientation of JPEG and WebP files.
fn decode_oriented(bytes: &[u8]) -> Option<DynamicImage> {
    let reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .ok()?;
    let format = reader.format()?;
    let mut decoder = reader.into_decoder().ok()?;
    let orientation = match format {
        ImageFormat::Jpeg | ImageFormat::WebP => decoder.orientation().ok(),
        _ => None,
    };
    let mut image = DynamicImage::from_decoder(decoder).ok()?;
    if let Some(orientation) = orientation {
        image.apply_orientation(orientation);
    }
    Some(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing_looks_at_content_only() {
        assert_eq!(
            sniff_image_mime(&[0xFF, 0xD8, 0xFF, 0xE0]),
            Some("image/jpeg")
        );
        assert_eq!(sniff_image_mime(&[0xFF, 0xD8, 0xFF, 0xF7]), None);
        assert_eq!(sniff_image_mime(b"GIF text"), Some("image/gif"));
        assert_eq!(
            sniff_image_mime(b"RIFF\0\0\0\0WEBPVP8 "),
            Some("image/webp")
        );
        assert_eq!(sniff_image_mime(b""), None);
        assert_eq!(sniff_image_mime(b"hello"), None);
        let mut apng = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
        apng.extend_from_slice(&[0, 0, 0, 0]);
        apng.extend_from_slice(b"acTL");
        apng.extend_from_slice(&[0; 4]);
        assert_eq!(sniff_image_mime(&apng), None);
    }

    #[test]
    fn fitting_rounds_like_math_round() {
        assert_eq!(fit_within(3000, 1000), (2000, 667));
        assert_eq!(fit_within(1000, 3000), (667, 2000));
        assert_eq!(fit_within(4000, 3000), (2000, 1500));
        assert_eq!(fit_within(100, 100), (100, 100));
    }

    #[test]
    fn scale_note_uses_two_decimals() {
        assert_eq!(to_fixed_2(1.5), "1.50");
        assert_eq!(to_fixed_2(1.0), "1.00");
        assert_eq!(to_fixed_2(3000.0 / 2000.0), "1.50");
        assert_eq!(to_fixed_2(1.125), "1.13");
        assert_eq!(to_fixed_2(2.0 / 3.0), "0.67");
    }
}
