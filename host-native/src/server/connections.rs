//! The accept loop: at most `max_connections` open connections, and a connection that does
//! not finish its request headers within `header_read_timeout` is closed.
//!
//! `axum::serve` sets neither, so this loop does what it does (one hyper HTTP/1 connection
//! per accepted socket, graceful shutdown) with the two limits. A connection holds a permit
//! of a semaphore from accept to close; when none is left the loop stops accepting and new
//! connections wait in the kernel's backlog until one closes. The header-read timeout is
//! hyper's: it runs from the moment a connection waits for a request head (so it also closes
//! a keep-alive connection idle for that long).

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::Request;
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
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
            TokioIo::new(stream),
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
