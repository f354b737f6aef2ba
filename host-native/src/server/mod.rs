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
mod connections;
mod expect;
mod gate;
mod heads;
mod health;
pub mod key;
mod metrics;
pub mod openapi;
mod origin;
mod query;
mod route;
mod routes;
mod tails;
mod tick;
pub mod wire;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::service::AuthorityService;
pub use route::Route;

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
    /// Time a connection has to send a request's headers (also: the longest a keep-alive
    /// connection may sit idle); then it is closed.
    pub header_read_timeout: Duration,
    /// Time a request has to send its whole body, from the end of its head; then it is
    /// answered 400 `MALFORMED` and its connection closed. At most `request_timeout`, which
    /// bounds the whole request.
    pub body_read_timeout: Duration,
    /// Longest a write of a connection's answer may wait for the kernel to take any of it
    /// (which it does once the client has read a part of what is queued); then the
    /// connection is closed (a client that sends requests and never reads the answers holds
    /// no connection longer than this).
    pub send_timeout: Duration,
    /// Most connections open at once; further ones wait in the kernel's backlog.
    pub max_connections: usize,
    /// Most live tails (`GET …/events/stream`) on the server at once.
    pub max_tails: usize,
    /// Most live tails on one group at once.
    pub max_tails_per_group: usize,
    /// Most groups the server holds; `open_group` of a new group beyond it is refused.
    /// `None`: no limit.
    pub max_groups: Option<u64>,
    /// Origins allowed to read answers from a browser (CORS); empty: CORS off.
    pub cors_origins: Vec<String>,
    /// Names besides the bound address that the `Host` header may carry (`--public-host`).
    pub public_hosts: Vec<String>,
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
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            send_timeout: Duration::from_secs(30),
            max_connections: 1024,
            max_tails: 512,
            max_tails_per_group: 64,
            max_groups: None,
            cors_origins: Vec::new(),
            public_hosts: Vec::new(),
            access: auth::Access::default(),
        }
    }
}

/// What every request handler shares: one allocation, so that the router's layers and
/// extractors clone one reference per request instead of each field's.
pub(crate) type App = Arc<Shared>;

/// The parts of [`App`].
pub(crate) struct Shared {
    pub(crate) service: Arc<dyn AuthorityService>,
    pub(crate) config: Arc<ServerConfig>,
    /// The live tails, each woken by its own group's commits.
    pub(crate) tails: Arc<tails::Tails>,
    /// Held while a new group is opened, so `max_groups` holds under concurrent opens.
    pub(crate) opening: Arc<tokio::sync::Mutex<()>>,
    /// Wakes the tick loop when a command may have moved the next deadline.
    pub(crate) tick: Arc<Notify>,
    /// Turns true when the server shuts down: live tails end, the tick loop stops.
    pub(crate) closing: watch::Receiver<bool>,
    /// The numbers of `GET /metrics`.
    pub(crate) metrics: Arc<metrics::Metrics>,
    /// The last signed head of each group, and when to sign a fresh one (SPEC §8a).
    pub(crate) heads: Arc<heads::Heads>,
    /// Whether the latest write to the store succeeded (`GET /readyz`).
    pub(crate) ready: Arc<health::Readiness>,
}

/// Checks that `origin` is a browser origin as `--cors-origin` takes it: `http://` or
/// `https://`, a host, an optional port, and nothing else (no path, no trailing slash).
pub fn check_origin(origin: &str) -> Result<(), String> {
    origin::check_origin(origin)
}

/// Checks a name as `--public-host` takes it: a host name or a bracketed IPv6 address, then
/// optionally `:PORT` written without leading zeros.
pub fn check_public_host(name: &str) -> Result<(), String> {
    origin::check_public_host(name)
}

/// A duration as a message says it: whole seconds as `10 s`, anything else in ms.
pub(crate) fn duration_text(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
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
    connections: Arc<AtomicUsize>,
    tails: Arc<tails::Tails>,
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
        let cors = origin::cors(&config.cors_origins)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let hosts = Arc::new(origin::Hosts::new(addr, &config.public_hosts));
        let (close, closing) = watch::channel(false);
        let tails = tails::Tails::new(config.max_tails, config.max_tails_per_group);
        let (max_connections, header_read_timeout, send_timeout) = (
            config.max_connections,
            config.header_read_timeout,
            config.send_timeout,
        );
        let app_access = config.access.describe();
        let metrics = Arc::new(metrics::Metrics::new());
        let app = Arc::new(Shared {
            service,
            config: Arc::new(config),
            tails: Arc::clone(&tails),
            opening: Arc::default(),
            tick: Arc::new(Notify::new()),
            closing: closing.clone(),
            heads: Arc::new(heads::Heads::new(metrics.heads_signed())),
            metrics,
            ready: Arc::default(),
        });
        let ticker = tokio::spawn(tick::run(app.clone()));
        let service = route::service(app, hosts, cors);
        let connections = Arc::new(AtomicUsize::new(0));
        let http = tokio::spawn(connections::serve(
            listener,
            service,
            max_connections,
            header_read_timeout,
            send_timeout,
            Arc::clone(&connections),
            closing,
        ));
        tracing::info!(%addr, access = %app_access, "serving");
        Ok(Server {
            addr,
            close,
            http,
            ticker,
            connections,
            tails,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections open right now.
    pub fn open_connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Live tails right now.
    pub fn live_tails(&self) -> usize {
        self.tails.live()
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

    /// Serves until Ctrl-C (or SIGTERM), then shuts down gracefully. The signals are listened
    /// for from this call on; a caller that announces the server first (prints its address)
    /// installs them before that with [`ShutdownSignal::install`] and calls
    /// [`Server::run_until`].
    pub async fn run_until_signal(self) {
        match ShutdownSignal::install() {
            Ok(signal) => self.run_until(signal).await,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for Ctrl-C or SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    }

    /// Serves until `signal` arrives, then shuts down gracefully.
    pub async fn run_until(self, signal: ShutdownSignal) {
        signal.recv().await;
        tracing::info!("shutting down: finishing requests in flight");
        self.shutdown().await;
    }
}

/// Ctrl-C (SIGINT) and, on Unix, SIGTERM, listened for from the moment it is installed: a
/// signal that arrives earlier has its default effect (the process ends), so a server
/// installs this before it says it is ready.
pub struct ShutdownSignal {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl ShutdownSignal {
    /// Starts listening; must be called inside a Tokio runtime.
    pub fn install() -> std::io::Result<ShutdownSignal> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(ShutdownSignal {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(ShutdownSignal {})
        }
    }

    /// Resolves when one of the signals arrives.
    pub async fn recv(self) {
        #[cfg(unix)]
        {
            let ShutdownSignal {
                mut interrupt,
                mut terminate,
            } = self;
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        }
        #[cfg(not(unix))]
        {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Resolves on Ctrl-C or, on Unix, SIGTERM (listening from the first poll).
pub async fn shutdown_signal() {
    match ShutdownSignal::install() {
        Ok(signal) => signal.recv().await,
        Err(_) => std::future::pending::<()>().await,
    }
}
