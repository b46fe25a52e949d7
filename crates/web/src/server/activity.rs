//! Progress of a TCP connection for the idle timeout: bytes count only while a request is in
//! flight, or while the server drains a response it could not write at once (docs/server.md,
//! slowloris).

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
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
///
/// A response's body is "done" when its last byte is handed to the connection's write buffer,
/// not when it is sent: a site object is one buffer, handed over at once, and on a slow link
/// hyper's buffer drains for minutes after that. So the server's draining counts as progress:
/// a write that follows a blocked one (the socket was full), and, while a write is blocked,
/// bytes the peer acknowledged since the last look (`tcpi_bytes_acked`). The second is needed
/// because the kernel wakes a blocked writer only once a third of the send buffer is free,
/// which at 1 kB/s (002's slowest link shared by 30 HTTP/1.1 connections) is more than the 30 s
/// idle timeout. nginx's `send_timeout` likewise times only the gaps between successful writes.
/// A reader that stops reading acknowledges nothing and is idle.
pub(super) struct Activity {
    last_ms: AtomicU64,
    in_flight: AtomicUsize,
    /// A write returned `Pending` (the socket buffer is full) and no write succeeded since.
    write_blocked: AtomicBool,
    /// A duplicate of the connection's TCP socket, to read `TCP_INFO` from.
    socket: Option<OwnedFd>,
    /// `tcpi_bytes_acked` at the last look.
    acked: AtomicU64,
    epoch: Instant,
}

impl Activity {
    /// The activity of a connection over `socket` (a duplicate of its TCP socket; `None`: no
    /// kernel progress is read).
    pub(super) fn new(epoch: Instant, socket: Option<OwnedFd>) -> Arc<Activity> {
        Arc::new(Activity {
            last_ms: AtomicU64::new(epoch.elapsed().as_millis() as u64),
            in_flight: AtomicUsize::new(0),
            write_blocked: AtomicBool::new(false),
            socket,
            acked: AtomicU64::new(0),
            epoch,
        })
    }

    fn touch(&self) {
        self.last_ms.store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Bytes were read: progress while a request is in flight.
    fn read(&self) {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            self.touch();
        }
    }

    /// A write ended: `Some(n)` bytes written, `None` blocked. A written byte is progress while a
    /// request is in flight, or when it drains what a blocked write left behind.
    fn wrote(&self, written: Option<usize>) {
        match written {
            None => self.write_blocked.store(true, Ordering::Relaxed),
            Some(0) => {}
            Some(_) => {
                let draining = self.write_blocked.swap(false, Ordering::Relaxed);
                if draining || self.in_flight.load(Ordering::Relaxed) > 0 {
                    self.touch();
                }
            }
        }
    }

    /// A request began: progress until the guard is dropped.
    pub(super) fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.touch();
        InFlight(self.clone())
    }

    /// Where the connection's response bytes are. Pending while a write is blocked or the kernel
    /// holds bytes the client has not acknowledged (`tcpi_unacked`): a response handed to the
    /// kernel is not delivered yet, and closing its socket then leaves the kernel an orphan that
    /// it retries fewer times and drops silently (at 002's slowest corner the client then waited
    /// for a response that never came, for the load's 300 s). Moving when the client
    /// acknowledged bytes since the last look, or (unless `strict`) while the kernel retransmits
    /// after a timeout: the network, not the client, holds the response back. A client that
    /// stops reading closes its window; the kernel probes it, which is not a retransmission.
    fn drain(&self, strict: bool) -> Drain {
        let blocked = self.write_blocked.load(Ordering::Relaxed);
        let Some(info) = self.socket.as_ref().and_then(|s| crate::sockopt::tcp_info(s.as_fd()).ok()) else {
            return if blocked { Drain::Stalled } else { Drain::Delivered };
        };
        let acked = info.bytes_acked > self.acked.swap(info.bytes_acked, Ordering::Relaxed);
        if !blocked && info.unacked == 0 {
            Drain::Delivered
        } else if acked || (!strict && info.retransmits > 0) {
            Drain::Moving
        } else {
            Drain::Stalled
        }
    }

    /// Completes once nothing moved for `idle`, or, while a response is pending (see
    /// [`Activity::drain`]), once the client acknowledged nothing for `send` (nginx's
    /// `send_timeout`; the longer of the two applies), the kernel's retransmissions counting as
    /// progress unless `strict`.
    pub(super) async fn idle(&self, idle: Duration, send: Duration, strict: bool) {
        loop {
            let last = self.epoch + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let now = Instant::now();
            if now < last + idle {
                tokio::time::sleep_until((last + idle).into()).await;
                continue;
            }
            match self.drain(strict) {
                Drain::Moving => {
                    self.touch();
                    continue;
                }
                Drain::Stalled if now < last + send => {
                    // A pending response without acknowledgements yet: look again at `send`.
                    tokio::time::sleep_until((last + send).into()).await;
                    if self.drain(strict) == Drain::Moving {
                        self.touch();
                        continue;
                    }
                }
                _ => {}
            }
            return;
        }
    }
}

/// Where a connection's response bytes are, for the idle timeout (see [`Activity::drain`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drain {
    /// Nothing waits to be written or acknowledged.
    Delivered,
    /// Bytes are pending and move (acknowledged, or retransmitted by the kernel).
    Moving,
    /// Bytes are pending and nothing moves.
    Stalled,
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
            self.activity.read();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ActivityIo<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        self.activity.wrote(written(&r));
        r
    }
    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.activity.wrote(written(&r));
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

/// What a write did, for [`Activity::wrote`]: bytes written, or `None` when it blocked. An
/// error is neither (the connection ends anyway).
fn written(r: &Poll<io::Result<usize>>) -> Option<usize> {
    match r {
        Poll::Pending => None,
        Poll::Ready(Ok(n)) => Some(*n),
        Poll::Ready(Err(_)) => Some(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last(a: &Activity) -> u64 {
        a.last_ms.load(Ordering::Relaxed)
    }

    /// Between requests only a write that drains a blocked one is progress; reads and
    /// unblocked writes (control frames) are not.
    #[test]
    fn between_requests_only_draining_writes_are_progress() {
        let epoch = Instant::now() - Duration::from_secs(100);
        let a = Activity::new(epoch, None);
        a.last_ms.store(0, Ordering::Relaxed);
        a.read();
        a.wrote(Some(100));
        assert_eq!(last(&a), 0, "idle bytes counted as progress");
        a.wrote(None);
        assert_eq!(last(&a), 0, "a blocked write is not progress");
        a.wrote(Some(100));
        assert!(last(&a) >= 100_000, "a write draining a blocked one is progress");
        a.last_ms.store(0, Ordering::Relaxed);
        a.wrote(Some(100));
        assert_eq!(last(&a), 0, "the drain ended with the first write after the block");
        let guard = a.begin();
        a.last_ms.store(0, Ordering::Relaxed);
        a.read();
        assert!(last(&a) >= 100_000, "a read in flight is progress");
        drop(guard);
    }

    /// Without a blocked write the idle timeout ends the connection; with one, only the send
    /// timeout, since nothing was acknowledged.
    #[tokio::test]
    async fn a_blocked_response_waits_for_the_send_timeout() {
        let (idle, send) = (Duration::from_millis(50), Duration::from_secs(2));
        let a = Activity::new(Instant::now(), None);
        let t = Instant::now();
        a.idle(idle, send, true).await;
        assert!(t.elapsed() >= idle && t.elapsed() < send, "not blocked: {:?}", t.elapsed());
        a.wrote(None);
        let t = Instant::now();
        a.idle(idle, send, true).await;
        assert!(t.elapsed() >= send - idle, "blocked: {:?}", t.elapsed());
    }

    /// While a write is blocked, bytes the peer acknowledged since the last look are progress;
    /// a peer that reads nothing acknowledges nothing.
    #[test]
    fn a_blocked_write_drains_while_the_peer_acknowledges() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut reader = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut writer, _) = listener.accept().unwrap();
        let a = Activity::new(Instant::now(), Some(writer.as_fd().try_clone_to_owned().unwrap()));
        assert_eq!(a.drain(false), Drain::Delivered, "nothing written: nothing to drain");
        a.wrote(None);
        writer.set_nonblocking(true).unwrap();
        let chunk = vec![7u8; 64 * 1024];
        while writer.write(&chunk).is_ok() {}
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(a.drain(false), Drain::Moving, "the peer's kernel acknowledged what it buffered");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(a.drain(false), Drain::Stalled, "a peer that reads nothing acknowledges nothing new (its window is closed: probes, not retransmissions)");
        // Reading opens the window: the writer's kernel sends what it still holds, and the
        // peer acknowledges it.
        let mut sink = vec![0u8; 256 * 1024];
        let mut read = 0;
        while read < 256 * 1024 {
            read += reader.read(&mut sink[read..]).unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(a.drain(true), Drain::Moving, "a reading peer acknowledged more");
    }
}
