//! The HTTP layer of a client connection: the HTTP/1.1 and HTTP/2 handshakes over an
//! established byte stream (hyper, with Chrome's HTTP/2 settings), the request sender of each
//! HTTP version, and the end of an HTTP/3 request's sending side.

use bytes::Bytes;
use http_body_util::Empty;
use hyper::body::Body;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;

use crate::load::mode::Protocol;

/// HTTP/2 initial stream window (`SETTINGS_INITIAL_WINDOW_SIZE`), as Chrome: 6 MiB.
pub const H2_STREAM_WINDOW: u32 = 6 * 1024 * 1024;
/// HTTP/2 connection window (raised by a `WINDOW_UPDATE` on stream 0), as Chrome: 15 MiB.
pub const H2_CONNECTION_WINDOW: u32 = 15 * 1024 * 1024;
/// HTTP/2 `SETTINGS_HEADER_TABLE_SIZE`, as Chrome.
const H2_HEADER_TABLE: u32 = 64 * 1024;
/// HTTP/2 `SETTINGS_MAX_HEADER_LIST_SIZE`, as Chrome.
const H2_MAX_HEADER_LIST: u32 = 256 * 1024;

/// An HTTP/3 request stream of a client.
pub(crate) type H3RequestStream = h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// A request sender of an established connection; `B` is the request body type (bulk and rpm
/// uploads stream one; the page-load engine sends none).
pub(crate) enum Sender<B = Empty<Bytes>> {
    H1(http1::SendRequest<B>),
    H2(http2::SendRequest<B>),
    H3(h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>),
}

impl<B> Sender<B> {
    /// A sender for another concurrent request (HTTP/2 and HTTP/3); HTTP/1.1 has none.
    pub fn clone_multiplexed(&self) -> Option<Sender<B>> {
        match self {
            Sender::H1(_) => None,
            Sender::H2(s) => Some(Sender::H2(s.clone())),
            Sender::H3(s) => Some(Sender::H3(s.clone())),
        }
    }

    /// Whether the connection is known to be gone.
    pub fn is_closed(&self) -> bool {
        match self {
            Sender::H1(s) => s.is_closed(),
            Sender::H2(s) => s.is_closed(),
            Sender::H3(_) => false,
        }
    }
}

/// The HTTP/2 (`protocol` H2) or HTTP/1.1 client handshake over `io`, with Chrome's HTTP/2
/// windows; the connection is driven by a spawned task (the returned handle).
pub(crate) async fn http_handshake<T, B>(protocol: Protocol, io: T) -> Result<(Sender<B>, JoinHandle<()>), String>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    B: Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let io = TokioIo::new(io);
    if protocol == Protocol::H2 {
        let (sender, conn) = http2::Builder::new(TokioExecutor::new())
            .initial_stream_window_size(H2_STREAM_WINDOW)
            .initial_connection_window_size(H2_CONNECTION_WINDOW)
            .adaptive_window(false)
            .header_table_size(H2_HEADER_TABLE)
            .max_header_list_size(H2_MAX_HEADER_LIST)
            .handshake(io)
            .await
            .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
        let driver = tokio::spawn(async move {
            // Errors reach the requests in flight; nothing else to do with them here.
            let _ = conn.await;
        });
        Ok((Sender::H2(sender), driver))
    } else {
        let (sender, conn) = http1::Builder::new().handshake(io).await.map_err(|e| format!("HTTP/1.1 handshake: {e}"))?;
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok((Sender::H1(sender), driver))
    }
}

/// Ends the request side of an HTTP/3 request stream. A server that answers without reading
/// the rest of the request may stop the stream before the client's FIN (RFC 9114 §4.1: the
/// response still counts). protolab's server does so for every GET: it drops the empty body at
/// once, and quinn then sends STOP_SENDING with code 0. So a stop by the peer is no error here;
/// the response (and, for uploads, the server's byte count) decides.
pub(crate) async fn finish_h3_request(stream: &mut H3RequestStream) -> Result<(), String> {
    match stream.finish().await {
        Ok(()) | Err(h3::error::StreamError::RemoteTerminate { .. }) => Ok(()),
        Err(e) => Err(format!("request: {e}")),
    }
}
