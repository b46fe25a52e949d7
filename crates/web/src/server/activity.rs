//! Progress of a TCP connection for the idle timeout: bytes count only while a request is in
//! flight (docs/server.md, slowloris).

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::{Body, Frame};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::body::ResponseBody;

/// When a connection last made progress, for the idle timeout. Bytes count as progress only
/// while a request is in flight (from its head until its response body is done or dropped):
/// a client that trickles a request head (HTTP/2 HEADERS, TLS or HTTP/1.1 bytes) or sends
/// only control frames (PING, WINDOW_UPDATE) between requests is idle, and is closed after the
/// idle timeout however many bytes it sends.
pub(super) struct Activity {
    last_ms: AtomicU64,
    in_flight: AtomicUsize,
    epoch: Instant,
}

impl Activity {
    pub(super) fn new(epoch: Instant) -> Arc<Activity> {
        Arc::new(Activity { last_ms: AtomicU64::new(epoch.elapsed().as_millis() as u64), in_flight: AtomicUsize::new(0), epoch })
    }

    fn touch(&self) {
        self.last_ms.store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn moved(&self) {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            self.touch();
        }
    }

    /// A request began: progress until the guard is dropped.
    pub(super) fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.touch();
        InFlight(self.clone())
    }

    /// Completes once nothing moved for `idle`.
    pub(super) async fn idle(&self, idle: Duration) {
        loop {
            let deadline = self.epoch + Duration::from_millis(self.last_ms.load(Ordering::Relaxed)) + idle;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline.into()).await;
        }
    }
}

/// One request in flight; the idle clock restarts when it ends.
pub(super) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

/// A response body that keeps its request in flight until it is sent or dropped.
pub(super) struct TrackedBody {
    pub(super) inner: ResponseBody,
    pub(super) _in_flight: InFlight,
}

impl Body for TrackedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// Wraps a stream and reports bytes moved to its [`Activity`].
pub(super) struct ActivityIo<S> {
    pub(super) inner: S,
    pub(super) activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for ActivityIo<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.moved();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ActivityIo<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.moved();
        }
        r
    }
    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.moved();
        }
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
