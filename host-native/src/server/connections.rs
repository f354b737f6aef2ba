//! The accept loop: at most `max_connections` open connections; a connection that does not
//! finish its request headers within `header_read_timeout` is closed, and so is one whose
//! client reads nothing of an answer for `send_timeout`.
//!
//! `axum::serve` sets none of these, so this loop does what it does (one hyper HTTP/1
//! connection per accepted socket, graceful shutdown) with the three limits. A connection
//! holds a permit of a semaphore from accept to close; when none is left the loop stops
//! accepting and new connections wait in the kernel's backlog until one closes. The header-read timeout is
//! hyper's: it runs from the moment a connection waits for a request head (so it also closes
//! a keep-alive connection idle for that long). hyper has no timeout for writing: a client
//! that sends requests and never reads the answers would hold its connection (and the
//! answers the kernel buffers for it) for as long as its TCP stack acknowledges the zero
//! window probes, which is forever; [`SendDeadline`] closes it instead.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::Request;
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::time::Sleep;
use tower::Service;

/// Pause after a failed accept (out of file descriptors, …), so the loop does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Serves `service` on `listener` until `closing` turns true, then lets open connections
/// finish their requests in flight.
pub(crate) async fn serve<S>(
    listener: TcpListener,
    service: S,
    max_connections: usize,
    header_read_timeout: Duration,
    send_timeout: Duration,
    open: Arc<AtomicUsize>,
    mut closing: watch::Receiver<bool>,
) -> std::io::Result<()>
where
    S: Service<Request<Incoming>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let permits = Arc::new(Semaphore::new(max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    loop {
        let permit = tokio::select! {
            p = Arc::clone(&permits).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = closing.wait_for(|c| *c) => break,
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = closing.wait_for(|c| *c) => break,
        };
        let (stream, _peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let conn = http.serve_connection(
            TokioIo::new(SendDeadline::new(stream, send_timeout)),
            TowerToHyperService::new(service.clone()),
        );
        let conn = graceful.watch(conn);
        open.fetch_add(1, Ordering::SeqCst);
        let open = Arc::clone(&open);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            open.fetch_sub(1, Ordering::SeqCst);
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// A connection's socket whose writes fail (`TimedOut`) once one has waited `limit` without
/// the kernel taking a byte: hyper then closes the connection. A write the kernel takes,
/// however small, starts the wait again. The kernel takes bytes again only once the client
/// has read a part of what is queued between the two ends (some hundreds of KB on
/// loopback), so a client that reads nothing is cut after `limit`, and so may be one that
/// reads only a few KB a second with megabytes queued for it (docs/decisions.md); its
/// request in flight, or its live tail, ends with it.
struct SendDeadline<T> {
    io: T,
    limit: Duration,
    /// Armed when a write or flush first waits, disarmed when one makes progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> SendDeadline<T> {
    fn new(io: T, limit: Duration) -> SendDeadline<T> {
        SendDeadline {
            io,
            limit,
            stalled: None,
        }
    }

    /// What a write that returned `poll` answers: the same, unless it has waited `limit`.
    fn watch<R>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let limit = self.limit;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client read nothing of the answer for {}; the connection is closed",
                    super::duration_text(limit)
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for SendDeadline<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for SendDeadline<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write(cx, buf);
        self.watch(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_flush(cx);
        self.watch(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_shutdown(cx);
        self.watch(cx, poll)
    }
}
