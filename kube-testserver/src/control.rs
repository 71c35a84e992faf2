//! `/testserver/...`: counts, faults, latency and watch control over HTTP, for tests that run
//! the server as a child process. These endpoints are neither authenticated nor counted.
//!
//! | request | effect |
//! |---|---|
//! | `GET /testserver/counts` | `[{"verb":"get","resource":"secrets","count":3}, …]` |
//! | `DELETE /testserver/counts` | reset counts |
//! | `POST /testserver/faults` with a [`Fault`] | inject it |
//! | `GET /testserver/faults` / `DELETE /testserver/faults` | list / clear pending faults |
//! | `PUT /testserver/latency` with `{"millis": N}` | delay every API request |
//! | `POST /testserver/close-watches` | end every open watch |
//! | `POST /testserver/compact` | forget watch history (older resourceVersions get 410) |

use std::{sync::Arc, time::Duration};

use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    routing::{get, post, put},
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    Shared,
    faults::{Count, Fault},
};

pub fn router() -> Router<Arc<Shared>> {
    Router::new()
        .route("/counts", get(counts).delete(reset_counts))
        .route("/faults", get(faults).post(inject).delete(clear_faults))
        .route("/latency", put(latency))
        .route("/close-watches", post(close_watches))
        .route("/compact", post(compact))
}

async fn counts(State(shared): State<Arc<Shared>>) -> Json<Vec<Count>> {
    Json(shared.faults.lock().expect("faults lock").counts.rows())
}

async fn reset_counts(State(shared): State<Arc<Shared>>) -> Json<Value> {
    shared.faults.lock().expect("faults lock").counts = Default::default();
    Json(json!({}))
}

async fn faults(State(shared): State<Arc<Shared>>) -> Json<Vec<Fault>> {
    Json(shared.faults.lock().expect("faults lock").pending().to_vec())
}

async fn inject(State(shared): State<Arc<Shared>>, Json(fault): Json<Fault>) -> (StatusCode, Json<Value>) {
    shared.faults.lock().expect("faults lock").inject(fault);
    (StatusCode::CREATED, Json(json!({})))
}

async fn clear_faults(State(shared): State<Arc<Shared>>) -> Json<Value> {
    shared.faults.lock().expect("faults lock").clear();
    Json(json!({}))
}

#[derive(Deserialize)]
struct Latency {
    millis: u64,
}

async fn latency(State(shared): State<Arc<Shared>>, Json(body): Json<Latency>) -> Json<Value> {
    shared.faults.lock().expect("faults lock").latency = Duration::from_millis(body.millis);
    Json(json!({}))
}

async fn close_watches(State(shared): State<Arc<Shared>>) -> Json<Value> {
    shared.close_watches();
    Json(json!({}))
}

async fn compact(State(shared): State<Arc<Shared>>) -> Json<Value> {
    shared.store.lock().expect("store lock").compact();
    Json(json!({}))
}
