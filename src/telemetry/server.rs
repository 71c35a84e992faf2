//! `/metrics` on the metrics address, `/healthz` and `/readyz` on the health address.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use super::metrics::Metrics;

/// Where this replica stands in leader election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Role {
    /// Leader election is off: this replica always reconciles.
    Alone = 0,
    /// Waiting for the lease, healthily.
    Standby = 1,
    Leader = 2,
    /// Lost the lease or the election failed; about to exit. `/healthz` fails too.
    Lost = 3,
}

impl Role {
    /// Whether a replica in this role reconciles: it leads, or election is off.
    pub fn reconciles(self) -> bool {
        matches!(self, Role::Alone | Role::Leader)
    }
}

/// What `/healthz` and `/readyz` report.
#[derive(Debug)]
pub struct Health {
    synced: AtomicBool,
    role: AtomicU8,
    /// Why the role is `Lost`, for the probes' bodies.
    lost: Mutex<Option<String>>,
}

impl Health {
    pub fn new(role: Role) -> Self {
        Health {
            synced: AtomicBool::new(false),
            role: AtomicU8::new(role as u8),
            lost: Mutex::new(None),
        }
    }

    /// The role `Lost`, and why: both probes fail from now on and say so.
    pub fn lose(&self, reason: impl Into<String>) {
        *crate::clock::lock(&self.lost) = Some(reason.into());
        self.set_role(Role::Lost);
    }

    /// `/healthz`'s status and body. Only a replica that lost its Lease
    /// (and is about to exit) is unhealthy: the kubelet restarts it should the exit hang.
    pub fn liveness(&self) -> (StatusCode, String) {
        match self.role() {
            Role::Lost => (StatusCode::SERVICE_UNAVAILABLE, self.lost_body()),
            _ => (StatusCode::OK, "ok".to_string()),
        }
    }

    /// `/readyz`'s status and body.
    pub fn readiness(&self) -> (StatusCode, String) {
        match (self.ready(), self.role()) {
            (true, _) => (StatusCode::OK, "ok".to_string()),
            (false, Role::Lost) => (StatusCode::SERVICE_UNAVAILABLE, self.lost_body()),
            (false, _) => (StatusCode::SERVICE_UNAVAILABLE, "not ready".to_string()),
        }
    }

    fn lost_body(&self) -> String {
        match crate::clock::lock(&self.lost).as_deref() {
            Some(reason) => format!("leader election lost: {reason}"),
            None => "leader election lost".to_string(),
        }
    }

    pub fn set_synced(&self, synced: bool) {
        self.synced.store(synced, Ordering::Relaxed);
    }

    pub fn set_role(&self, role: Role) {
        self.role.store(role as u8, Ordering::Relaxed);
    }

    pub fn role(&self) -> Role {
        match self.role.load(Ordering::Relaxed) {
            0 => Role::Alone,
            1 => Role::Standby,
            2 => Role::Leader,
            _ => Role::Lost,
        }
    }

    pub fn ready(&self) -> bool {
        is_ready(self.role(), self.synced.load(Ordering::Relaxed))
    }
}

/// Pure: a standby replica is ready (it serves nothing yet but is healthy); one that reconciles
/// is ready once its caches are synced.
pub fn is_ready(role: Role, synced: bool) -> bool {
    match role {
        Role::Standby => true,
        Role::Alone | Role::Leader => synced,
        Role::Lost => false,
    }
}

/// Serves both listeners until `shutdown`. Binding errors are returned at once.
pub async fn serve(
    metrics_addr: SocketAddr,
    health_addr: SocketAddr,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    shutdown: impl Future<Output = ()> + Send + Clone + 'static,
) -> std::io::Result<(SocketAddr, SocketAddr)> {
    let metrics_listener = tokio::net::TcpListener::bind(metrics_addr).await?;
    let health_listener = tokio::net::TcpListener::bind(health_addr).await?;
    let bound = (metrics_listener.local_addr()?, health_listener.local_addr()?);
    let metrics_app = Router::new()
        .route("/metrics", get(render))
        .with_state((metrics, health.clone()));
    let health_app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(health);
    let stop = shutdown.clone();
    tokio::spawn(async move {
        axum::serve(metrics_listener, metrics_app)
            .with_graceful_shutdown(stop)
            .await
    });
    tokio::spawn(async move {
        axum::serve(health_listener, health_app)
            .with_graceful_shutdown(shutdown)
            .await
    });
    Ok(bound)
}

async fn render(State((metrics, health)): State<(Arc<Metrics>, Arc<Health>)>) -> axum::response::Response {
    metrics.set_leading(health.role().reconciles());
    match metrics.render() {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(err) => {
            tracing::error!(error = %err, "cannot encode the metrics");
            (StatusCode::INTERNAL_SERVER_ERROR, "cannot encode the metrics").into_response()
        }
    }
}

async fn healthz(State(health): State<Arc<Health>>) -> impl IntoResponse {
    health.liveness()
}

async fn readyz(State(health): State<Arc<Health>>) -> impl IntoResponse {
    health.readiness()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_table() {
        let cases = [
            (Role::Alone, false, false),
            (Role::Alone, true, true),
            (Role::Standby, false, true),
            (Role::Leader, false, false),
            (Role::Leader, true, true),
            (Role::Lost, true, false),
        ];
        for (role, synced, want) in cases {
            assert_eq!(is_ready(role, synced), want, "{role:?} synced={synced}");
        }
    }

    #[test]
    fn probe_bodies_table() {
        let lost = Health::new(Role::Leader);
        lost.set_synced(true);
        lost.lose("no Lease renewal landed for 10.2s, past the renew deadline of 10s");
        let reason =
            "leader election lost: no Lease renewal landed for 10.2s, past the renew deadline of 10s";
        let unsynced = Health::new(Role::Leader);
        let leader = Health::new(Role::Leader);
        leader.set_synced(true);
        let unexplained = Health::new(Role::Lost);
        let cases = [
            (&leader, (200, "ok"), (200, "ok")),
            (&unsynced, (200, "ok"), (503, "not ready")),
            (&lost, (503, reason), (503, reason)),
            (
                &unexplained,
                (503, "leader election lost"),
                (503, "leader election lost"),
            ),
        ];
        for (health, live, ready) in cases {
            let (status, body) = health.liveness();
            assert_eq!((status.as_u16(), body.as_str()), live, "{health:?}");
            let (status, body) = health.readiness();
            assert_eq!((status.as_u16(), body.as_str()), ready, "{health:?}");
        }
    }
}
