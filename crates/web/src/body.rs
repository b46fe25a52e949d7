//! Generated response bodies: a pseudo-random block, repeated, sliced without copying.
//!
//! Every body (manifest objects and `/bytes`) is a window onto one block of
//! [`BLOCK_SIZE`] pseudo-random bytes generated once from a seed (ChaCha8). An object's body is
//! a function of (seed, hostname, path, size) only: byte `i` of it is
//! `block[(offset + i) % BLOCK_SIZE]` with `offset = object_offset(hostname, path)`. Bodies are
//! incompressible for any compressor whose window is shorter than the block (deflate, TLS has no
//! compression), and cost no CPU to produce beyond reference counting.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use rand::{RngCore, SeedableRng};
use tokio::time::Instant;

use crate::pace::Pacer;

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

    /// `len` bytes of the endless repetition starting at `offset` (at most [`BLOCK_SIZE`]: a
    /// longer `len` is cut to that), without copying.
    pub fn window(&self, offset: usize, len: usize) -> Bytes {
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

/// A response body: empty, fixed bytes, or a window of a [`Block`] streamed in chunks (at
/// full speed, or paced to a rate).
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
    /// Like `Pattern`, released at a fixed rate (`GET /bytes?rate=`). Boxed: it is three
    /// times the size of the other variants, and every response carries a `ResponseBody`.
    Paced(Box<PatternStream>),
}

/// A window of a [`Block`] produced chunk by chunk (at most [`CHUNK_SIZE`] bytes each),
/// optionally paced by a [`Pacer`] and optionally cut at a deadline. The paced response body
/// of `GET /bytes?rate=`, the raw protocol's server and bulk uploads all send through it. Uses
/// tokio timers (and tokio's clock, so that tests can pause it): poll it inside a runtime.
#[derive(Debug)]
pub struct PatternStream {
    block: Block,
    offset: usize,
    remaining: u64,
    pacer: Option<Pacer>,
    /// Time origin of the pacer.
    start: Instant,
    deadline: Option<Instant>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl PatternStream {
    /// `size` bytes of `block`'s repetition starting at `offset`, as fast as they are taken.
    pub fn new(block: &Block, offset: usize, size: u64) -> PatternStream {
        PatternStream {
            block: block.clone(),
            offset: offset % BLOCK_SIZE,
            remaining: size,
            pacer: None,
            start: Instant::now(),
            deadline: None,
            sleep: None,
        }
    }

    /// Released at `rate_bps` bit/s (see [`crate::pace`]), pacing from now.
    pub fn paced(mut self, rate_bps: u64) -> PatternStream {
        self.start = Instant::now();
        self.pacer = Some(Pacer::new(rate_bps, std::time::Duration::ZERO));
        self
    }

    /// Ends at `deadline` even if bytes remain.
    pub fn until(mut self, deadline: Instant) -> PatternStream {
        self.deadline = Some(deadline);
        self
    }

    /// Bytes not produced yet.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// The next chunk, or `None` at the end (all bytes produced, or the deadline passed).
    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        loop {
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                self.remaining = 0;
            }
            if self.remaining == 0 {
                self.sleep = None;
                return Poll::Ready(None);
            }
            if let Some(sleep) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.sleep = None;
            }
            let want = self.remaining.min(CHUNK_SIZE as u64);
            let granted = match &mut self.pacer {
                None => Ok(want),
                Some(p) => p.take(self.start.elapsed(), want),
            };
            match granted {
                Ok(n) => {
                    // n <= want <= CHUNK_SIZE: fits in usize.
                    let n = usize::try_from(n).unwrap_or(CHUNK_SIZE);
                    let chunk = self.block.window(self.offset, n);
                    self.offset = (self.offset + n) % BLOCK_SIZE;
                    self.remaining -= n as u64;
                    return Poll::Ready(Some(chunk));
                }
                Err(at) => {
                    let wake = self.deadline.map_or(self.start + at, |d| d.min(self.start + at));
                    self.sleep = Some(Box::pin(tokio::time::sleep_until(wake)));
                }
            }
        }
    }

    /// [`PatternStream::poll_chunk`] as a future.
    pub async fn next_chunk(&mut self) -> Option<Bytes> {
        std::future::poll_fn(|cx| self.poll_chunk(cx)).await
    }
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

    /// A generated body like [`ResponseBody::pattern`], released at `rate_bps` bit/s (see
    /// [`crate::pace`]); pacing starts now.
    pub fn paced(block: &Block, offset: usize, size: u64, rate_bps: u64) -> ResponseBody {
        ResponseBody::Paced(Box::new(PatternStream::new(block, offset, size).paced(rate_bps)))
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
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
            ResponseBody::Paced(p) => p.poll_chunk(cx).map(|c| c.map(|c| Ok(Frame::data(c)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Empty => true,
            ResponseBody::Full(b) => b.as_ref().is_none_or(|b| b.is_empty()),
            ResponseBody::Pattern { remaining, .. } => *remaining == 0,
            ResponseBody::Paced(p) => p.remaining() == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Empty => SizeHint::with_exact(0),
            ResponseBody::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            ResponseBody::Pattern { remaining, .. } => SizeHint::with_exact(*remaining),
            ResponseBody::Paced(p) => SizeHint::with_exact(p.remaining()),
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

    #[test]
    fn response_body_stays_small() {
        assert!(std::mem::size_of::<ResponseBody>() <= 64, "{}", std::mem::size_of::<ResponseBody>());
    }

    #[tokio::test(start_paused = true)]
    async fn paced_body_has_the_same_bytes_at_the_rate() {
        let block = Block::new(3);
        let size = 1_000_000u64;
        let start = tokio::time::Instant::now();
        let body = ResponseBody::paced(&block, 17, size, 8_000_000); // 1 MB/s
        assert_eq!(body.size_hint().exact(), Some(size));
        let got = body.collect().await.unwrap().to_bytes();
        assert!(got[..] == block.expected(17, size)[..]);
        // The paused clock advances only through the pacer's sleeps: 1 MB at 1 MB/s, less the
        // first quantum (5 ms) sent at once.
        let took = start.elapsed().as_secs_f64();
        assert!((0.99..=1.0).contains(&took), "{took}");
    }

    #[tokio::test(start_paused = true)]
    async fn pattern_stream_stops_at_its_deadline() {
        let block = Block::new(3);
        let start = tokio::time::Instant::now();
        let mut s = PatternStream::new(&block, 0, u64::MAX).paced(8_000_000).until(start + std::time::Duration::from_millis(500));
        let mut got = 0u64;
        while let Some(c) = s.next_chunk().await {
            got += c.len() as u64;
        }
        // 1 MB/s for 0.5 s, plus the first quantum; the last wait is cut at the deadline.
        assert!((500_000..=505_000).contains(&got), "{got}");
        assert_eq!(start.elapsed(), std::time::Duration::from_millis(500));
        assert_eq!(s.remaining(), 0);
        // Unpaced: everything, in chunks of at most CHUNK_SIZE.
        let mut s = PatternStream::new(&block, 5, 200_000);
        let mut sizes = Vec::new();
        while let Some(c) = s.next_chunk().await {
            sizes.push(c.len());
        }
        assert_eq!(sizes, vec![CHUNK_SIZE, CHUNK_SIZE, CHUNK_SIZE, 200_000 - 3 * CHUNK_SIZE]);
    }
}
