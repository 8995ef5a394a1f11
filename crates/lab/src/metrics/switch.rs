//! A live switch server's metrics (papers 000 §II-B and 001 §3: the switch server):
//! per port, the counters the core keeps for Describe and Statistics (cells in and out,
//! HEC, unknown VC, CLP and buffer discards, policing), its queue, connections and
//! bandwidth; per switch, the data plane's own counters and the commands refused for
//! the caller's role. Read from `LocalSwitch::describe_now` at scrape time: one lock of
//! the switch per scrape, nothing on the per-cell path. The TLS side of its control
//! ports is [`super::tls`].

use std::sync::Arc;
use std::sync::atomic::Ordering;

use atmlab_fabric::live::authz::AuthzStats;
use atmlab_fabric::live::dataplane::DataPlane;
use atmlab_fabric::live::local::LocalSwitch;
use atmlab_fabric::live::server::RunningSwitch;

use super::{Families, Metrics, Source, labels};

/// One switch server.
pub struct SwitchSource {
    switch: LocalSwitch,
    data_plane: DataPlane,
    authz: Arc<AuthzStats>,
}

impl SwitchSource {
    /// The switch `s`, with its control ports' accept loops (gRPC, raw TCP) as TLS
    /// sources named `switch/NAME grpc` and `switch/NAME raw`, added to `metrics`.
    pub fn add(metrics: &Metrics, s: &RunningSwitch) {
        let name = s.switch.name().to_string();
        metrics.add(super::tls::TlsSource::new(
            format!("switch/{name} grpc"),
            s.grpc_stats.clone(),
        ));
        if let Some(raw) = &s.raw_stats {
            metrics.add(super::tls::TlsSource::new(
                format!("switch/{name} raw"),
                raw.clone(),
            ));
        }
        metrics.add(SwitchSource {
            switch: s.switch.clone(),
            data_plane: s.data_plane.clone(),
            authz: s.authz.clone(),
        });
    }
}

impl Source for SwitchSource {
    fn collect(&self, out: &mut Families) {
        let d = self.switch.describe_now();
        let sw = d.name.as_str();
        for p in &d.ports {
            let port = p.config.id.0.to_string();
            let l = || labels([("switch", sw), ("port", port.as_str())]);
            let c = &p.counters;
            out.counter(
                "atmlab_switch_cells_in",
                "Cells received on the port.",
                l(),
                c.cells_in,
            );
            out.counter(
                "atmlab_switch_cells_out",
                "Cells taken off the port's output queue for transmission.",
                l(),
                c.cells_out,
            );
            out.counter(
                "atmlab_switch_hec_corrected",
                "Cell headers the HEC receiver corrected.",
                l(),
                c.cells_hec_corrected,
            );
            out.counter(
                "atmlab_switch_hec_discarded",
                "Cells the HEC receiver discarded.",
                l(),
                c.cells_hec_errors,
            );
            out.counter(
                "atmlab_switch_unknown_vc",
                "Cells that matched no connection (unassigned cells included).",
                l(),
                c.cells_unknown,
            );
            out.counter(
                "atmlab_switch_clp_discards",
                "CLP=1 cells discarded above the queue's threshold.",
                l(),
                c.cells_discarded_clp1,
            );
            out.counter(
                "atmlab_switch_buffer_discards",
                "Cells discarded because the output buffer was full.",
                l(),
                c.cells_discarded_full,
            );
            out.counter(
                "atmlab_switch_policing_actions",
                "Cells that failed their connection's conformance test (tagged or discarded).",
                l(),
                c.cells_policed,
            );
            out.counter(
                "atmlab_switch_datagrams_refused",
                "Datagrams refused because they came from an address not the port's peer.",
                l(),
                c.datagrams_refused,
            );
            out.gauge(
                "atmlab_switch_queue_cells",
                "Cells waiting in the port's output queue.",
                l(),
                f64::from(p.queue_cells),
            );
            out.gauge(
                "atmlab_switch_port_connections",
                "Output identifiers committed on the port (its connections).",
                l(),
                f64::from(p.committed),
            );
            out.gauge(
                "atmlab_switch_port_reserved_identifiers",
                "Output identifiers reserved on the port (phase 1).",
                l(),
                f64::from(p.reserved),
            );
            // Bandwidth in bits/s, the base unit: admission control charges cells/s,
            // each cell 424 bits on the line.
            out.gauge(
                "atmlab_switch_bandwidth_reserved_bits_per_second",
                "Bandwidth admitted on the port (cell rate times 424 bits).",
                l(),
                p.allocated * 424.0,
            );
            out.gauge(
                "atmlab_switch_bandwidth_capacity_bits_per_second",
                "Bandwidth admission control may hand out on the port (cell rate times 424 bits).",
                l(),
                p.config.capacity.0 * 424.0,
            );
        }
        let l = || labels([("switch", sw)]);
        out.gauge(
            "atmlab_switch_connections",
            "Connections installed on the switch.",
            l(),
            f64::from(d.connections),
        );
        let dp = self.data_plane.counters();
        out.counter(
            "atmlab_switch_ragged_datagrams",
            "Datagrams whose length was not a multiple of 53 octets.",
            l(),
            dp.ragged_datagrams.load(Ordering::Relaxed),
        );
        out.counter(
            "atmlab_switch_cells_no_peer",
            "Cells dropped because their output port had no peer yet.",
            l(),
            dp.cells_no_peer.load(Ordering::Relaxed),
        );
        out.counter(
            "atmlab_switch_send_errors",
            "Datagrams the operating system refused to send.",
            l(),
            dp.send_errors.load(Ordering::Relaxed),
        );
        out.counter(
            "atmlab_switch_commands_refused",
            "Commands refused for the caller's role or owner.",
            l(),
            self.authz.refused(),
        );
    }
}
