//! The route table of `mwp serve` and the router built from it (the handlers are in
//! [`super::routes`]).

use std::convert::Infallible;
use std::sync::Arc;

use axum::error_handling::HandleErrorLayer;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, Method, Request, Uri};
use axum::response::Response;
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::Router;
use hyper::body::Incoming;
use tower::timeout::TimeoutLayer;
use tower::{Service, ServiceBuilder};
use tower_http::compression::CompressionLayer;
use tower_http::trace::{DefaultMakeSpan, DefaultOnResponse, TraceLayer};
use tracing::Level;

use super::auth::Authorise;
use super::expect::ExpectCheck;
use super::gate::Gate;
use super::origin::{HostCheck, Hosts};
use super::query::StrictQuery;
use super::{health, openapi, routes, App};

/// A route of `mwp serve`: the one table the router is built from and docs/openapi.json is
/// checked against (`tests/e2e_openapi.rs`). The dashboard's static files are served by the
/// fallback, outside this table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `GET /v1/authority`.
    Authority,
    /// `GET /v1/groups`.
    Groups,
    /// `POST /v1/groups/{group}/commands`.
    Commands,
    /// `GET /v1/groups/{group}/events`.
    Events,
    /// `GET /v1/groups/{group}/events/stream`.
    Stream,
    /// `GET /v1/groups/{group}/head`.
    Head,
    /// `GET /v1/groups/{group}/receipts/{actor}/{action}`.
    Receipt,
    /// `GET /v1/groups/{group}/snapshots/latest`.
    Snapshot,
    /// `GET /v1/groups/{group}/audit`.
    Audit,
    /// `GET /v1/openapi.json`.
    OpenApi,
    /// `GET /healthz`.
    Healthz,
    /// `GET /readyz`.
    Readyz,
    /// `GET /metrics`.
    Metrics,
}

impl Route {
    /// Every route the router serves.
    pub const ALL: [Route; 13] = [
        Route::Authority,
        Route::Groups,
        Route::Commands,
        Route::Events,
        Route::Stream,
        Route::Head,
        Route::Receipt,
        Route::Snapshot,
        Route::Audit,
        Route::OpenApi,
        Route::Healthz,
        Route::Readyz,
        Route::Metrics,
    ];

    /// Its method and path (`{name}` marks a path parameter).
    pub fn method_and_path(self) -> (Method, &'static str) {
        match self {
            Route::Authority => (Method::GET, "/v1/authority"),
            Route::Groups => (Method::GET, "/v1/groups"),
            Route::Commands => (Method::POST, "/v1/groups/{group}/commands"),
            Route::Events => (Method::GET, "/v1/groups/{group}/events"),
            Route::Stream => (Method::GET, "/v1/groups/{group}/events/stream"),
            Route::Head => (Method::GET, "/v1/groups/{group}/head"),
            Route::Receipt => (Method::GET, "/v1/groups/{group}/receipts/{actor}/{action}"),
            Route::Snapshot => (Method::GET, "/v1/groups/{group}/snapshots/latest"),
            Route::Audit => (Method::GET, "/v1/groups/{group}/audit"),
            Route::OpenApi => (Method::GET, "/v1/openapi.json"),
            Route::Healthz => (Method::GET, "/healthz"),
            Route::Readyz => (Method::GET, "/readyz"),
            Route::Metrics => (Method::GET, "/metrics"),
        }
    }

    /// Its handler, for its method only (another method is answered 405 in the error
    /// shape). Every route but a live tail is bounded by the request timeout.
    fn handler(self, app: &App) -> MethodRouter<App> {
        let (method, path) = self.method_and_path();
        let Ok(m) = MethodFilter::try_from(method.clone()) else {
            unreachable!("{path}: every method of the table is GET or POST")
        };
        // What `Allow` names to another method: a GET route also answers HEAD (axum runs its
        // handler and leaves the body out).
        let allow = if method == Method::POST {
            "POST"
        } else {
            "GET, HEAD"
        };
        let wrong = move |method: Method, uri: Uri, headers: HeaderMap| async move {
            routes::wrong_method(&method, &uri, &headers, allow)
        };
        let handler = match self {
            Route::Authority => on(m, routes::authority),
            Route::Groups => on(m, routes::groups),
            Route::Commands => on(m, routes::post_command),
            Route::Events => on(m, routes::events),
            Route::Stream => return on(m, routes::stream_events).fallback(wrong),
            Route::Head => on(m, routes::head),
            Route::Receipt => on(m, routes::receipt),
            Route::Snapshot => on(m, routes::snapshot),
            Route::Audit => on(m, routes::audit),
            Route::OpenApi => on(m, openapi::document),
            Route::Healthz => on(m, health::healthz),
            Route::Readyz => on(m, health::readyz),
            Route::Metrics => on(m, routes::metrics),
        }
        .fallback(wrong);
        // tower's timeout, its `Elapsed` answered as docs/http.md says (503 `STORAGE`, in the
        // format the client accepts); tower-http's `TimeoutLayer` answers an empty body.
        let limit = app.config.request_timeout;
        handler.layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(
                    move |format: routes::Answered, _: tower::BoxError| async move {
                        routes::timed_out(format, limit)
                    },
                ))
                .layer(TimeoutLayer::new(limit)),
        )
    }
}

/// The router of every route of the table, with the dashboard's files as the fallback.
fn router(app: App) -> Router {
    let mut router = Router::new();
    for route in Route::ALL {
        router = router.route(route.method_and_path().1, route.handler(&app));
    }
    router.fallback(routes::fallback).with_state(app)
}

/// What every connection serves: the router behind the layers every request passes, outermost
/// first: the `Host` check, the `Expect` check, gzip when the client asks for it
/// (tower-http's default predicate leaves server-sent events, gRPC, images and bodies under
/// 32 bytes alone), tracing, CORS when `--cors-origin` names origins, access, the body limit
/// and the strict query check.
///
/// The layers wrap the router as one service instead of being added to it
/// (`Router::layer`), which would box and clone each of them for every request; the checks are
/// [`Gate`]s rather than `middleware::from_fn` for the same reason (BENCHMARKS.md, "The
/// checks before a route").
pub(crate) fn service(
    app: App,
    hosts: Arc<Hosts>,
    cors: Option<super::origin::Cors>,
) -> impl Service<Request<Incoming>, Response = Response, Error = Infallible, Future: Send + 'static>
       + Clone
       + Send
       + 'static {
    let max_body_bytes = app.config.max_body_bytes;
    ServiceBuilder::new()
        .layer(Gate(HostCheck(hosts)))
        .layer(Gate(ExpectCheck))
        .layer(CompressionLayer::new())
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(DefaultMakeSpan::new().level(Level::DEBUG))
                .on_request(())
                .on_response(DefaultOnResponse::new().level(Level::DEBUG)),
        )
        .option_layer(cors)
        .layer(Gate(Authorise(app.clone())))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(Gate(StrictQuery))
        .service(router(app))
}
