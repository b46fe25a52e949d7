//! Generated response bodies: a pseudo-random block, repeated, sliced without copying.
//!
//! Every body (manifest objects and `/bytes`) is a window onto one block of
//! [`BLOCK_SIZE`] pseudo-random bytes generated once from a seed (ChaCha8). An object's body is
//! a function of (seed, hostname, path, size) only: byte `i` of it is
//! `block[(offset + i) % BLOCK_SIZE]` with `offset = object_offset(hostname, path)`. Bodies are
//! incompressible for any compressor whose window is shorter than the block (deflate, TLS has no
//! compression), and cost no CPU to produce beyond reference counting.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use rand::{RngCore, SeedableRng};

/// Bytes in the repeated block (1 MiB).
pub const BLOCK_SIZE: usize = 1 << 20;

/// Largest frame handed to hyper at once.
pub const CHUNK_SIZE: usize = 64 * 1024;

/// The pseudo-random block, stored twice in a row so that any window of up to
/// [`BLOCK_SIZE`] bytes starting inside the first copy is contiguous.
#[derive(Clone, Debug)]
pub struct Block {
    doubled: Bytes,
}

impl Block {
    /// Generates the block for `seed` (about 1 ms).
    pub fn new(seed: u64) -> Block {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut v = vec![0u8; 2 * BLOCK_SIZE];
        rng.fill_bytes(&mut v[..BLOCK_SIZE]);
        v.copy_within(..BLOCK_SIZE, BLOCK_SIZE);
        Block { doubled: Bytes::from(v) }
    }

    /// `len` bytes of the endless repetition starting at `offset` (`len` <= [`BLOCK_SIZE`]).
    fn window(&self, offset: usize, len: usize) -> Bytes {
        let start = offset % BLOCK_SIZE;
        let len = len.min(BLOCK_SIZE);
        self.doubled.slice(start..start + len)
    }

    /// The whole body of `size` bytes starting at `offset`, in memory (tests and clients that
    /// check what they received).
    pub fn expected(&self, offset: usize, size: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        let mut at = offset;
        let mut left = size;
        while left > 0 {
            let n = usize::try_from(left).unwrap_or(usize::MAX).min(BLOCK_SIZE);
            out.extend_from_slice(&self.window(at, n));
            at = (at + n) % BLOCK_SIZE;
            left -= n as u64;
        }
        out
    }
}

/// Where an object's body starts in the block: FNV-1a 64 of `hostname`, a zero byte and `path`.
pub fn object_offset(hostname: &str, path: &str) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in hostname.bytes().chain(std::iter::once(0)).chain(path.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % BLOCK_SIZE as u64) as usize
}

/// A response body: empty, fixed bytes, or a window of a [`Block`] streamed in chunks.
#[derive(Debug)]
pub enum ResponseBody {
    /// No bytes.
    Empty,
    /// Fixed bytes (small replies), sent as one frame.
    Full(Option<Bytes>),
    /// `remaining` bytes of the block's repetition starting at `offset`.
    Pattern {
        /// The block.
        block: Block,
        /// Current position in the block.
        offset: usize,
        /// Bytes still to send.
        remaining: u64,
    },
}

impl ResponseBody {
    /// A small fixed body.
    pub fn full(bytes: impl Into<Bytes>) -> ResponseBody {
        ResponseBody::Full(Some(bytes.into()))
    }

    /// A generated body of `size` bytes starting at `offset` in `block`.
    pub fn pattern(block: &Block, offset: usize, size: u64) -> ResponseBody {
        ResponseBody::Pattern { block: block.clone(), offset: offset % BLOCK_SIZE, remaining: size }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        match this {
            ResponseBody::Empty => Poll::Ready(None),
            ResponseBody::Full(b) => Poll::Ready(b.take().filter(|b| !b.is_empty()).map(|b| Ok(Frame::data(b)))),
            ResponseBody::Pattern { block, offset, remaining } => {
                if *remaining == 0 {
                    return Poll::Ready(None);
                }
                let n = usize::try_from(*remaining).unwrap_or(usize::MAX).min(CHUNK_SIZE);
                let chunk = block.window(*offset, n);
                *offset = (*offset + n) % BLOCK_SIZE;
                *remaining -= n as u64;
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Empty => true,
            ResponseBody::Full(b) => b.as_ref().is_none_or(|b| b.is_empty()),
            ResponseBody::Pattern { remaining, .. } => *remaining == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Empty => SizeHint::with_exact(0),
            ResponseBody::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            ResponseBody::Pattern { remaining, .. } => SizeHint::with_exact(*remaining),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[test]
    fn block_is_deterministic_and_seeded() {
        let a = Block::new(7);
        let b = Block::new(7);
        let c = Block::new(8);
        assert_eq!(a.expected(0, 4096), b.expected(0, 4096));
        assert_ne!(a.expected(0, 4096), c.expected(0, 4096));
        // Wraps around the block.
        let w = a.expected(BLOCK_SIZE - 3, 6);
        assert_eq!(&w[..3], &a.expected(BLOCK_SIZE - 3, 3)[..]);
        assert_eq!(&w[3..], &a.expected(0, 3)[..]);
        assert_eq!(a.expected(5, 3 * BLOCK_SIZE as u64 + 10).len(), 3 * BLOCK_SIZE + 10);
    }

    #[test]
    fn offsets_differ_per_object() {
        assert_ne!(object_offset("a.test", "/x"), object_offset("a.test", "/y"));
        assert_ne!(object_offset("a.test", "/x"), object_offset("b.test", "/x"));
        assert!(object_offset("a.test", "/x") < BLOCK_SIZE);
    }

    #[tokio::test]
    async fn streamed_body_matches_expected() {
        let block = Block::new(3);
        for size in [1u64, 1000, CHUNK_SIZE as u64, 3 * BLOCK_SIZE as u64 + 17] {
            let offset = BLOCK_SIZE - 100;
            let body = ResponseBody::pattern(&block, offset, size);
            assert_eq!(body.size_hint().exact(), Some(size));
            let got = body.collect().await.unwrap().to_bytes();
            assert_eq!(got.len() as u64, size);
            assert!(got[..] == block.expected(offset, size)[..]);
        }
        let empty = ResponseBody::full(Bytes::new());
        assert!(empty.is_end_stream());
    }
}
