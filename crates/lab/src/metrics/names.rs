//! A name service's metrics (papers 000 and 001: the CORBA naming every object is found
//! through, here with leases): entries held, and the registrations, renewals and
//! expiries its directory has counted; its accept loop as `names` ([`super::tls`]).

use atmlab_control::names::NameServiceImpl;

use super::{Families, Metrics, Source, labels};

/// One name service.
pub struct NamesSource {
    name: String,
    service: NameServiceImpl,
}

impl NamesSource {
    /// The name service `service` labelled `service = name`, with its accept loop (once
    /// it serves), added to `metrics`.
    pub fn add(metrics: &Metrics, name: &str, service: &NameServiceImpl) {
        metrics.add(NamesSource {
            name: name.to_string(),
            service: service.clone(),
        });
    }
}

impl Source for NamesSource {
    fn collect(&self, out: &mut Families) {
        let (entries, st) = self.service.stats();
        let l = || labels([("service", self.name.as_str())]);
        out.gauge(
            "atmlab_names_entries",
            "Registrations held (lapsed ones not yet swept included).",
            l(),
            entries as f64,
        );
        out.counter(
            "atmlab_names_registrations",
            "Registrations accepted (claims and re-registrations included).",
            l(),
            st.registrations,
        );
        out.counter("atmlab_names_renewals", "Leases renewed.", l(), st.renewals);
        out.counter(
            "atmlab_names_expiries",
            "Registrations removed because their lease lapsed.",
            l(),
            st.expiries,
        );
        // The accept loop exists once the service serves; read it here rather than
        // at `add`, which may come first.
        if let Some(stats) = self.service.tls_stats() {
            super::tls::TlsSource::new(format!("names/{}", self.name), stats).collect(out);
        }
    }
}
