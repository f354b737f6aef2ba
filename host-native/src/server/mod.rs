//! `mwp serve`: the authority over HTTP (SPEC §11), with the dashboard's static files.
//!
//! The server is a thin shell around an [`AuthorityService`]: it decodes requests, calls the
//! service on the blocking pool (a file store syncs before it answers, and concurrent
//! requests share those syncs), and encodes the answers. It also runs the tick loop that
//! expires leases when their time has come, signed by the authority key.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use std::sync::Arc;
//! let service = Arc::new(mwp_host::memory_service::MemoryService::generate().expect("key"));
//! let server = mwp_host::server::Server::bind(service, "127.0.0.1:0".parse().unwrap(), Default::default()).await?;
//! println!("listening on http://{}", server.addr());
//! server.shutdown().await;
//! # Ok(()) }
//! ```

pub mod assets;
pub mod auth;
pub mod client;
pub mod key;
mod routes;
mod tick;
pub mod wire;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::service::AuthorityService;

/// How the server behaves; `Default` is what `mwp serve` uses.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest request body accepted, in bytes (a JSON command may be up to four times the
    /// 64 KiB command limit).
    pub max_body_bytes: usize,
    /// Time allowed for one request (live tails excepted).
    pub request_timeout: Duration,
    /// Most events one `GET …/events` answers.
    pub max_page: usize,
    /// Longest the tick loop sleeps before it looks for due leases again.
    pub tick_poll: Duration,
    /// Where the dashboard's files come from.
    pub assets: assets::Assets,
    /// Who may read and who may create groups.
    pub access: auth::Access,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_body_bytes: 4 * 64 * 1024 + 4096,
            request_timeout: Duration::from_secs(30),
            max_page: 1000,
            tick_poll: Duration::from_millis(500),
            assets: assets::Assets::default(),
            access: auth::Access::default(),
        }
    }
}

/// What every request handler shares.
#[derive(Clone)]
pub(crate) struct App {
    pub(crate) service: Arc<dyn AuthorityService>,
    pub(crate) config: Arc<ServerConfig>,
    /// Bumped after every accepted command: live tails wait on it.
    pub(crate) commits: watch::Sender<u64>,
    /// Wakes the tick loop when a command may have moved the next deadline.
    pub(crate) tick: Arc<Notify>,
    /// Turns true when the server shuts down: live tails end, the tick loop stops.
    pub(crate) closing: watch::Receiver<bool>,
}

/// Milliseconds since the Unix epoch: the authority's clock.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A running server.
pub struct Server {
    addr: SocketAddr,
    close: watch::Sender<bool>,
    http: JoinHandle<std::io::Result<()>>,
    ticker: JoinHandle<()>,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port) and starts serving `service`.
    pub async fn bind(
        service: Arc<dyn AuthorityService>,
        addr: SocketAddr,
        config: ServerConfig,
    ) -> std::io::Result<Server> {
        let listener = TcpListener::bind(addr).await?;
        Server::start(service, listener, config)
    }

    /// Starts serving `service` on a bound listener.
    pub fn start(
        service: Arc<dyn AuthorityService>,
        listener: TcpListener,
        config: ServerConfig,
    ) -> std::io::Result<Server> {
        let addr = listener.local_addr()?;
        let (close, closing) = watch::channel(false);
        let app_access = config.access.describe();
        let app = App {
            service,
            config: Arc::new(config),
            commits: watch::Sender::new(0),
            tick: Arc::new(Notify::new()),
            closing: closing.clone(),
        };
        let ticker = tokio::spawn(tick::run(app.clone()));
        let router = routes::router(app);
        let mut until = closing;
        let http = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    // Ends when the flag turns true or its sender is gone.
                    let _ = until.wait_for(|closed| *closed).await;
                })
                .await
        });
        tracing::info!(%addr, access = %app_access, "serving");
        Ok(Server {
            addr,
            close,
            http,
            ticker,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections, lets requests in flight finish (commands being decided
    /// are decided and answered), ends live tails and the tick loop, and waits for all that.
    pub async fn shutdown(self) {
        let _ = self.close.send(true);
        match self.http.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the HTTP server stopped with an error"),
            Err(e) => tracing::warn!(error = %e, "the HTTP server task failed"),
        }
        if let Err(e) = self.ticker.await {
            tracing::warn!(error = %e, "the tick loop failed");
        }
        tracing::info!("stopped");
    }

    /// Serves until Ctrl-C (or SIGTERM), then shuts down gracefully.
    pub async fn run_until_signal(self) {
        shutdown_signal().await;
        tracing::info!("shutting down: finishing requests in flight");
        self.shutdown().await;
    }
}

/// Resolves on Ctrl-C or, on Unix, SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
