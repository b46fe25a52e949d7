//! Valid images of any size for the real pages: a 1x1 image of the object's type whose padding
//! sits where decoders skip it (GIF comment extensions, a private PNG chunk, JPEG comment
//! segments, an unknown WebP chunk, an SVG comment, an ICO around the PNG). A browser that
//! cannot decode an image cancels its download, so random bytes would not load in full.

/// A 1x1 transparent GIF89a: header, screen descriptor with a 2-colour table, graphic control
/// extension, image descriptor, LZW data, trailer.
const GIF_HEAD: &[u8] = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00";
const GIF_TAIL: &[u8] = b"\x21\xf9\x04\x01\x00\x00\x00\x00\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02\x44\x01\x00\x3b";

const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// A 1x1 grey baseline JPEG (quality 50), SOI first.
const JPEG: &str = "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e1211101318281a1816\
161831232\
51d283a333d3c3933383740485c4e404457453738506d51575f626768673e4d71797064785c656763ffc0000b0800010001\
01011100ffc4001f0000010501010101010100000000000000000102030405060708090a0bffc400b5100002010303020403\
050504040000017d01020300041105122131410613516107227114328191a1082342b1c11552d1f02433627282090a161718\
191a25262728292a3435363738393a434445464748494a535455565758595a636465666768696a737475767778797a838485\
868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9da\
e1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9faffda0008010100003f00f3faffd9";

/// The VP8L chunk (header and payload) of a 1x1 lossless WebP.
const WEBP_VP8L: &[u8] = b"VP8L\x0e\x00\x00\x00\x2f\x00\x00\x00\x00\x07\x10\x11\xfd\x0f\x44\x44\xff\x03";

fn hex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap_or(0)).collect()
}

fn png_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc.finalize().to_be_bytes());
}

/// A 1x1 greyscale PNG of exactly `size` bytes (at least 82).
fn png(size: usize, fill: &mut dyn FnMut(usize) -> Vec<u8>) -> Option<Vec<u8>> {
    const FIXED: usize = 8 + 25 + 12 + 25 + 12; // signature, IHDR, padding chunk frame, IDAT, IEND
    let pad = size.checked_sub(FIXED)?;
    if pad > u32::MAX as usize / 2 {
        return None;
    }
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(PNG_SIGNATURE);
    png_chunk(&mut out, b"IHDR", &[0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0]);
    // Private ancillary chunk ("plPd"): decoders skip what they do not know.
    png_chunk(&mut out, b"plPd", &fill(pad));
    // zlib, one stored block holding the scanline [filter 0, pixel 0]; Adler-32 of it 0x00020001.
    png_chunk(&mut out, b"IDAT", &[0x78, 0x01, 0x01, 0x02, 0x00, 0xfd, 0xff, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01]);
    png_chunk(&mut out, b"IEND", &[]);
    (out.len() == size).then_some(out)
}

fn gif(size: usize, fill: &mut dyn FnMut(usize) -> Vec<u8>) -> Option<Vec<u8>> {
    // Comment extension: 0x21 0xfe, sub-blocks of at most 255 bytes (each with its length
    // byte), then a 0 terminator.
    let room = size.checked_sub(GIF_HEAD.len() + GIF_TAIL.len() + 3)?;
    let mut sub_blocks = Vec::new();
    let mut left = room;
    while left > 0 {
        let n = left.min(256) - 1; // a length byte and up to 255 bytes
        sub_blocks.push(n);
        left -= n + 1;
    }
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(GIF_HEAD);
    out.extend_from_slice(&[0x21, 0xfe]);
    let data = fill(room);
    let mut at = 0;
    for n in sub_blocks {
        if n == 0 {
            continue; // a zero-length sub-block would end the extension early; a length byte of 0 is the terminator below
        }
        out.push(n as u8);
        out.extend_from_slice(&data[at..at + n]);
        at += n;
    }
    out.push(0);
    out.extend_from_slice(GIF_TAIL);
    // Sub-blocks of n data bytes take n + 1; a lone leftover byte cannot be a sub-block, so
    // it becomes trailing bytes after the trailer (ignored by decoders).
    out.resize(size, 0);
    (out.len() == size).then_some(out)
}

fn jpeg(size: usize, fill: &mut dyn FnMut(usize) -> Vec<u8>) -> Option<Vec<u8>> {
    let image = hex(JPEG);
    let room = size.checked_sub(image.len())?;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&image[..20]); // SOI and the JFIF APP0 segment, which comes first
    // COM segments: 0xff 0xfe, a 2-byte length counting itself, at most 65533 data bytes.
    let data = fill(room);
    let mut left = room;
    let mut at = 0;
    while left >= 4 {
        let n = (left - 4).min(65533);
        out.extend_from_slice(&[0xff, 0xfe]);
        out.extend_from_slice(&((n + 2) as u16).to_be_bytes());
        out.extend_from_slice(&data[at..at + n]);
        at += n;
        left -= n + 4;
    }
    out.extend_from_slice(&image[20..]);
    out.resize(size, 0); // 1-3 leftover bytes after EOI, which decoders ignore
    Some(out)
}

fn webp(size: usize, fill: &mut dyn FnMut(usize) -> Vec<u8>) -> Option<Vec<u8>> {
    // Extended format: RIFF header, VP8X (canvas 1x1), the VP8L image, an unknown "PLPD" chunk.
    const FIXED: usize = 12 + 18 + WEBP_VP8L.len() + 8;
    let pad = size.checked_sub(FIXED)?;
    if pad % 2 == 1 || pad > u32::MAX as usize / 2 {
        return None; // RIFF chunks are padded to even sizes
    }
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&((size - 8) as u32).to_le_bytes());
    out.extend_from_slice(b"WEBP");
    out.extend_from_slice(b"VP8X\x0a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00");
    out.extend_from_slice(WEBP_VP8L);
    out.extend_from_slice(b"PLPD");
    out.extend_from_slice(&(pad as u32).to_le_bytes());
    out.extend_from_slice(&fill(pad));
    (out.len() == size).then_some(out)
}

fn svg(size: usize, fill: &mut dyn FnMut(usize) -> Vec<u8>) -> Option<Vec<u8>> {
    let head = b"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1\" height=\"1\"><!--";
    let tail = b"--></svg>\n";
    let room = size.checked_sub(head.len() + tail.len())?;
    let mut out = head.to_vec();
    out.extend(fill(room).into_iter().map(|b| b'a' + b % 26));
    out.extend_from_slice(tail);
    Some(out)
}

fn ico(size: usize, fill: &mut dyn FnMut(usize) -> Vec<u8>) -> Option<Vec<u8>> {
    // ICONDIR (6 bytes) and one ICONDIRENTRY (16) around a PNG image.
    let image = png(size.checked_sub(22)?, fill)?;
    let mut out = vec![0, 0, 1, 0, 1, 0, 1, 1, 0, 0, 1, 0, 32, 0];
    out.extend_from_slice(&(image.len() as u32).to_le_bytes());
    out.extend_from_slice(&22u32.to_le_bytes());
    out.extend_from_slice(&image);
    Some(out)
}

/// A valid image of `content_type` of exactly `size` bytes; `fill(n)` gives n padding bytes.
/// None: a type without a generator here, or a size too small (or odd where it cannot be).
pub fn image(content_type: &str, size: u64, fill: &mut dyn FnMut(usize) -> Vec<u8>) -> Option<Vec<u8>> {
    let size = usize::try_from(size).ok()?;
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let made = match essence.as_str() {
        "image/png" | "image/apng" => png(size, fill),
        "image/gif" => gif(size, fill),
        "image/jpeg" | "image/jpg" | "image/pjpeg" => jpeg(size, fill),
        "image/webp" => webp(size, fill).or_else(|| png(size, fill)),
        "image/svg+xml" => svg(size, fill),
        "image/x-icon" | "image/vnd.microsoft.icon" => ico(size, fill),
        _ => None,
    }?;
    (made.len() == size).then_some(made)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zeros(n: usize) -> Vec<u8> {
        vec![7; n]
    }

    #[test]
    fn every_type_has_the_exact_size_and_its_signature() {
        for (t, magic) in [("image/png", &b"\x89PNG"[..]), ("image/gif", b"GIF89a"), ("image/jpeg", b"\xff\xd8\xff\xe0"),
                           ("image/svg+xml", b"<svg"), ("image/x-icon", b"\x00\x00\x01\x00")] {
            for size in [400u64, 401, 1000, 70_000, 300_001] {
                let img = image(t, size, &mut zeros).unwrap_or_else(|| panic!("{t} {size}"));
                assert_eq!(img.len() as u64, size, "{t} {size}");
                assert!(img.starts_with(magic), "{t} {size}");
            }
        }
        let even = image("image/webp", 1000, &mut zeros).unwrap();
        assert!(even.starts_with(b"RIFF") && &even[8..16] == b"WEBPVP8X");
        // An odd WebP size falls back to a PNG (browsers sniff the bytes, not the type).
        assert!(image("image/webp", 1001, &mut zeros).unwrap().starts_with(b"\x89PNG"));
        assert!(image("image/png", 20, &mut zeros).is_none());
        assert!(image("image/avif", 1000, &mut zeros).is_none());
    }

    #[test]
    fn png_chunks_carry_their_crc() {
        let img = image("image/png", 500, &mut zeros).unwrap();
        let mut at = 8;
        let mut kinds = Vec::new();
        while at < img.len() {
            let n = u32::from_be_bytes(img[at..at + 4].try_into().unwrap()) as usize;
            let kind = &img[at + 4..at + 8];
            let crc = u32::from_be_bytes(img[at + 8 + n..at + 12 + n].try_into().unwrap());
            assert_eq!(crc, crc32fast::hash(&img[at + 4..at + 8 + n]));
            kinds.push(String::from_utf8(kind.to_vec()).unwrap());
            at += 12 + n;
        }
        assert_eq!(kinds, ["IHDR", "plPd", "IDAT", "IEND"]);
    }

    #[test]
    fn gif_comment_sub_blocks_add_up() {
        for size in 70..1200 {
            let img = image("image/gif", size, &mut zeros).unwrap();
            assert_eq!(img.len() as u64, size);
            // Walk the comment extension: it ends with a 0 and then the graphic control extension.
            let mut at = GIF_HEAD.len() + 2;
            while img[at] != 0 {
                at += img[at] as usize + 1;
            }
            assert_eq!(&img[at + 1..at + 1 + GIF_TAIL.len()], GIF_TAIL, "{size}");
        }
    }
}
