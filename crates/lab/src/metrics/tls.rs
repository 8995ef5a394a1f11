//! Every server's accept loop (`atmlab_rpc::tls::incoming`, docs/security.md): the
//! connections it handed on, and those it refused by kind, TLS handshake time-outs
//! among them. Read from the loop's `IncomingStats`, which it keeps for its summary log
//! line.

use atmlab_rpc::tls::{IncomingStats, Refusal};

use super::{Families, Source, labels};

/// One accept loop, named by the server it fronts (`switch/s1 grpc`, `names`, `cm/xbind`).
pub struct TlsSource {
    server: String,
    stats: IncomingStats,
}

impl TlsSource {
    /// The accept loop of `server`.
    pub fn new(server: impl Into<String>, stats: IncomingStats) -> Self {
        TlsSource {
            server: server.into(),
            stats,
        }
    }
}

/// The label value of a refusal kind (snake case, stable: dashboards select on it).
pub fn kind_label(r: Refusal) -> &'static str {
    match r {
        Refusal::HandshakeTimeout => "handshake_timeout",
        Refusal::HandshakeFailed => "handshake_failed",
        Refusal::PendingPerAddr => "pending_per_address",
        Refusal::PendingTotal => "pending_total",
        Refusal::ConnectionsPerAddr => "connections_per_address",
        Refusal::ConnectionsTotal => "connections_total",
        Refusal::Idle => "idle",
        Refusal::AcceptError => "accept_error",
    }
}

impl Source for TlsSource {
    fn collect(&self, out: &mut Families) {
        let server = self.server.as_str();
        out.counter(
            "atmlab_tls_accepted_connections",
            "Connections the accept loop handed to the server (after the TLS handshake, with TLS).",
            labels([("server", server)]),
            self.stats.accepted(),
        );
        for r in Refusal::ALL {
            out.counter(
                "atmlab_tls_refusals",
                "Connections the accept loop refused or closed, by kind.",
                labels([("server", server), ("kind", kind_label(r))]),
                self.stats.count(r),
            );
        }
        out.counter(
            "atmlab_tls_handshake_timeouts",
            "TLS handshakes (or a raw port's first request) that did not come in time.",
            labels([("server", server)]),
            self.stats.count(Refusal::HandshakeTimeout),
        );
    }
}
