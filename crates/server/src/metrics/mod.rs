//! The metrics endpoint: `GET /metrics` over HTTP/1.1 answers every statistic in Prometheus's
//! text format ([`exposition`]). Off unless `[service] metrics-port` is set; it listens on
//! the service address and asks no login (bind it where only the scraper reaches).
//!
//! A scraper is an ordinary client of the node, and is bounded as one: at most
//! [`CONNECTIONS_MAX`] connections, request headers within [`HEADER_BYTES_MAX`] and read within
//! [`HEADER_READ_TIMEOUT`], and a connection closed after [`CONNECTION_MAX`] whatever it does.

pub mod exposition;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tracing::{debug, warn};

use crate::state::ServerState;

/// Scrapers served at once; more are closed at accept.
pub const CONNECTIONS_MAX: usize = 16;
/// A request's headers must fit in this.
pub const HEADER_BYTES_MAX: usize = 16 * 1024;
/// A request's headers must arrive within this.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// No connection lasts longer (a scraper opens another).
pub const CONNECTION_MAX: Duration = Duration::from_secs(60);

/// The content type of Prometheus's text format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves the endpoint on `listener` until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    state: Arc<ServerState>,
    mut shutdown: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(CONNECTIONS_MAX));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => return,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                warn!(%error, "metrics endpoint: accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            debug!("metrics endpoint: too many connections, one closed");
            continue;
        };
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |request| {
                std::future::ready(Ok::<_, Infallible>(respond(&state, &request)))
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(HEADER_BYTES_MAX)
                .serve_connection(TokioIo::new(stream), service);
            if let Ok(Err(error)) = tokio::time::timeout(CONNECTION_MAX, connection).await {
                debug!(%error, "metrics endpoint: connection ended");
            }
        });
    }
}

/// The answer to one request: the metrics for `GET /metrics` (and `HEAD`), a pointer to them
/// at `/`, 405 for another method on `/metrics`, 404 elsewhere.
fn respond(state: &ServerState, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let path = request.uri().path();
    let method = request.method();
    let (status, content_type, body) = match (path, method) {
        ("/metrics", &Method::GET | &Method::HEAD) => {
            (StatusCode::OK, TEXT_FORMAT, exposition::render(state))
        }
        ("/metrics", _) => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET and HEAD\n".to_owned(),
        ),
        ("/", &Method::GET | &Method::HEAD) => (
            StatusCode::OK,
            "text/plain",
            "Osprey: metrics at /metrics\n".to_owned(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found\n".to_owned(),
        ),
    };
    // hyper leaves out the body of an answer to HEAD.
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    if status == StatusCode::METHOD_NOT_ALLOWED {
        headers.insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
    }
    response
}
