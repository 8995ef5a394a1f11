//! An SMDS server's metrics (paper 002): PDUs forwarded by Table 1's paths, discarded
//! by cause, screened, group copies, the CMP's state and messages (§3.4), and route
//! recomputations, from the counters its `--status` file shows (`LiveServer::status`).

use atmlab_smds::live::{LiveServer, StatusReader};

use super::{Families, Metrics, Source, labels};

/// One SMDS server.
pub struct SmdsSource {
    name: String,
    reader: StatusReader,
}

impl SmdsSource {
    /// The server `server` labelled `server = name`, added to `metrics`.
    pub fn add(metrics: &Metrics, name: &str, server: &LiveServer) {
        metrics.add(SmdsSource {
            name: name.to_string(),
            reader: server.status_reader(),
        });
    }
}

impl Source for SmdsSource {
    fn collect(&self, out: &mut Families) {
        let s = self.reader.status();
        let c = &s.counters;
        let name = self.name.as_str();
        let l = || labels([("server", name)]);
        out.counter(
            "atmlab_smds_pdus_received",
            "Datagrams handed to the forwarder.",
            l(),
            c.received,
        );
        for (path, v) in [
            ("sni_to_issi", c.sni_to_issi),
            ("issi_to_sni", c.issi_to_sni),
            ("issi_to_issi", c.issi_to_issi),
            ("sni_to_sni", c.sni_to_sni),
            ("to_ici", c.to_ici),
            ("from_ici", c.from_ici),
        ] {
            out.counter(
                "atmlab_smds_pdus_forwarded",
                "PDUs forwarded, by path (paper 002, Table 1).",
                labels([("server", name), ("path", path)]),
                v,
            );
        }
        out.counter(
            "atmlab_smds_pdus_delivered",
            "PDUs delivered to subscribers (SNIs).",
            l(),
            c.delivered,
        );
        out.counter(
            "atmlab_smds_delivered_bytes",
            "Octets of L3_PDU delivered to subscribers.",
            l(),
            c.delivered_octets,
        );
        out.counter(
            "atmlab_smds_group_copies",
            "Copies made for group addresses, beyond the first.",
            l(),
            c.group_copies,
        );
        for (cause, v) in [
            ("malformed", c.malformed),
            ("spoofed", c.spoofed),
            ("destination_screened", c.destination_screened),
            ("source_screened", c.source_screened),
            ("no_route", c.no_route),
            ("hop_limit", c.hop_limit),
            ("overload", c.overload),
            ("cmp_cut", c.cmp_cut),
        ] {
            out.counter(
                "atmlab_smds_pdus_discarded",
                "PDUs discarded, by cause.",
                labels([("server", name), ("cause", cause)]),
                v,
            );
        }
        out.counter(
            "atmlab_smds_pdus_screened",
            "PDUs discarded by address screening (source and destination).",
            l(),
            c.destination_screened + c.source_screened,
        );
        out.gauge(
            "atmlab_smds_cmp_congested",
            "1 while the congestion management protocol says this server is congested.",
            l(),
            if s.congested { 1.0 } else { 0.0 },
        );
        out.gauge(
            "atmlab_smds_cmp_cut_permille",
            "The cut this server asks of its neighbours, per mille (0: none).",
            l(),
            f64::from(s.cmp_cut),
        );
        out.counter(
            "atmlab_smds_cmp_episodes",
            "Congestion episodes begun.",
            l(),
            s.cmp_episodes,
        );
        for (dir, v) in [("sent", s.cmp_messages.0), ("received", s.cmp_messages.1)] {
            out.counter(
                "atmlab_smds_cmp_messages",
                "CMP messages (Throttle, Resume) sent to and received from neighbours.",
                labels([("server", name), ("direction", dir)]),
                v,
            );
        }
        out.counter(
            "atmlab_smds_route_recomputations",
            "Shortest-path route recomputations.",
            l(),
            s.spf_runs,
        );
        let buckets: Vec<(f64, u64)> = atmlab_smds::live::SPF_BOUNDS
            .iter()
            .copied()
            .chain([f64::MAX])
            .zip(s.spf_buckets)
            .collect();
        out.histogram(
            "atmlab_smds_route_recomputation_seconds",
            "Time of the control steps that recomputed routes (shortest paths and the \
             forwarding table).",
            l(),
            s.spf_seconds,
            s.spf_buckets.iter().sum(),
            buckets,
        );
        out.gauge(
            "atmlab_smds_reachable_addresses",
            "Individual addresses with a route.",
            l(),
            s.reachable as f64,
        );
        out.counter(
            "atmlab_smds_control_malformed",
            "Control frames that did not decode.",
            l(),
            s.control_malformed,
        );
        out.counter(
            "atmlab_smds_datagrams_refused",
            "Datagrams refused because they came from an address not the interface's peer.",
            l(),
            s.refused_source.iter().sum(),
        );
    }
}

/// Serves the metrics of `servers` (name, server) at `addr`'s `/metrics`, if given:
/// what `atmlab smds serve` and `smds net up` run with `--metrics ADDR`.
pub async fn serve<'a>(
    addr: Option<std::net::SocketAddr>,
    servers: impl IntoIterator<Item = (&'a str, &'a LiveServer)>,
) -> Result<Option<super::http::HttpServer>, crate::LabError> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let m = Metrics::new();
    for (name, s) in servers {
        SmdsSource::add(&m, name, s);
    }
    Ok(Some(super::http::HttpServer::metrics(addr, m).await?))
}
