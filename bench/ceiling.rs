//! The HTTP ceiling for the benchmark (`bench/run.sh`): a bare axum server that reads each request
//! body whole, with the same 4 MiB limit as drift-sentinel, and answers `202` with an empty body.
//! It does what the sink's HTTP edge does and nothing else, on the same runtime (tokio
//! multi-thread, one worker per core), so the ratio sink/ceiling is what the product costs.
//!
//! Benchmark-only code: not part of the product. Usage: `bench-ceiling 127.0.0.1:PORT`.

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;

const BODY_LIMIT: usize = 4 * 1024 * 1024;

async fn accept(request: Request<Body>) -> StatusCode {
    match axum::body::to_bytes(request.into_body(), BODY_LIMIT).await {
        Ok(bytes) if !bytes.is_empty() => StatusCode::ACCEPTED,
        Ok(_) => StatusCode::BAD_REQUEST,
        Err(_) => StatusCode::PAYLOAD_TOO_LARGE,
    }
}

fn main() -> std::process::ExitCode {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18090".to_string());
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
        axum::serve(listener, Router::new().route("/", post(accept))).await
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bench-ceiling: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
