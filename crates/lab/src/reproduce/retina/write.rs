//! Paper 001's report (ReTINA): the setup-time and §3 tables and plots, the verdicts and
//! `results.json`, written from a [`RetinaResults`]; the measurement is in the parent.

#[allow(clippy::wildcard_imports)] // reason: the report reads the parent's whole vocabulary
use super::*;

fn counts_text(c: &Counts, calls: u64) -> String {
    c.iter()
        .map(|(k, v)| format!("{k} {:.1}", *v as f64 / calls.max(1) as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

/// §4.3: the paper's two points beside every point we measured, and the curves.
fn setup_table(r: &RetinaResults) -> (Table, SeriesSet) {
    let ms = |md: &str, csv: &str| Column::new(md, csv).right().fixed(3, 4);
    let mut t = Table::new([
        Column::md("manager"),
        Column::csv("manager"),
        Column::new("switches", "switches").right(),
        Column::new("calls", "calls").right(),
        ms("mean ms", "mean_ms"),
        ms("p50 ms", "p50_ms"),
        ms("p99 ms", "p99_ms"),
        Column::md("invocations per setup"),
        Column::csv("invocations_per_setup").format(Format::Fixed(2)),
        Column::csv("by_interface"),
    ]);
    let e = Value::Empty;
    t.md_row(cells![
        "paper, Alcin (sequential)",
        1u64,
        e.clone(),
        "28",
        e.clone(),
        e.clone(),
        "13 (9 + 4)"
    ]);
    t.md_row(cells![
        "paper, Alcin (sequential, estimated)",
        3u64,
        e.clone(),
        "44",
        e.clone(),
        e,
        "21 (9 + 3 x 4)"
    ]);
    let mut series = SeriesSet::new();
    for p in &r.setup {
        let counts = counts_text(&p.invocations, p.calls);
        t.row(cells![
            format!("atmlab, {}", p.manager),
            &p.manager,
            p.switches,
            p.calls,
            p.mean_ms,
            p.p50_ms,
            p.p99_ms,
            format!("{:.1} ({counts})", p.total_invocations()),
            p.total_invocations(),
            counts.replace(", ", ";")
        ]);
        series.push(&p.manager, (p.switches as f64, p.mean_ms, f64::NAN));
    }
    (t, series)
}

/// The simulated sequential setup's mean over `switches`, ms (NaN when not simulated).
fn sim_ms(r: &RetinaResults, switches: usize) -> f64 {
    r.sim
        .iter()
        .find(|p| p.mode == "sequential" && !p.colocated && p.switches == switches)
        .map_or(f64::NAN, |p| p.setup_ms.mean)
}

/// §4.3 in the simulator: the paper's figures beside the simulated rows.
fn sim_table(r: &RetinaResults) -> Table {
    let mut t = Table::new([
        Column::md("configuration"),
        Column::csv("manager"),
        Column::new("switches", "switches").right(),
        Column::md("mean ms (95% CI)"),
        Column::csv("mean_ms").format(Format::Fixed(4)),
        Column::csv("mean_ms_ci95").format(Format::Fixed(4)),
        Column::new("p99 ms", "p99_ms").right().fixed(2, 4),
        Column::new("invocations per call", "invocations_per_call")
            .right()
            .fixed(1, 2),
    ]);
    let e = Value::Empty;
    for (what, switches, ms, inv) in [
        ("paper, Alcin (sequential)", 1u64, "28", "13 (setup)"),
        ("paper, Alcin, EML-CP co-located", 1, "20", "9 (setup)"),
        (
            "paper, Alcin (sequential, estimated)",
            3,
            "44",
            "21 (setup)",
        ),
    ] {
        t.md_row(cells![what, switches, ms, e.clone(), inv]);
    }
    for p in &r.sim {
        t.row(cells![
            p.label(),
            p.label(),
            p.switches,
            crate::report::verdict::show(&p.setup_ms),
            p.setup_ms.mean,
            p.setup_ms.ci95,
            p.p99_ms,
            p.invocations
        ]);
    }
    t
}

/// Writes README.md, the CSVs, the plot and results.json.
pub fn write_report(dir: &Path, r: &RetinaResults) -> Result<(), LabError> {
    report::create_dir(dir)?;
    let (setup, series) = setup_table(r);
    write(dir, "setup_time.csv", &setup.csv())?;
    let managers = series.labels();
    let slopes: Vec<minijinja::Value> = managers
        .iter()
        .map(|m| context! { manager => m, slope => r.slope_of(m) })
        .collect();
    let (emulated, bare): (Vec<Series>, Vec<Series>) = series
        .into_vec()
        .into_iter()
        .partition(|s| s.label.contains("emulated ORB"));
    let spec = |title| PlotSpec {
        title,
        x_label: "switches on the path",
        y_label: "mean setup time (ms)",
        log_y: false,
    };
    plot(
        dir,
        "setup_time",
        spec("§4.3: setup time, nothing injected"),
        &bare,
    )?;
    plot(
        dir,
        "setup_time_emulated",
        spec("§4.3: setup time, emulated ORB (20 ms per invocation)"),
        &emulated,
    )?;
    let mut paper = SeriesSet::new();
    paper.add(
        "paper, Alcin sequential (Orbix)",
        vec![(1.0, 28.0, f64::NAN), (3.0, 44.0, f64::NAN)],
    );
    plot(
        dir,
        "setup_time_paper",
        PlotSpec {
            title: "§4.3, the paper (Alcin, Orbix)",
            y_label: "setup time (ms)",
            ..spec("")
        },
        paper.as_slice(),
    )?;

    let mut depths = Table::new([
        Column::new("mode", "mode"),
        Column::new("NML-CP levels", "depth").right(),
        Column::new("total", "total").right(),
        Column::md("by interface"),
        Column::csv("by_interface"),
    ]);
    for (mode, depth, c) in &r.depths {
        let total: u64 = c.values().sum();
        let counts = counts_text(c, 1);
        depths.row(cells![
            mode,
            *depth,
            total,
            &counts,
            counts.replace(", ", ";")
        ]);
    }
    write(dir, "invocations.csv", &depths.csv())?;

    let mut interfaces = Table::new([
        Column::new("interface", "interface"),
        Column::new("security", "security"),
        Column::new("pairs", "pairs").right(),
        Column::new("invocations per create + delete", "invocations_per_pair").right(),
        Column::new("operations/s", "ops_per_s").right().fixed(0, 1),
        Column::new("median create + delete µs", "p50_pair_us")
            .right()
            .fixed(1, 2),
    ]);
    for i in &r.interfaces {
        interfaces.row(cells![
            &i.interface,
            if i.tls { "mutual TLS" } else { "plain text" },
            i.pairs,
            i.invocations_per_pair,
            i.ops_per_s,
            i.p50_pair_us
        ]);
    }
    write(dir, "switch_interface.csv", &interfaces.csv())?;

    let sim_table = sim_table(r);
    write(dir, "sim_setup.csv", &sim_table.csv())?;

    let judged = verdicts(r);
    // Each verdict by the first word of its item's claim, for the discussion's
    // conditional sentences.
    let verdict_of = |prefix: &str| {
        judged
            .checks()
            .iter()
            .find(|c| c.item.starts_with(prefix))
            .map_or("not applicable", |c| c.verdict.name())
    };
    let discussion = context! {
        proxy => verdict_of("§3.4"),
        snmp => verdict_of("§3.6"),
        orb => verdict_of("§3.3 rows 9-10"),
        colocated => verdict_of("§4.3: the EML-CP co-located"),
        transport => verdict_of("§4.3: about 90%"),
        parallel_emulated => verdict_of("§4.3: parallel setup grows less per switch than sequential (emulated"),
        parallel_bare => verdict_of("§4.3: parallel setup grows less per switch than sequential (nothing"),
        per_switch => verdict_of("§4.3: invocations per switch"),
        sim_one => verdict_of("§4.3 (sim, paper-001): setup through one switch"),
        sim_three => verdict_of("§4.3 (sim, paper-001): setup across three switches"),
        sim_per_switch => verdict_of("§4.3 (sim, paper-001): time added per switch"),
        sim_colocated => verdict_of("§4.3 (sim, paper-001): the EML-CP co-located"),
        sim_parallel => verdict_of("§4.3 (sim, paper-001): parallel setup"),
    };
    let verdicts = judged.write(dir)?;
    let profile = atmlab_models::control::CostProfile::named("paper-001")
        .ok_or_else(|| err("the report", "no paper-001 profile"))?;
    let ms = |d: atmlab_core::time::Duration| d.as_secs_f64() * 1e3;
    let md = report::render(
        "retina.md",
        TEMPLATE,
        context! {
            quick => r.quick,
            seconds => r.seconds,
            verdicts => verdicts,
            v => discussion,
            tolerance => RATIO_TOLERANCE * 100.0,
            max_path => MAX_PATH,
            rtt_ms => u64::try_from(EMULATED_RTT.as_millis()).unwrap_or(u64::MAX),
            setup => setup.markdown(),
            slopes => slopes,
            depths => depths.markdown(),
            interfaces => interfaces.markdown(),
            sim => sim_table.markdown(),
            sim_scenario => sim::SCENARIO_PATH,
            sim_replications => r.sim.first().map_or(0, |p| p.setup_ms.n),
            sim_seq1_ms => sim_ms(r, 1),
            sim_seq3_ms => sim_ms(r, 3),
            sim_rtt_ms => ms(profile.round_trip(profile.switch_per_command)),
            sim_switch_ms => ms(profile.switch_per_command),
            sim_step_ms => ms(profile.manager_step),
            sim_route_ms => ms(profile.route_work),
        },
    )?;
    write(dir, "README.md", &md)?;
    let json = json!({
        "quick": r.quick,
        "seconds": r.seconds,
        "setup": r.setup.iter().map(|p| json!({
            "manager": p.manager, "switches": p.switches, "calls": p.calls,
            "mean_ms": p.mean_ms, "mean_ms_ci95": p.mean().ci95, "p50_ms": p.p50_ms, "p99_ms": p.p99_ms,
            "invocations_per_setup": p.total_invocations(),
            "invocations": p.invocations,
        })).collect::<Vec<_>>(),
        "slopes_ms_per_switch": managers.iter().map(|m| (m.clone(), json!(r.slope_of(m)))).collect::<serde_json::Map<_, _>>(),
        "fitted_slopes_ms_per_switch": managers.iter().map(|m| {
            let e = r.slope_estimate_of(m);
            (m.clone(), json!({"mean": e.mean, "ci95": e.ci95}))
        }).collect::<serde_json::Map<_, _>>(),
        "depths": r.depths.iter().map(|(m, d, c)| json!({"mode": m, "depth": d, "invocations": c})).collect::<Vec<_>>(),
        "interfaces": r.interfaces.iter().map(|i| json!({
            "interface": i.interface, "tls": i.tls, "pairs": i.pairs,
            "mean_pair_us": i.pair_us.mean, "mean_pair_us_ci95": i.pair_us.ci95, "invocations_per_pair": i.invocations_per_pair,
            "ops_per_s": i.ops_per_s, "p50_pair_us": i.p50_pair_us,
        })).collect::<Vec<_>>(),
        "sim": r.sim.iter().map(|p| json!({
            "manager": p.label(), "mode": p.mode, "colocated": p.colocated, "switches": p.switches,
            "mean_ms": p.setup_ms.mean, "mean_ms_ci95": p.setup_ms.ci95, "replications": p.setup_ms.n,
            "p99_ms": p.p99_ms, "invocations_per_call": p.invocations,
        })).collect::<Vec<_>>(),
        "paper": {"alcin_one_switch_ms": 28.0, "alcin_colocated_ms": 20.0, "alcin_three_switches_ms": 44.0, "orb_share": 0.9,
                  "jorb_rpc_per_s": 418, "socket_rpc_per_s": 1818, "hybrid_rpc_per_s": 97, "snmp_per_s": 50},
    });
    report::write_json(dir, "results.json", &json)
}
