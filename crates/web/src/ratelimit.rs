//! A request-rate limit per connection: a token bucket of whole requests. Pure logic (time is
//! an argument), so it is tested on a virtual clock; the server feeds it `Instant::now()`.

use std::time::{Duration, Instant};

/// Token bucket: `burst` requests at once, refilled at `per_second`.
#[derive(Debug, Clone)]
pub struct RequestBucket {
    per_second: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl RequestBucket {
    /// A full bucket at `now`. `per_second` and `burst` are clamped to at least 1.
    pub fn new(per_second: u32, burst: u32, now: Instant) -> RequestBucket {
        let burst = f64::from(burst.max(1));
        RequestBucket { per_second: f64::from(per_second.max(1)), burst, tokens: burst, last: now }
    }

    /// Takes one request's token at `now`; `Err(wait)` says how long until one is available.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        // A clock that went backwards (it cannot with Instant, but a caller may pass an old
        // value) refills nothing.
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.per_second))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_steady_rate() {
        let t0 = Instant::now();
        let mut b = RequestBucket::new(100, 10, t0);
        for _ in 0..10 {
            assert!(b.take(t0).is_ok());
        }
        let wait = b.take(t0).unwrap_err();
        assert!((wait.as_secs_f64() - 0.01).abs() < 1e-9, "{wait:?}");
        // One second later: 100 more would fit, but the bucket holds only 10.
        let t1 = t0 + Duration::from_secs(1);
        let granted = (0..50).filter(|_| b.take(t1).is_ok()).count();
        assert_eq!(granted, 10);
        // Over 2 s at 1 request every 5 ms (200/s offered), 100/s are granted (+ the burst).
        let mut granted = 0;
        for i in 1..=400u64 {
            if b.take(t1 + Duration::from_millis(5 * i)).is_ok() {
                granted += 1;
            }
        }
        assert!((200..=201).contains(&granted), "{granted}");
    }

    #[test]
    fn old_time_refills_nothing() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let mut b = RequestBucket::new(1, 1, t0);
        assert!(b.take(t0).is_ok());
        assert!(b.take(t0 - Duration::from_secs(5)).is_err());
        assert!(b.take(t0 + Duration::from_secs(1)).is_ok());
    }
}
