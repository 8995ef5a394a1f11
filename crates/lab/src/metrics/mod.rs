//! Prometheus metrics of a live network (issue 25, item 1): what the running parts
//! already count (a switch's port counters, a manager's GetStatus, a name service's
//! directory, an SMDS server's `--status`, every accept loop's `IncomingStats`), read
//! at scrape time and written in the exposition format by `prometheus-client`.
//!
//! Why read at scrape time: the parts keep their counters for their own reports
//! (Statistics, GetStatus, the summary log lines); reading them when Prometheus asks adds
//! nothing to the per-cell or per-call paths. A [`Source`] is one part: `refresh` may
//! ask it asynchronously (a manager answers its status through its task), `collect`
//! writes its samples into [`Families`], which the encoder writes one family at a time
//! (a family's samples from every switch together, as the format requires).
//!
//! Names follow Prometheus's conventions: the `atmlab_` prefix, `_total` on counters
//! (added by the encoder), base units in the name (`_seconds`, `_cells`), labels for
//! the part (`switch`, `port`, `manager`, `server`, `kind`, `cause`). The families are
//! listed in `docs/live.md` ("Metrics").
//!
//! The HTTP side is [`http`]: a small axum server that the dashboard will share.

pub mod cm;
pub mod http;
pub mod names;
pub mod smds;
pub mod switch;
pub mod tls;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// A future a [`Source`] returns from `refresh`.
pub type Refresh<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// One running part whose counters are exported.
pub trait Source: Send + Sync + 'static {
    /// Brings the part's snapshot up to date before a scrape (a manager answers
    /// through its task); most parts are read directly and need nothing.
    fn refresh(&self) -> Refresh<'_> {
        Box::pin(async {})
    }

    /// Writes the part's samples.
    fn collect(&self, out: &mut Families);
}

/// Labels of one sample, in order.
pub type Labels = Vec<(String, String)>;

/// One sample's value.
#[derive(Debug, Clone)]
enum Value {
    Counter(u64),
    Gauge(f64),
    /// Sum, count, and (upper bound, cumulative count) per bucket.
    Histogram(f64, u64, Vec<(f64, u64)>),
}

#[derive(Debug)]
struct Family {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    samples: Vec<(Labels, Value)>,
}

/// The samples of one scrape, by family, in the order first written.
#[derive(Debug, Default)]
pub struct Families {
    families: Vec<Family>,
}

impl Families {
    fn family(&mut self, name: &'static str, help: &'static str, kind: MetricType) -> &mut Family {
        let i = match self.families.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.families.push(Family {
                    name,
                    help,
                    kind,
                    samples: Vec::new(),
                });
                self.families.len() - 1
            }
        };
        &mut self.families[i]
    }

    /// A counter sample; `name` without `_total` (the encoder adds it).
    pub fn counter(&mut self, name: &'static str, help: &'static str, labels: Labels, v: u64) {
        self.family(name, help, MetricType::Counter)
            .samples
            .push((labels, Value::Counter(v)));
    }

    /// A gauge sample.
    pub fn gauge(&mut self, name: &'static str, help: &'static str, labels: Labels, v: f64) {
        self.family(name, help, MetricType::Gauge)
            .samples
            .push((labels, Value::Gauge(v)));
    }

    /// A histogram sample: the sum and count of the observations, and each bucket's
    /// upper bound with its own count (the encoder accumulates them; the last bound is
    /// `f64::MAX`, written `+Inf`).
    pub fn histogram(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: Labels,
        sum: f64,
        count: u64,
        buckets: Vec<(f64, u64)>,
    ) {
        self.family(name, help, MetricType::Histogram)
            .samples
            .push((labels, Value::Histogram(sum, count, buckets)));
    }
}

/// Labels from pairs of strings.
pub fn labels<const N: usize>(pairs: [(&str, &str); N]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

/// The collector that writes one scrape's [`Families`].
#[derive(Debug)]
struct Scrape(Mutex<Families>);

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let families = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for f in &families.families {
            let mut family = encoder.encode_descriptor(f.name, f.help, None, f.kind)?;
            for (labels, value) in &f.samples {
                let sample = family.encode_family(labels)?;
                match value {
                    Value::Counter(v) => ConstCounter::new(*v).encode(sample)?,
                    Value::Gauge(v) => ConstGauge::new(*v).encode(sample)?,
                    Value::Histogram(sum, count, buckets) => {
                        let mut sample = sample;
                        sample.encode_histogram::<Labels>(*sum, *count, buckets, None)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The parts one process exports. Cheap to clone: every clone adds to the same set.
#[derive(Clone, Default)]
pub struct Metrics {
    sources: Arc<Mutex<Vec<Arc<dyn Source>>>>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.sources.lock().map(|s| s.len()).unwrap_or(0);
        f.debug_struct("Metrics").field("sources", &n).finish()
    }
}

impl Metrics {
    /// An empty set.
    pub fn new() -> Self {
        Metrics::default()
    }

    /// Exports `source` from the next scrape on.
    pub fn add(&self, source: impl Source) {
        self.sources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::new(source));
    }

    /// The parts' samples now, as `prometheus-client`'s text encoder writes them
    /// (OpenMetrics text, ending `# EOF`).
    pub async fn render(&self) -> String {
        let sources: Vec<Arc<dyn Source>> = self
            .sources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for s in &sources {
            s.refresh().await;
        }
        let mut families = Families::default();
        for s in &sources {
            s.collect(&mut families);
        }
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Scrape(Mutex::new(families))));
        let mut text = String::new();
        // Writing into a String cannot fail; an error here would be a bug in a family
        // (a name the format rejects), which the tests would show.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &registry) {
            tracing::error!(error = %e, "encoding the metrics failed");
        }
        text
    }
}

/// The metrics of a network `atmlab net up` (or `up`, `demo`) started: every switch
/// with its control ports, and the name service with its accept loop.
pub fn network(net: &atmlab_control::net::Network) -> Metrics {
    let m = Metrics::new();
    for s in &net.switches {
        switch::SwitchSource::add(&m, s);
    }
    names::NamesSource::add(&m, "names", &net.names);
    m
}

/// The upper bounds of a latency histogram in seconds: 50 us to about 3.3 s, doubling
/// (the setups of paper 000 run from tens of microseconds alone on loopback to seconds
/// past the knee).
pub fn latency_buckets() -> Vec<f64> {
    (0..17).map(|i| 50e-6 * f64::from(1u32 << i)).collect()
}

/// Observations bucketed by [`latency_buckets`], kept by the part that observes them
/// (a manager's service) and read at scrape time. Lock-free: one atomic add per
/// observation for the bucket, the count and the sum (in nanoseconds).
#[derive(Debug)]
pub struct LatencyHistogram {
    bounds: Vec<f64>,
    buckets: Vec<std::sync::atomic::AtomicU64>,
    count: std::sync::atomic::AtomicU64,
    sum_ns: std::sync::atomic::AtomicU64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        let bounds = latency_buckets();
        LatencyHistogram {
            buckets: bounds.iter().map(|_| Default::default()).collect(),
            bounds,
            count: Default::default(),
            sum_ns: Default::default(),
        }
    }
}

impl LatencyHistogram {
    /// Counts one observation.
    pub fn observe(&self, d: std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        let s = d.as_secs_f64();
        if let Some(i) = self.bounds.iter().position(|b| s <= *b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_ns
            .fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }

    /// (sum in seconds, count, each bucket's own count with `+Inf` last), as
    /// [`Families::histogram`] takes them.
    pub fn snapshot(&self) -> (f64, u64, Vec<(f64, u64)>) {
        use std::sync::atomic::Ordering::Relaxed;
        let count = self.count.load(Relaxed);
        let mut buckets: Vec<(f64, u64)> = self
            .bounds
            .iter()
            .zip(&self.buckets)
            .map(|(b, n)| (*b, n.load(Relaxed)))
            .collect();
        let below: u64 = buckets.iter().map(|(_, n)| n).sum();
        buckets.push((f64::MAX, count.saturating_sub(below)));
        let sum = self.sum_ns.load(Relaxed) as f64 * 1e-9;
        (sum, count, buckets)
    }
}
