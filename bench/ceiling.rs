//! The HTTP ceiling for the benchmark (`bench/run.sh`): a bare axum server that reads each request
//! body whole, with the same 4 MiB limit as drift-sentinel, and answers `202` with an empty body.
//! It does what the sink's HTTP edge does and nothing else, on the same runtime (tokio
//! multi-thread, one worker per core), so the ratio sink/ceiling is what the product costs.
//!
//! With `--decode` it also decodes each request as the sink does (`drift_core::decode::
//! decode_request`: the CloudEvent, the object, every check on bad input) and drops the result:
//! the sink's HTTP edge plus its decode, without the pipeline behind them (issue 28's floor).
//!
//! Benchmark-only code: not part of the product. Usage: `bench-ceiling 127.0.0.1:PORT [--decode]`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use drift_core::decode::{decode_request, ClusterNames};

const BODY_LIMIT: usize = 4 * 1024 * 1024;

/// The cluster names decoding resolves against (the benchmark's sink config: `bench`); `None`
/// without `--decode`.
type Decoding = Option<Arc<ClusterNames>>;

async fn accept(State(decoding): State<Decoding>, request: Request<Body>) -> StatusCode {
    let (parts, body) = request.into_parts();
    match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(bytes) if bytes.is_empty() => StatusCode::BAD_REQUEST,
        Ok(bytes) => match decoding {
            None => StatusCode::ACCEPTED,
            Some(clusters) => match decode_request(&parts.headers, &bytes, &clusters) {
                Ok(_) => StatusCode::ACCEPTED,
                Err(_) => StatusCode::BAD_REQUEST,
            },
        },
        Err(_) => StatusCode::PAYLOAD_TOO_LARGE,
    }
}

fn main() -> std::process::ExitCode {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18090".to_string());
    let decoding: Decoding = std::env::args().any(|arg| arg == "--decode").then(|| {
        Arc::new(ClusterNames {
            default: "bench".to_string(),
            by_source: Default::default(),
        })
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("bench-ceiling: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result: Result<(), std::io::Error> = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        println!("listening on {}", listener.local_addr()?);
        axum::serve(
            listener,
            Router::new().route("/", post(accept)).with_state(decoding),
        )
        .await
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bench-ceiling: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
