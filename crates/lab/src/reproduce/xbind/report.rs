//! The report of `atmlab reproduce xbind` (paper 000): the verdict table first, then
//! the baseline (§III-B), the throughput-delay curves with each point's profile and the
//! flush time-out sweep (Figs. 6, 7, 11), N_v (Fig. 9), Table I and the invocation
//! counts (Fig. 10); the CSVs, figures and `results.json`; prose in
//! `templates/xbind.md`.

use std::path::Path;

use atmlab_sim::plot::PlotSpec;
use minijinja::context;
use serde_json::json;

use super::{
    CurvePoint, HOPS, NvResult, PAPER_FLUSH_S, PAPER_TABLE_I, SCALE, XbindResults,
    paper_regions_scaled, sim_dimension, verdicts,
};
use crate::report::{self, Column, Format, SeriesSet, Table, Value, plot, write};
use crate::{LabError, cells};
use atmlab_control::cm::dimension::{
    cache_size_for, estimated_hit_ratio, invocations_per_s, poisson_cdf,
};

/// The report's prose.
const TEMPLATE: &str = include_str!("../../../templates/xbind.md");

/// The cache sizes a Table I row shows for a case: every size from where the estimate
/// or the measurement first passes 0.9 to where the estimate reaches 0.9999, then the
/// sizes the measurement needs for 0.99, 0.999 and 0.9999.
fn table_sizes(r: &NvResult) -> Vec<usize> {
    let m = r.probe.mean();
    let top = r.probe.at_arrival.len() + 1;
    let measured = |target: f64| r.probe.size_for(target).unwrap_or(top);
    let lo = cache_size_for(m, 0.9).unwrap_or(1).min(measured(0.9));
    let hi = cache_size_for(m, 0.9999).unwrap_or(lo).max(lo);
    let mut v: Vec<usize> = (lo..=hi.min(lo + 12)).collect();
    v.extend([measured(0.99), measured(0.999), measured(0.9999)]);
    v.sort_unstable();
    v.dedup();
    v
}

/// §III-B: the paper's two servers beside our managers.
fn baseline_table(r: &XbindResults) -> Table {
    let ms = |md: &str, csv: &str| Column::new(md, csv).right().fixed(3, 4);
    let mut t = Table::new([
        Column::md("manager"),
        Column::csv("manager"),
        Column::new("calls", "calls").right(),
        ms("min ms", "min_ms"),
        ms("mean ms", "mean_ms"),
        ms("max ms", "max_ms"),
        ms("5% ms", "p5_ms"),
        ms("95% ms", "p95_ms"),
    ]);
    for paper in [
        [
            "paper, sequential (Orbix, HP 9000/700)",
            ">= 1000",
            "20.0",
            "23.4",
            "63.3",
            "20.5",
            "31.0",
        ],
        [
            "paper, threaded",
            ">= 1000",
            "22.5",
            "24.9",
            "213",
            "23.1",
            "35.1",
        ],
    ] {
        t.md_row(paper.map(Value::from).to_vec());
    }
    for b in &r.baseline {
        t.row(cells![
            format!("atmlab, {}", b.manager),
            &b.manager,
            b.calls,
            b.min_ms,
            b.mean_ms,
            b.max_ms,
            b.p5_ms,
            b.p95_ms
        ]);
    }
    t
}

/// Figs. 6, 7 and 11: every point of every curve, and the curves.
fn curves_table(r: &XbindResults) -> (Table, SeriesSet) {
    let mut t = Table::new([
        Column::new("manager", "manager"),
        Column::new("offered /s", "offered_per_s")
            .right()
            .md_format(Format::Fixed(0)),
        Column::new("setups /s", "setups_per_s").right().fixed(0, 1),
        Column::csv("operations_per_s").format(Format::Fixed(1)),
        Column::new("mean ms", "mean_setup_ms").right().fixed(3, 4),
        Column::csv("p50_setup_ms").format(Format::Fixed(4)),
        Column::new("p99 ms", "p99_setup_ms").right().fixed(3, 4),
        Column::csv("max_setup_ms").format(Format::Fixed(4)),
        Column::csv("established"),
        Column::new("blocked", "blocked").right(),
        Column::csv("failed"),
        Column::new("T during", "threshold_during").right(),
        Column::csv("queue_ms").format(Format::Fixed(4)),
        Column::csv("round_trip_ms").format(Format::Fixed(4)),
        Column::csv("busy_per_call_ms").format(Format::Fixed(4)),
        Column::csv("messages_per_call").format(Format::Fixed(3)),
        Column::csv("commands_per_message").format(Format::Fixed(3)),
    ]);
    let mut series = SeriesSet::new();
    for c in &r.curves {
        let p = &c.report;
        let f = c.profile();
        t.row(cells![
            &c.manager,
            p.offered_per_s,
            p.setups_per_s,
            p.operations_per_s,
            p.mean_setup_ms,
            p.p50_setup_ms,
            p.p99_setup_ms,
            p.max_setup_ms,
            p.established,
            p.blocked,
            p.failed,
            c.threshold,
            f.queue_ms,
            f.round_trip_ms,
            f.busy_per_call_ms,
            f.messages_per_call,
            f.commands_per_message
        ]);
        series.push(&c.manager, (p.setups_per_s, p.mean_setup_ms, f64::NAN));
    }
    (t, series)
}

/// Figs. 6 and 7's capacities: each manager's peak in the sweep, then every point of the
/// capacity passes after it.
fn capacity_table(r: &XbindResults) -> Table {
    let mut t = Table::new([
        Column::new("manager", "manager"),
        Column::new("pass", "pass").right(),
        Column::new("offered/s", "offered_per_s")
            .right()
            .fixed(0, 1),
        Column::new("setups/s", "setups_per_s").right().fixed(0, 1),
        Column::new("mean ms", "mean_setup_ms").right().fixed(3, 4),
        Column::new("blocked", "blocked").right(),
    ]);
    let mut managers: Vec<&str> = Vec::new();
    for c in &r.curves {
        if !managers.contains(&c.manager.as_str()) {
            managers.push(&c.manager);
        }
    }
    for m in managers {
        let sweep = r
            .curves
            .iter()
            .filter(|c| c.manager == m)
            .max_by(|a, b| a.report.setups_per_s.total_cmp(&b.report.setups_per_s));
        let passes = r.capacity_passes.iter().enumerate().flat_map(|(k, pass)| {
            pass.iter()
                .filter(move |c| c.manager == m)
                .map(move |c| (format!("{}", k + 1), c))
        });
        for (pass, c) in sweep
            .map(|c| ("sweep (peak)".to_string(), c))
            .into_iter()
            .chain(passes)
        {
            let p = &c.report;
            t.row(cells![
                m,
                pass,
                p.offered_per_s,
                p.setups_per_s,
                p.mean_setup_ms,
                p.blocked
            ]);
        }
    }
    t
}

/// Fig. 9: one line per case.
fn nv_table(r: &XbindResults) -> Table {
    let num = |md: &str, csv: &str| Column::new(md, csv).right();
    let mut t = Table::new([
        Column::new("panel", "panel"),
        Column::md("paper λ, T"),
        Column::csv("paper_rate"),
        Column::csv("threshold"),
        num("our λ /s", "rate").md_format(Format::Fixed(0)),
        Column::csv("measured_rate").format(Format::Fixed(1)),
        num("arrivals", "arrivals"),
        Column::new("port", "port"),
        num("gap CV² (Poisson: 1)", "gap_cv2").fixed(2, 4),
        num("mean N_v at arrivals", "mean_nv_arrivals").fixed(3, 4),
        num("mean N_v over time", "mean_nv_time").fixed(3, 4),
        num("mean N_v sampled", "mean_nv_sampled").fixed(3, 4),
        num("samples", "samples"),
        num("calls in setup, sampled", "in_setup_sampled").fixed(3, 4),
        num("λ x setup latency", "in_setup_little").fixed(3, 4),
        num("λ/α = λ x latency", "direct_mean").fixed(3, 4),
        num("replacement latency ms", "latency_ms").fixed(3, 4),
        num("size for 99% (model)", "size99_model"),
        num("size for 99% (measured)", "size99_measured"),
    ]);
    for n in &r.nv {
        let m = n.probe.mean();
        t.row(cells![
            n.case.panel,
            format!("{}, {}", n.case.paper_rate, n.case.threshold),
            n.case.paper_rate,
            n.case.threshold,
            n.rate,
            n.measured_rate(),
            n.probe.arrivals(),
            &n.port,
            n.probe.gap_cv2(),
            m,
            n.probe.time_mean(),
            n.sampled_mean(),
            n.sampled.1,
            n.in_setup_mean(),
            n.in_setup_little(),
            n.direct_mean(),
            n.probe.mean_latency().as_secs_f64() * 1e3,
            cache_size_for(m, 0.99).unwrap_or(0),
            n.probe.size_for(0.99).unwrap_or(0)
        ]);
    }
    t
}

/// Fig. 9, one case: P{N_v <= x} measured (at arrivals, over time) and estimated
/// (Poisson with the measured mean, and with λ x latency). Writes its CSV and plot;
/// returns its file stem.
fn nv_figure(dir: &Path, n: &NvResult) -> Result<String, LabError> {
    let m = n.probe.mean();
    let stem = format!(
        "nv_{}",
        n.case
            .panel
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            + &format!("_t{}", n.case.threshold)
    );
    let top = n
        .probe
        .at_arrival
        .len()
        .max(cache_size_for(m, 0.9999).unwrap_or(1))
        + 1;
    let mut csv = Table::new(
        [
            "x",
            "measured_at_arrivals",
            "measured_over_time",
            "poisson_mean_nv",
            "poisson_direct",
        ]
        .map(|c| Column::csv(c).format(Format::Fixed(6))),
    );
    let labels = [
        "measured, at arrivals",
        "measured, over time",
        "Poisson, mean of N_v",
        "Poisson, λ x latency",
    ];
    let mut series = SeriesSet::new();
    for x in 0..=top {
        let ys = [
            n.probe.cdf(x),
            n.probe.time_cdf(x),
            poisson_cdf(m, x),
            poisson_cdf(n.direct_mean(), x),
        ];
        csv.csv_row(cells![x, ys[0], ys[1], ys[2], ys[3]]);
        for (label, y) in labels.iter().zip(ys) {
            series.push(label, (x as f64, y, f64::NAN));
        }
    }
    write(dir, &format!("{stem}.csv"), &csv.csv())?;
    let title = format!(
        "Fig. 9 {}: P{{N_v <= x}}, λ = {:.0}/s, T = {}",
        n.case.panel, n.rate, n.case.threshold
    );
    plot(
        dir,
        &stem,
        PlotSpec {
            title: &title,
            x_label: "x (identifiers in use)",
            y_label: "P{N_v <= x}",
            log_y: false,
        },
        series.as_slice(),
    )?;
    Ok(stem)
}

/// Table I: per panel, the paper's rows and ours (a markdown table each); one CSV.
fn table_i(r: &XbindResults) -> (Vec<minijinja::Value>, Table) {
    let columns = || {
        let p = |md: &str, csv: &str| Column::new(md, csv).right().fixed(4, 6);
        [
            Column::csv("panel"),
            Column::md("source"),
            Column::csv("source"),
            Column::new("cache size X", "cache_size").right(),
            p("estimated", "estimated"),
            p("paper's reading P{N_v <= X}", "papers_reading"),
            p("measured", "measured"),
        ]
    };
    let mut panels = Vec::new();
    let mut all = Table::new(columns());
    for (panel, rows) in PAPER_TABLE_I {
        let mut t = Table::new(columns());
        for (x, e, m) in rows {
            t.md_row(cells!["paper", x, Value::Empty, e, m]);
            // The paper's numbers as printed.
            t.csv_row(cells![
                panel,
                "paper",
                x,
                Value::Empty,
                e.to_string(),
                m.to_string()
            ]);
        }
        if let Some(n) = r.nv.iter().find(|n| n.case.panel == panel) {
            let mean = n.probe.mean();
            for x in table_sizes(n) {
                t.row(cells![
                    panel,
                    format!("atmlab (λ = {:.0}/s)", n.rate),
                    "atmlab",
                    x,
                    estimated_hit_ratio(mean, x),
                    poisson_cdf(mean, x),
                    n.probe.hit_ratio(x)
                ]);
            }
        }
        panels.push(context! { panel => panel, table => t.markdown() });
        all.extend(t);
    }
    (panels, all)
}

/// Fig. 10: invocations per call, counted, and by the formula, against T.
fn invocations_table(r: &XbindResults) -> (Table, SeriesSet) {
    let num = |md: &str, csv: &str| Column::new(md, csv).right();
    let mut t = Table::new([
        num("T", "threshold"),
        num("λ /s", "rate").md_format(Format::Fixed(0)),
        num("calls", "calls"),
        num("not set up", "not_established"),
        num("requests", "requests"),
        num("messages", "messages"),
        Column::csv("commands"),
        num("re-sends", "retries"),
        Column::csv("identifier_commands"),
        Column::md("commands per message")
            .right()
            .format(Format::Fixed(2)),
        Column::md("identifier commands per call")
            .right()
            .format(Format::Fixed(2)),
        num("requests per call (x2)", "request_invocations_per_call").fixed(2, 4),
        num("switch per call (x2)", "switch_invocations_per_call").fixed(2, 4),
        num("counted per call", "invocations_per_call").fixed(2, 4),
        num("formula 4(1+3/T)", "formula_per_call").fixed(2, 4),
    ]);
    let mut series = SeriesSet::new();
    for i in &r.invocations {
        t.row(cells![
            i.threshold,
            i.rate,
            i.calls,
            i.not_established,
            i.requests,
            i.messages,
            i.commands,
            i.retries,
            i.identifier_commands,
            i.commands_per_message(),
            i.identifier_commands_per_call(),
            i.request_invocations_per_call(),
            i.switch_invocations_per_call(),
            i.invocations_per_call(),
            i.formula_per_call()
        ]);
        let x = f64::from(i.threshold);
        series.push(
            &format!("counted, λ = {:.0}/s", i.rate),
            (x, i.invocations_per_call(), f64::NAN),
        );
    }
    let mut ts: Vec<u32> = r.invocations.iter().map(|i| i.threshold).collect();
    ts.sort_unstable();
    ts.dedup();
    series.add(
        "4(1 + 3/T)",
        ts.iter()
            .map(|&t| (f64::from(t), invocations_per_s(1.0, HOPS, t), f64::NAN))
            .collect(),
    );
    series.add(
        "T = infinity: 4",
        ts.iter().map(|&t| (f64::from(t), 4.0, f64::NAN)).collect(),
    );
    (t, series)
}

/// Where a call's time goes (Fig. 7's trade), for T = 1 and T = 15 at every load both
/// were offered.
fn profile_table(r: &XbindResults) -> Table {
    let num = |md: &str, csv: &str| Column::new(md, csv).right();
    let mut t = Table::new([
        Column::new("manager", "manager"),
        num("offered /s", "offered_per_s").md_format(Format::Fixed(0)),
        num("setups /s", "setups_per_s").fixed(0, 1),
        num("mean latency ms", "mean_setup_ms").fixed(3, 4),
        num("queued ms per command", "queue_ms").fixed(3, 4),
        num("round trip ms per command", "round_trip_ms").fixed(3, 4),
        num("manager busy ms per call", "busy_per_call_ms").fixed(3, 4),
        num("messages per call", "messages_per_call").fixed(2, 3),
        num("commands per message", "commands_per_message").fixed(2, 3),
    ]);
    for c in profiled(r) {
        let f = c.profile();
        let p = &c.report;
        t.row(cells![
            &c.manager,
            p.offered_per_s,
            p.setups_per_s,
            p.mean_setup_ms,
            f.queue_ms,
            f.round_trip_ms,
            f.busy_per_call_ms,
            f.messages_per_call,
            f.commands_per_message
        ]);
    }
    t
}

/// The curve points of T = 1 and T = 15, in load order, T = 1 first at each load.
fn profiled(r: &XbindResults) -> Vec<&CurvePoint> {
    let mut v: Vec<&CurvePoint> = r
        .curves
        .iter()
        .filter(|c| c.manager == "xbind T=1" || c.manager == "xbind T=15")
        .collect();
    v.sort_by(|a, b| {
        a.report
            .offered_per_s
            .total_cmp(&b.report.offered_per_s)
            .then(a.manager.len().cmp(&b.manager.len()))
    });
    v
}

/// Fig. 7's ordering in words, from the profile: at the highest load offered to both T = 1
/// and T = 15, where each one's call time went, and which part differs most. Empty when
/// the run has no such load.
fn profile_summary(r: &XbindResults) -> String {
    use crate::report::verdict::sig;
    let of = |m: &str| -> Vec<&CurvePoint> { r.curves.iter().filter(|c| c.manager == m).collect() };
    let (t1, t15) = (of("xbind T=1"), of("xbind T=15"));
    let Some((a, b)) = t1
        .iter()
        .filter_map(|a| {
            t15.iter()
                .find(|b| b.report.offered_per_s == a.report.offered_per_s)
                .map(|b| (*a, *b))
        })
        .max_by(|x, y| {
            x.0.report
                .offered_per_s
                .total_cmp(&y.0.report.offered_per_s)
        })
    else {
        return String::new();
    };
    let (pa, pb) = (a.profile(), b.profile());
    let part = |c: &CurvePoint, p: &super::Profile| {
        format!(
            "{} set up {}/s at {} ms mean; a command waited {} ms in its aggregator and {} ms \
             for its answer; the manager was busy {} ms per call ({} messages per call)",
            c.manager,
            sig(c.report.setups_per_s),
            sig(c.report.mean_setup_ms),
            sig(p.queue_ms),
            sig(p.round_trip_ms),
            sig(p.busy_per_call_ms),
            sig(p.messages_per_call)
        )
    };
    let parts = [
        ("the wait in the aggregator", pa.queue_ms, pb.queue_ms),
        ("the round trip", pa.round_trip_ms, pb.round_trip_ms),
        (
            "the manager's busy time per call",
            pa.busy_per_call_ms,
            pb.busy_per_call_ms,
        ),
    ];
    let ratio = |x: f64, y: f64| {
        if x > 0.0 && y > 0.0 {
            (y / x).max(x / y)
        } else {
            1.0
        }
    };
    let (name, x, y) = parts
        .iter()
        .copied()
        .max_by(|p, q| ratio(p.1, p.2).total_cmp(&ratio(q.1, q.2)))
        .expect("three parts");
    format!(
        "At {}/s offered, the highest load both were offered: {}; {}. The part that differs \
         most between them is {} ({} ms with T = 1, {} ms with T = 15, a factor {}).",
        sig(a.report.offered_per_s),
        part(a, &pa),
        part(b, &pb),
        name,
        sig(x),
        sig(y),
        sig(ratio(x, y))
    )
}

/// The light-load latency of large T against the flush time-out.
fn flush_table(r: &XbindResults) -> Table {
    let num = |md: &str, csv: &str| Column::new(md, csv).right();
    let mut t = Table::new([
        num("T", "threshold"),
        num("flush time-out ms", "flush_ms").fixed(1, 3),
        num("offered /s", "offered_per_s").md_format(Format::Fixed(0)),
        num("calls", "established"),
        num("mean ms", "mean_setup_ms").fixed(3, 4),
        num("p50 ms", "p50_setup_ms").fixed(3, 4),
        num("p99 ms", "p99_setup_ms").fixed(3, 4),
    ]);
    for f in &r.flush_sweep {
        let p = &f.report;
        t.row(cells![
            f.threshold,
            f.flush_ms,
            p.offered_per_s,
            p.established,
            p.mean_setup_ms,
            p.p50_setup_ms,
            p.p99_setup_ms
        ]);
    }
    t
}

/// Writes `README.md`, the CSVs, `results.json` and the plots into `dir`.
pub fn write_report(dir: &Path, r: &XbindResults) -> Result<(), LabError> {
    report::create_dir(dir)?;
    let verdict_table = verdicts(r).write(dir)?;
    let baseline = baseline_table(r);
    write(dir, "baseline.csv", &baseline.csv())?;

    let (curves, series) = curves_table(r);
    write(dir, "throughput_delay.csv", &curves.csv())?;
    plot(
        dir,
        "throughput_delay",
        PlotSpec {
            title: "Figs. 6, 7, 11: mean setup latency against throughput (3 hops)",
            x_label: "call setups per second",
            y_label: "mean setup latency (ms)",
            log_y: true,
        },
        series.as_slice(),
    )?;

    let profile = profile_table(r);
    write(dir, "profile.csv", &profile.csv())?;
    let flush_sweep = flush_table(r);
    write(dir, "flush_sweep.csv", &flush_sweep.csv())?;

    let nv = nv_table(r);
    let mut nv_figures = Vec::new();
    for n in &r.nv {
        let stem = nv_figure(dir, n)?;
        nv_figures.push(context! { panel => n.case.panel, stem => stem });
    }
    write(dir, "nv_summary.csv", &nv.csv())?;

    let (table1_panels, table1) = table_i(r);
    write(dir, "table1.csv", &table1.csv())?;

    let (invocations, series) = invocations_table(r);
    write(dir, "invocations.csv", &invocations.csv())?;
    plot(
        dir,
        "invocations",
        PlotSpec {
            title: "Fig. 10: remote invocations per call against T (k = 3)",
            x_label: "message threshold T",
            y_label: "invocations per call (N / λ)",
            log_y: false,
        },
        series.as_slice(),
    )?;

    let capacity = capacity_table(r);
    write(dir, "capacity.csv", &capacity.csv())?;

    let simulated = simulated_table(r);
    write(dir, "simulated.csv", &simulated.csv())?;
    let mut sim_series = SeriesSet::new();
    for p in &r.simulated {
        if p.carried() {
            sim_series.push(
                &p.manager,
                (p.setups_per_s.mean, p.latency_s.mean * 1e3, f64::NAN),
            );
        }
    }
    if !sim_series.as_slice().is_empty() {
        plot(
            dir,
            "simulated_throughput_delay",
            PlotSpec {
                title: "Figs. 6-7 at the paper's costs (simulated control plane, paper-000)",
                x_label: "setups per second carried",
                y_label: "mean setup latency (ms)",
                log_y: true,
            },
            sim_series.as_slice(),
        )?;
    }

    let dim = &r.simulated_dimension;
    let (sim_nv, sim_table1, sim_invocations) = (
        sim_dimension::nv_table(dim),
        sim_dimension::table_i(dim),
        sim_dimension::invocations_table(dim),
    );
    write(dir, "simulated_nv.csv", &sim_nv.csv())?;
    write(dir, "simulated_table1.csv", &sim_table1.csv())?;
    write(dir, "simulated_invocations.csv", &sim_invocations.csv())?;

    let md = report::render(
        "xbind.md",
        TEMPLATE,
        context! {
            quick => r.quick,
            seconds => r.seconds,
            scale => SCALE,
            verdicts => verdict_table,
            flush_ms => r.flush_ms,
            paper_flush_s => PAPER_FLUSH_S,
            regions => paper_regions_scaled()
                .bounds
                .iter()
                .map(|b| crate::report::verdict::sig(*b))
                .collect::<Vec<_>>()
                .join(" and "),
            baseline => baseline.markdown(),
            curves => curves.markdown(),
            capacity => (!r.capacity_passes.is_empty()).then(|| capacity.markdown()),
            capacity_passes => r.capacity_passes.len(),
            profile => profile.markdown(),
            profile_summary => profile_summary(r),
            flush_sweep => flush_sweep.markdown(),
            nv => nv.markdown(),
            nv_figures => nv_figures,
            table1 => table1_panels,
            invocations => invocations.markdown(),
            simulated => simulated.markdown(),
            simulated_plot => !sim_series.as_slice().is_empty(),
            sim_nv => (!dim.nv.is_empty()).then(|| sim_nv.markdown()),
            sim_nv_runs => sim_dimension::runs(dim),
            sim_table1 => (!sim_table1.is_empty()).then(|| sim_table1.markdown()),
            sim_invocations => (!dim.invocations.is_empty()).then(|| sim_invocations.markdown()),
        },
    )?;
    write(dir, "README.md", &md)?;
    report::write_json(dir, "results.json", &results_json(r))
}

/// Everything measured, for `results.json`.
fn results_json(r: &XbindResults) -> serde_json::Value {
    json!({
        "paper": "xbind",
        "quick": r.quick,
        "seconds": r.seconds,
        "scale": SCALE,
        "flush_ms": r.flush_ms,
        "baseline": r.baseline.iter().map(|b| json!({
            "manager": b.manager, "calls": b.calls, "min_ms": b.min_ms, "mean_ms": b.mean_ms,
            "max_ms": b.max_ms, "p5_ms": b.p5_ms, "p95_ms": b.p95_ms,
        })).collect::<Vec<_>>(),
        "capacity_passes": r.capacity_passes.iter().map(|pass| pass.iter().map(|c| {
            let mut v = c.report.to_json();
            v["manager"] = json!(c.manager);
            v["threshold_during"] = json!(c.threshold);
            v
        }).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "curves": r.curves.iter().map(|c| {
            let mut v = c.report.to_json();
            v["manager"] = json!(c.manager);
            v["threshold_during"] = json!(c.threshold);
            let f = c.profile();
            v["queue_ms"] = json!(f.queue_ms);
            v["round_trip_ms"] = json!(f.round_trip_ms);
            v["busy_per_call_ms"] = json!(f.busy_per_call_ms);
            v["messages_per_call"] = json!(f.messages_per_call);
            v["commands_per_message"] = json!(f.commands_per_message);
            v
        }).collect::<Vec<_>>(),
        "nv": r.nv.iter().map(|n| json!({
            "panel": n.case.panel, "paper_rate": n.case.paper_rate, "threshold": n.case.threshold,
            "rate": n.rate, "port": n.port, "arrivals": n.probe.arrivals(),
            "mean_nv": n.probe.mean(), "mean_nv_over_time": n.probe.time_mean(),
            "mean_nv_sampled": n.sampled_mean(), "samples": n.sampled.1,
            "in_setup_sampled": n.in_setup_mean(), "in_setup_samples": n.in_setup.1,
            "in_setup_little": n.in_setup_little(),
            "established": n.report.established, "offered": n.report.offered,
            "measured_rate": n.measured_rate(), "direct_mean": n.direct_mean(),
            "gap_cv2": n.probe.gap_cv2(),
            "latency_ms": n.probe.mean_latency().as_secs_f64() * 1e3,
            "at_arrival": n.probe.at_arrival,
            "time_at_ps": n.probe.time_at,
        })).collect::<Vec<_>>(),
        "flush_sweep": r.flush_sweep.iter().map(|f| {
            let mut v = f.report.to_json();
            v["threshold"] = json!(f.threshold);
            v["flush_ms"] = json!(f.flush_ms);
            v
        }).collect::<Vec<_>>(),
        "simulated": r.simulated.iter().map(|p| json!({
            "manager": p.manager, "rate": p.rate,
            "setups_per_s": p.setups_per_s.mean, "setups_per_s_ci95": p.setups_per_s.ci95,
            "mean_setup_s": p.latency_s.mean, "mean_setup_s_ci95": p.latency_s.ci95,
            "p5_setup_s": p.quantiles_s.0.mean, "p95_setup_s": p.quantiles_s.1.mean,
            "blocking": p.blocking.mean,
        })).collect::<Vec<_>>(),
        "simulated_dimension": sim_dimension::to_json(&r.simulated_dimension),
        "invocations": r.invocations.iter().map(|i| json!({
            "threshold": i.threshold, "rate": i.rate, "calls": i.calls,
            "requests": i.requests, "messages": i.messages, "commands": i.commands,
            "retries": i.retries, "identifier_commands": i.identifier_commands,
            "not_established": i.not_established,
            "commands_per_message": i.commands_per_message(),
            "request_invocations_per_call": i.request_invocations_per_call(),
            "switch_invocations_per_call": i.switch_invocations_per_call(),
            "invocations_per_call": i.invocations_per_call(),
            "formula_per_call": i.formula_per_call(),
        })).collect::<Vec<_>>(),
    })
}

/// Figs. 6 and 7 at the paper's costs: every simulated point with its interval.
fn simulated_table(r: &XbindResults) -> Table {
    let mut t = Table::new([
        Column::new("manager", "manager"),
        Column::new("offered calls/s", "offered_per_s").right(),
        Column::new("setups/s", "setups_per_s").right().fixed(1, 3),
        Column::md("±"),
        Column::csv("setups_per_s_ci95").format(Format::Fixed(3)),
        Column::new("mean setup ms", "mean_setup_ms")
            .right()
            .fixed(1, 3),
        Column::md("± "),
        Column::csv("mean_setup_ms_ci95").format(Format::Fixed(3)),
        Column::new("5% ms", "p5_setup_ms").right().fixed(1, 3),
        Column::new("95% ms", "p95_setup_ms").right().fixed(1, 3),
        Column::new("blocked", "blocked").right().fixed(3, 4),
    ]);
    for p in &r.simulated {
        t.row(cells![
            &p.manager,
            p.rate,
            p.setups_per_s.mean,
            p.setups_per_s.ci95,
            p.setups_per_s.ci95,
            p.latency_s.mean * 1e3,
            p.latency_s.ci95 * 1e3,
            p.latency_s.ci95 * 1e3,
            p.quantiles_s.0.mean * 1e3,
            p.quantiles_s.1.mean * 1e3,
            p.blocking.mean
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_renders_every_section_and_opens_with_the_verdicts() {
        let r = super::super::verdicts::tests::results();
        let (dir, md) = crate::reproduce::written(|dir| write_report(dir, &r));
        assert!(
            md.starts_with(
                "# xbind (paper 000), reproduced\n\nGenerated by `atmlab reproduce xbind` in 1 s"
            ),
            "{md}"
        );
        // The paper's regions, scaled: 50 and 100 calls/s times 100.
        assert!(md.contains("bounds 5000 and 10000 calls/s"), "{md}");
        let verdicts_at = md.find("| Paper's item |").expect("the verdict table");
        assert!(
            verdicts_at < md.find("## Baseline").expect("the baseline"),
            "{md}"
        );
        assert!(md.contains("| differs |"), "{md}");
        assert!(
            md.contains("| atmlab, sequential | 10 | 0.400 | 0.630 | 9.000 | 0.500 | 0.700 |\n"),
            "{md}"
        );
        assert!(md.contains("### (b) medium load\n\n| source |"));
        assert!(md.contains("| paper | 5 | | 0.9529 | 0.9859 |\n"));
        assert!(md.contains("| 15 | 10.0 | 100 |"), "flush sweep row: {md}");
        // The profile's words come from its numbers: the highest load both T = 1 and
        // T = 15 were offered in the synthetic results is 40,000/s.
        assert!(
            md.contains("\n\nAt 40000/s offered, the highest load both were offered: xbind T=1 set up 40000/s at 0.4 ms mean;"),
            "{md}"
        );
        assert!(
            md.contains("The part that differs most between them is the wait in the aggregator (0.1 ms with T = 1, 1.5 ms with T = 15, a factor 15).\n\n### The light-load"),
            "{md}"
        );
        let csv = std::fs::read_to_string(dir.path().join("verdicts.csv")).unwrap();
        assert!(
            csv.contains("Fig. 7: T = 15 carries more than T = 1"),
            "{csv}"
        );
        let csv = std::fs::read_to_string(dir.path().join("table1.csv")).unwrap();
        assert!(csv.starts_with("panel,source,cache_size,estimated,papers_reading,measured\n(b) medium load,paper,5,,0.9529,0.9859\n"));
        // Without capacity passes, no section for them.
        assert!(!md.contains("### Capacity, measured again"), "{md}");
    }

    /// The capacity passes get their section: each manager's peak in the sweep, then
    /// the points of each pass.
    #[test]
    fn the_capacity_passes_are_shown_beside_the_sweeps_peak() {
        let mut r = super::super::verdicts::tests::results();
        let mut again = r
            .curves
            .iter()
            .find(|c| c.manager == "xbind T=4" && c.report.offered_per_s == 40_000.0)
            .expect("a point")
            .clone();
        again.report.setups_per_s = 31_000.0;
        r.capacity_passes = vec![vec![again]];
        let (dir, md) = crate::reproduce::written(|dir| write_report(dir, &r));
        assert!(md.contains("### Capacity, measured again"), "{md}");
        assert!(md.contains("After the sweep, 1 more pass(es)"), "{md}");
        let csv = std::fs::read_to_string(dir.path().join("capacity.csv")).unwrap();
        assert!(
            csv.contains("xbind T=4,sweep (peak),40000.0,33000.0,")
                && csv.contains("xbind T=4,1,40000.0,31000.0,"),
            "{csv}"
        );
    }
}
