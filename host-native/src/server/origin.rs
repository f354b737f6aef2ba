//! Browser safety: the `Host` check that blocks DNS rebinding, and the CORS policy.
//!
//! A page on `http://evil.example` whose name is re-pointed at 127.0.0.1 reaches a loopback
//! server with `Host: evil.example`: answering only the names the server is known by (its
//! bound address, `localhost` on loopback, and each `--public-host`) stops it. Any other
//! `Host`, or none, is answered 421 Misdirected Request with a `MALFORMED` error, before any
//! route runs. CORS is off unless `--cors-origin` names origins: then tower-http's
//! [`CorsLayer`] answers preflights and adds the headers for requests from those origins,
//! and only those reach it ([`Cors`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use std::task::{Context, Poll};

use axum::http::{header, HeaderMap, HeaderValue, Method, Request, StatusCode, Uri};
use axum::response::Response;
use futures_util::future::{Either, MapOk};
use futures_util::TryFutureExt;
use mwp_core::Error;
use tower::{Layer, Service};
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

use super::gate::{Check, Verdict};
use super::wire::{self, Format};

/// The names a request's `Host` may carry.
#[derive(Debug, Clone)]
pub(crate) struct Hosts {
    port: u16,
    /// Exact `host:port` authorities, lowercase (`127.0.0.1:7878`, `localhost:7878`, …).
    exact: Vec<String>,
    /// `--public-host` names without a port: they match with any port or none.
    names: Vec<String>,
    /// Bound to 0.0.0.0 or [::]: any IP literal with the port is the server itself.
    any_ip: bool,
    /// `exact`, each split into its name and its port, so that a request is matched without
    /// allocating. An entry whose port is not a `u16` written in its shortest decimal form
    /// is left out: no `Host` ever matched it.
    exact_split: Vec<(String, u16)>,
}

impl Hosts {
    /// The names of a server bound to `addr` and known publicly as `public`.
    pub(crate) fn new(addr: SocketAddr, public: &[String]) -> Hosts {
        let port = addr.port();
        let ip = addr.ip();
        let mut exact = vec![authority(ip, port)];
        if ip.is_loopback() || ip.is_unspecified() {
            exact.push(format!("localhost:{port}"));
        }
        let mut names = Vec::new();
        for p in public {
            let p = p.trim().to_ascii_lowercase();
            if has_port(&p) {
                exact.push(p);
            } else {
                names.push(p);
            }
        }
        let exact_split = exact
            .iter()
            .filter_map(|e| {
                let (name, port) = split(e);
                Some((name.to_owned(), shortest_port(port?)?))
            })
            .collect();
        Hosts {
            port,
            exact,
            names,
            any_ip: ip.is_unspecified(),
            exact_split,
        }
    }

    /// Whether `host` (a `Host` header value) names this server.
    /// Names compare without regard to ASCII case.
    pub(crate) fn allows(&self, host: &str) -> bool {
        let (name, port) = split(host.trim());
        // No port means the scheme's default; the server is plain HTTP.
        // A port written otherwise than in its shortest form (`+7878`, `07878`) is not the
        // server's: a proxy in front may read it differently.
        let port = match port {
            None => 80,
            Some(p) => match shortest_port(p) {
                Some(p) => p,
                None => return false,
            },
        };
        if self.names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            return true;
        }
        if self
            .exact_split
            .iter()
            .any(|(n, p)| *p == port && n.eq_ignore_ascii_case(name))
        {
            return true;
        }
        port == self.port
            && self.any_ip
            && name
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .is_ok()
    }

    /// The names it answers to, for error messages.
    fn listed(&self) -> String {
        let mut all = self.exact.clone();
        all.extend(self.names.iter().cloned());
        if self.any_ip {
            all.push(format!("any IP address with port {}", self.port));
        }
        all.join(", ")
    }
}

fn authority(ip: IpAddr, port: u16) -> String {
    match ip {
        IpAddr::V4(v4) => format!("{v4}:{port}"),
        IpAddr::V6(v6) => format!("[{v6}]:{port}"),
    }
}

fn has_port(host: &str) -> bool {
    split(host).1.is_some()
}

/// A configured port's value, if it is a `u16` written in its shortest decimal form (no sign,
/// no leading zeros): a `Host` header's port is compared by its value, so a name configured
/// with another spelling could never be matched.
fn shortest_port(port: &str) -> Option<u16> {
    let digits = !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    let shortest = port == "0" || !port.starts_with('0');
    (digits && shortest)
        .then(|| port.parse::<u16>().ok())
        .flatten()
}

/// `name` and the port, if any: `[::1]:80` → (`[::1]`, `80`), `a.b` → (`a.b`, none). A
/// bracketed name followed by anything but `:PORT` is all name (`[::1]x`), which no
/// configured name is.
fn split(host: &str) -> (&str, Option<&str>) {
    if host.starts_with('[') {
        return match host.find(']') {
            Some(end) => {
                let (name, rest) = host.split_at(end + 1);
                match rest.strip_prefix(':') {
                    Some(port) => (name, Some(port)),
                    None if rest.is_empty() => (name, None),
                    None => (host, None),
                }
            }
            None => (host, None),
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    }
}

/// The `Host` check, in front of everything else ([`Gate`](super::gate::Gate)): 400
/// `MALFORMED` for more than one `Host` header (RFC 9112, section 3.2), 421 with a
/// `MALFORMED` body for a name it does not know.
#[derive(Clone)]
pub(crate) struct HostCheck(pub(crate) Arc<Hosts>);

impl Check for HostCheck {
    fn check(&self, _: &Method, uri: &Uri, headers: &HeaderMap) -> Verdict {
        let hosts = headers.get_all(header::HOST).iter().count();
        if hosts > 1 {
            return Verdict::Answer(wire::error(
                Format::accepted(headers, Format::Json),
                &Error::malformed(format!(
                    "the request has {hosts} Host headers; send exactly one (RFC 9112, section 3.2)"
                ))
                .with("header", "host"),
            ));
        }
        // The request target's authority when it has one (absolute form), else `Host`: a
        // server receiving an absolute-form target ignores `Host` (RFC 9112, section 3.2.2).
        let given = match uri.authority() {
            Some(a) => Some(a.as_str()),
            None => headers
                .get(header::HOST)
                .map(|v| v.to_str().unwrap_or("\u{fffd}")),
        };
        match given {
            Some(host) if self.0.allows(host) => Verdict::Pass,
            given => {
                let format = Format::accepted(headers, Format::Json);
                let what = match &given {
                    Some(h) => format!("Host {h:?} is not a name of this server"),
                    None => "the request has no Host header".to_owned(),
                };
                Verdict::Answer(wire::error_with(
                    StatusCode::MISDIRECTED_REQUEST,
                    format,
                    &Error::malformed(format!(
                        "{what}; it answers to {} (add names with --public-host)",
                        self.0.listed()
                    ))
                    .with("header", "host"),
                ))
            }
        }
    }
}

/// Checks a name as `--public-host` takes it: a host name (letters, digits, `-` and `.`) or
/// a bracketed IPv6 address, then optionally `:PORT` with the port a number from 0 to 65535
/// written without leading zeros (a `Host` header's port is compared by its value, so a
/// name configured with `:08443` could never be matched).
pub(crate) fn check_public_host(name: &str) -> Result<(), String> {
    let refused = || {
        format!(
            "{name:?} is not a host name: give NAME or NAME:PORT (PORT from 0 to 65535, without leading zeros), e.g. ops.example:8443"
        )
    };
    let (host, port) = split(name.trim());
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => {
            !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        }
    };
    let port_ok = port.is_none_or(|p| shortest_port(p).is_some());
    if host_ok && port_ok {
        Ok(())
    } else {
        Err(refused())
    }
}

/// Checks one `--cors-origin` value: `scheme://host[:port]`, scheme `http` or `https`.
pub(crate) fn check_origin(origin: &str) -> Result<(), String> {
    let rest = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
        .ok_or_else(|| format!("{origin:?} must start with http:// or https://"))?;
    let ok = !rest.is_empty()
        && rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{origin:?} is not an origin: give scheme://host[:port] with no path, e.g. https://ops.example"
        ))
    }
}

/// The CORS layer for `origins`, or `None` when there are none (CORS off: browsers refuse
/// cross-origin reads of the answers).
pub(crate) fn cors(origins: &[String]) -> Result<Option<Cors>, String> {
    if origins.is_empty() {
        return Ok(None);
    }
    let values = origins
        .iter()
        .map(|o| {
            check_origin(o)?;
            HeaderValue::from_str(o).map_err(|_| format!("{o:?} is not a valid origin"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let allowed: Arc<[HeaderValue]> = values.into();
    let listed = Arc::clone(&allowed);
    Ok(Some(Cors {
        // A predicate over the shared list rather than `AllowOrigin::list`, whose list every
        // clone of the service (one per request) would copy.
        layer: CorsLayer::new()
            .allow_origin(AllowOrigin::predicate(move |origin, _| {
                listed.iter().any(|a| a == origin)
            }))
            .allow_methods([Method::GET, Method::POST])
            .allow_headers(AllowHeaders::mirror_request())
            .expose_headers([header::HeaderName::from_static("mwp-duplicate")])
            .max_age(std::time::Duration::from_secs(600)),
        allowed,
    }))
}

/// CORS for the allowed origins only: a request whose `Origin` is one of them passes
/// tower-http's [`CorsLayer`] (which answers its preflight and adds the headers); any other
/// request, with another origin or none, gets no `Access-Control-*` header at all (tower-http
/// leaves out only `Access-Control-Allow-Origin`, and answers any preflight 200), and its
/// preflight goes to the route like any `OPTIONS` (405). Every answer says `Vary: origin`,
/// so a cache does not hand one origin's answer to another.
#[derive(Clone)]
pub(crate) struct Cors {
    layer: CorsLayer,
    allowed: Arc<[HeaderValue]>,
}

impl<S: Clone> Layer<S> for Cors {
    type Service = CorsFor<S>;

    /// Builds tower-http's service once, with the router's stack at start; each request is
    /// then served by (a clone of) it, never by a layer built for that request.
    fn layer(&self, inner: S) -> CorsFor<S> {
        CorsFor {
            allowed: Arc::clone(&self.allowed),
            inner: self.layer.layer(inner),
        }
    }
}

/// A service behind [`Cors`]: tower-http's CORS service around it, passed by for a request
/// from an origin that is not allowed.
#[derive(Clone)]
pub(crate) struct CorsFor<S> {
    allowed: Arc<[HeaderValue]>,
    inner: tower_http::cors::Cors<S>,
}

/// What `Vary` says on an answer to a request CORS leaves alone: the headers tower-http's
/// layer varies by.
const CORS_VARY: HeaderValue = HeaderValue::from_static(
    "origin, access-control-request-method, access-control-request-headers",
);

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for CorsFor<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    ResBody: Default,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Either<
        tower_http::cors::ResponseFuture<S::Future>,
        MapOk<S::Future, fn(Response<ResBody>) -> Response<ResBody>>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let allowed = req
            .headers()
            .get(header::ORIGIN)
            .is_some_and(|o| self.allowed.iter().any(|a| a == o));
        if allowed {
            Either::Left(self.inner.call(req))
        } else {
            let vary: fn(Response<ResBody>) -> Response<ResBody> = |mut resp| {
                resp.headers_mut().append(header::VARY, CORS_VARY);
                resp
            };
            // tower-http's service is ready when the one it wraps is: that one serves.
            Either::Right(self.inner.get_mut().call(req).map_ok(vary))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names() {
        let h = Hosts::new("127.0.0.1:7878".parse().unwrap(), &[]);
        assert!(h.allows("127.0.0.1:7878"));
        assert!(h.allows("LOCALHOST:7878"));
        assert!(!h.allows("localhost:7879"));
        assert!(!h.allows("evil.example:7878"));
        assert!(!h.allows("127.0.0.1"));
        assert!(!h.allows("127.0.0.1:x"));
        let h6 = Hosts::new("[::1]:80".parse().unwrap(), &["mwp.example".into()]);
        assert!(h6.allows("[::1]:80"));
        assert!(h6.allows("[::1]"));
        assert!(h6.allows("mwp.example"));
        assert!(h6.allows("mwp.example:443"));
        assert!(!h6.allows("[::2]:80"));
        let any = Hosts::new("0.0.0.0:9000".parse().unwrap(), &["a.b:8443".into()]);
        assert!(any.allows("10.1.2.3:9000"));
        assert!(any.allows("a.b:8443"));
        assert!(!any.allows("a.b:9000"));
        assert!(!any.allows("x.y:9000"));
        // Names compare without regard to ASCII case; a port only in its shortest form, on
        // either side.
        assert!(h.allows(" 127.0.0.1:7878 "));
        for spelled in ["07878", "+7878", "007878", ""] {
            assert!(!h.allows(&format!("127.0.0.1:{spelled}")), "{spelled:?}");
        }
        assert!(h6.allows("MWP.Example"));
        let upper = Hosts::new(
            "127.0.0.1:7878".parse().expect("an address"),
            &["OPS.Example:8443".into(), "x.y:08443".into()],
        );
        assert!(upper.allows("ops.example:8443"));
        assert!(!upper.allows("ops.example:8444"));
        assert!(!upper.allows("x.y:8443"));
        assert!(!upper.allows("x.y:08443"));
        // A bracketed name followed by anything but `:PORT` is not that name.
        let v6 = Hosts::new(
            "127.0.0.1:7878".parse().expect("an address"),
            &["[::2]".into()],
        );
        assert!(v6.allows("[::2]") && v6.allows("[::2]:80"));
        assert!(!v6.allows("[::2]x"));
        assert!(!v6.allows("[::2]]:1"));
    }

    #[test]
    fn public_hosts_are_checked_at_start() {
        for ok in [
            "ops.example",
            "ops.example:8443",
            "OPS.example:0",
            "[::2]",
            "[fe80::1]:80",
            "a-b.c",
        ] {
            assert_eq!(check_public_host(ok), Ok(()), "{ok}");
        }
        for bad in [
            "", "x:08443", "x:+80", "x:", "x:65536", "x:abc", "[::2]x", "[::g]", "a/b", "a b",
            "user@x", "x:80:80",
        ] {
            let e = check_public_host(bad).expect_err(bad);
            assert!(e.contains("is not a host name"), "{bad}: {e}");
        }
    }
}
