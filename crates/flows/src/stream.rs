//! The first bytes of a byte stream (one direction of a TCP connection, or QUIC's CRYPTO
//! stream), put in order from segments that may come out of order, overlap or repeat. Only
//! handshakes are read from it, so it keeps at most [`LIMIT`] bytes and is dropped once the
//! handshake is read.

/// Bytes kept from the start of a stream: a ClientHello with post-quantum key shares and a long
/// extension list is about 2 KB; 16 KiB leaves room for padding and certificates' neighbours.
pub const LIMIT: usize = 16 * 1024;
/// Separate pieces kept before later out-of-order pieces are dropped (bounds the work per insert).
const MAX_RANGES: usize = 16;

/// The start of a stream, reassembled.
#[derive(Debug, Default)]
pub struct StreamBuf {
    data: Vec<u8>,
    /// Received byte ranges, sorted, disjoint and not touching (inline: no allocation per
    /// insert).
    ranges: [(u32, u32); MAX_RANGES],
    n_ranges: usize,
}

impl StreamBuf {
    /// Puts `bytes` at stream `offset`; returns whether the in-order prefix grew.
    pub fn insert(&mut self, offset: u64, bytes: &[u8]) -> bool {
        if offset >= LIMIT as u64 || bytes.is_empty() {
            return false;
        }
        let start = offset as usize;
        let end = (start + bytes.len()).min(LIMIT);
        let (s32, e32) = (start as u32, end as u32);
        let ranges = &self.ranges[..self.n_ranges];
        // Ranges before the new one, and those it overlaps or touches.
        let i = ranges.iter().take_while(|r| r.1 < s32).count();
        let j = i + ranges[i..].iter().take_while(|r| r.0 <= e32).count();
        if i == j && self.n_ranges == MAX_RANGES {
            return false;
        }
        let before = self.contiguous_len();
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        self.data[start..end].copy_from_slice(&bytes[..end - start]);
        let merged = if i < j { (s32.min(self.ranges[i].0), e32.max(self.ranges[j - 1].1)) } else { (s32, e32) };
        // Replace ranges[i..j] by the merged one.
        if i == j {
            self.ranges.copy_within(i..self.n_ranges, i + 1);
            self.n_ranges += 1;
        } else {
            self.ranges.copy_within(j..self.n_ranges, i + 1);
            self.n_ranges -= j - i - 1;
        }
        self.ranges[i] = merged;
        self.contiguous_len() > before
    }

    /// Whether nothing was received yet.
    pub fn is_empty(&self) -> bool {
        self.n_ranges == 0
    }

    /// Length of the in-order prefix.
    pub fn contiguous_len(&self) -> usize {
        match self.ranges[..self.n_ranges].first() {
            Some(&(0, e)) => e as usize,
            _ => 0,
        }
    }

    /// The in-order prefix.
    pub fn contiguous(&self) -> &[u8] {
        &self.data[..self.contiguous_len()]
    }

    /// Whether the prefix reached [`LIMIT`]: nothing more will arrive.
    pub fn full(&self) -> bool {
        self.contiguous_len() >= LIMIT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_out_of_order_and_overlaps() {
        let mut s = StreamBuf::default();
        assert!(!s.insert(5, b"fghij"));
        assert_eq!(s.contiguous(), b"");
        assert!(s.insert(0, b"abc"));
        assert_eq!(s.contiguous(), b"abc");
        assert!(s.insert(2, b"cde"));
        assert_eq!(s.contiguous(), b"abcdefghij");
        assert!(!s.insert(0, b"ab"));
        assert!(s.insert(10, b"k"));
        assert_eq!(s.contiguous(), b"abcdefghijk");
    }

    #[test]
    fn bounded() {
        let mut s = StreamBuf::default();
        assert!(!s.insert(LIMIT as u64, b"x"));
        assert!(!s.insert(u64::MAX, b"x"));
        for i in 0..100u64 {
            s.insert(100 + i * 10, b"x");
        }
        assert!(s.n_ranges <= MAX_RANGES);
        assert!(s.insert(0, &vec![1u8; LIMIT + 10]));
        assert!(s.full());
        assert_eq!(s.contiguous().len(), LIMIT);
    }
}
