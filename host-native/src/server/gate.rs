//! The checks every request passes before its route (the `Host` check, access, the strict
//! query), as tower layers written out: a check decides on the request's parts and either
//! passes it on, answers it, or (when it must read the store) decides on the blocking pool
//! first.
//!
//! axum's `middleware::from_fn` costs each request a boxed service, a boxed future and a few
//! reference-count changes on shared state per layer; over three layers that was about a
//! seventh of what `mwp serve` spends per accepted command besides checking its signature
//! (BENCHMARKS.md, "The checks before a route").
//! Here a request that passes costs a call and a match, and only a read that needs the store to
//! be authorised boxes its future.

use std::convert::Infallible;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Request, Uri};
use axum::response::Response;
use futures_util::future::{self, BoxFuture, Either, MapOk, Ready};
use futures_util::TryFutureExt;
use hyper::body::Body as HttpBody;
use tower::{BoxError, Layer, Service};

/// What a [`Check`] decides about a request.
pub(crate) enum Verdict {
    /// Pass it on.
    Pass,
    /// Answer it with this; what it guards does not run.
    Answer(Response),
    /// Decided by this future (the check reads the store): `Ok` passes it on, `Err` is the
    /// answer.
    Later(BoxFuture<'static, Result<(), Response>>),
}

/// A check run on every request before the service it guards.
pub(crate) trait Check: Clone + Send + Sync + 'static {
    /// Decides on a request by its method, URI and headers (its body is not read).
    fn check(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Verdict;
}

/// The layer that puts check `C` in front of a service.
#[derive(Clone)]
pub(crate) struct Gate<C>(pub(crate) C);

impl<C: Check, S> Layer<S> for Gate<C> {
    type Service = Gated<C, S>;

    fn layer(&self, inner: S) -> Gated<C, S> {
        Gated {
            check: self.0.clone(),
            inner,
        }
    }
}

/// A service behind its check. Its answers carry an axum [`Body`], whatever body the service
/// answers with.
#[derive(Clone)]
pub(crate) struct Gated<C, S> {
    check: C,
    inner: S,
}

/// An answer of the service, its body made an axum [`Body`].
type Passed<F, B> = MapOk<F, fn(Response<B>) -> Response>;

/// The future of a [`Gated`] service: the check's answer, the service's own future, or a check
/// that reads the store and then the service.
type GatedFuture<F, B> = Either<
    Either<Ready<Result<Response, Infallible>>, Passed<F, B>>,
    BoxFuture<'static, Result<Response, Infallible>>,
>;

fn boxed_body<B>(answer: Response<B>) -> Response
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    answer.map(Body::new)
}

impl<C, S, ReqBody, ResBody> Service<Request<ReqBody>> for Gated<C, S>
where
    C: Check,
    S: Service<Request<ReqBody>, Response = Response<ResBody>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: HttpBody<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = GatedFuture<S::Future, ResBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let body: fn(Response<ResBody>) -> Response = boxed_body;
        match self.check.check(req.method(), req.uri(), req.headers()) {
            Verdict::Pass => Either::Left(Either::Right(self.inner.call(req).map_ok(body))),
            Verdict::Answer(answer) => Either::Left(Either::Left(future::ready(Ok(answer)))),
            Verdict::Later(decided) => {
                // The service made ready goes with the request; its clone serves the next.
                let clone = self.inner.clone();
                let mut inner = std::mem::replace(&mut self.inner, clone);
                Either::Right(Box::pin(async move {
                    match decided.await {
                        Ok(()) => inner.call(req).await.map(body),
                        Err(answer) => Ok(answer),
                    }
                }))
            }
        }
    }
}
