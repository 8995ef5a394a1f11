//! The verdicts of paper 001's reproduction: each of the paper's claims in §3 and §4
//! against this run's numbers, by the criteria of [`crate::report::verdict`].

use std::time::Duration as StdDuration;

use atmlab_sim::stats::Estimate;

use super::{
    COLOCATED, EMULATED_RTT, GRPC, IN_PROCESS, MAX_PATH, PROXY, RAW, RetinaResults, SNMP, label,
};
use crate::report::Verdicts;

/// How close a ratio of ours must come to the paper's to reproduce it (relative), when
/// the paper's value is not inside our interval. Ratios (between interfaces, between
/// configurations) are what can carry across machines 30 years apart; milliseconds are
/// not compared.
pub const RATIO_TOLERANCE: f64 = 0.10;

/// `a / b` with a 95% interval by the delta method (independent estimates).
fn ratio(a: &Estimate, b: &Estimate) -> Estimate {
    let r = a.mean / b.mean;
    let rel = ((a.ci95 / a.mean).powi(2) + (b.ci95 / b.mean).powi(2)).sqrt();
    Estimate {
        mean: r,
        ci95: r.abs() * rel,
        n: a.n.min(b.n),
    }
}

/// Every claim of the paper against this run, each verdict computed by its criterion
/// ([`crate::report::verdict`]).
pub fn verdicts(r: &RetinaResults) -> Verdicts {
    use crate::report::verdict::{self as v, Check, Direction, Relation};
    let mut out = Verdicts::new();
    let tls = r.interface(GRPC, true).is_some();
    let missing = |item: &str, paper: &str, what: &str| {
        Check::not_applicable(item, paper, format!("not measured in this run ({what})"))
    };

    // §3.3: the ORB against sockets, each under the run's security.
    let item = "§3.3 rows 9-10: the ORB against sockets (speed-up of sockets)";
    let paper = "4.35 (1,818 vs 418 RPC/s)";
    out.push(match (r.interface(GRPC, tls), r.interface(RAW, tls)) {
        (Some(g), Some(s)) => v::value(
            item,
            1818.0 / 418.0,
            &ratio(&g.pair_us, &s.pair_us),
            RATIO_TOLERANCE,
        )
        .or_shape(v::order(
            item,
            "sockets faster",
            ("raw TCP", &s.pair_us),
            Relation::Less,
            ("gRPC", &g.pair_us),
        ))
        .with_paper(paper),
        _ => missing(item, paper, "gRPC or raw TCP"),
    });
    let item = "§3.3 rows 1-4: the server on the switch against on a workstation";
    let paper = "7.6x (ORB), 5.6x (sockets) faster on the workstation";
    out.push(match (r.interface(IN_PROCESS, false), r.interface(GRPC, tls)) {
        (Some(w), Some(g)) => Check::new(
            item,
            paper,
            format!(
                "server's own work {} µs per create + delete, {}% of one over gRPC",
                v::sig(w.pair_us.mean),
                v::sig(100.0 * w.pair_us.mean / g.pair_us.mean)
            ),
            crate::report::Verdict::NotApplicable,
            "no switch processor here: every server shares the machine's cores, so where it runs cannot change its speed",
        ),
        _ => missing(item, paper, "the in-process row"),
    });
    out.push(Check::not_applicable(
        "§3.3 rows 9/11, 10/12: a JIT against an interpreter",
        "2.6x (ORB), 1.8x (sockets)",
        "atmlab is compiled Rust: no virtual machine to compare",
    ));
    out.push(Check::not_applicable(
        "§3.3 rows 9/15: OrbixWeb against JORB",
        "1.4x (600 vs 418 RPC/s)",
        "one ORB here (gRPC through tonic)",
    ));
    let item = "§3.4 row 15: a proxy before sockets against the ORB to the switch";
    let paper = "6.1x faster (97 vs 16 RPC/s)";
    out.push(match (r.interface(GRPC, tls), r.interface(PROXY, tls)) {
        (Some(g), Some(p)) => v::value(
            item,
            97.0 / 16.0,
            &ratio(&g.pair_us, &p.pair_us),
            RATIO_TOLERANCE,
        )
        .or_shape(v::order(
            item,
            "the proxy faster",
            ("proxy", &p.pair_us),
            Relation::Less,
            ("gRPC", &g.pair_us),
        ))
        .with_paper(paper),
        _ => missing(item, paper, "gRPC or the proxy"),
    });
    out.push(Check::not_applicable(
        "§3.5 rows 16-17: the server in C against Java",
        "2.6x (proxy), 5x (direct)",
        "one implementation language here",
    ));
    let item = "§3.6, §4.1: SNMP against the connection server, same security";
    let paper = "12x slower (50 vs 600 per s)";
    out.push(match (r.interface(SNMP, false), r.interface(RAW, false)) {
        (Some(n), Some(s)) => v::value(
            item,
            600.0 / 50.0,
            &ratio(&n.pair_us, &s.pair_us),
            RATIO_TOLERANCE,
        )
        .or_shape(v::order(
            item,
            "SNMP slower",
            ("SNMP-like", &n.pair_us),
            Relation::Greater,
            ("raw TCP", &s.pair_us),
        ))
        .with_paper(paper),
        _ => missing(item, paper, "the SNMP-like or plain-text raw TCP row"),
    });

    // §4.3: setup time.
    let seq = "tina sequential";
    let par = "tina parallel";
    let at = |m: &str, l: usize| r.point(m, l);
    let item = "§4.3: invocations per switch crossed, sequential";
    let paper = "4 (Alcin -> EML-CP)";
    out.push(match (at(seq, 1), at(seq, MAX_PATH)) {
        (Some(a), Some(b)) => {
            let per = (b.total_invocations() - a.total_invocations()) / (MAX_PATH - 1) as f64;
            v::value(item, 4.0, &v::point(per), 0.0).with_paper(paper)
        }
        _ => missing(item, paper, "1 and 8 switches"),
    });
    let item = "§4.3: sequential setup time grows with the switches crossed";
    let points: Vec<(f64, Estimate)> = r
        .setup
        .iter()
        .filter(|p| p.manager == seq)
        .map(|p| (p.switches as f64, p.mean()))
        .collect();
    out.push(v::trend(
        item,
        "in proportion (8 ms per switch)",
        &points,
        Direction::Increasing,
    ));
    let emulated_seq = label(seq, EMULATED_RTT);
    let rtt_ms = EMULATED_RTT.as_secs_f64() * 1e3;
    let item = "§4.3: time per switch in invocations' worth, sequential (emulated ORB)";
    let slope = r.slope_estimate_of(&emulated_seq);
    out.push(if slope.n >= 2 {
        let worth = Estimate {
            mean: slope.mean / rtt_ms,
            ci95: slope.ci95 / rtt_ms,
            n: slope.n,
        };
        v::value(item, 4.0, &worth, RATIO_TOLERANCE)
            .with_paper("4 (8 ms per switch / 2 ms per invocation)")
    } else {
        missing(item, "4 (8 ms / 2 ms)", "the emulated sweep")
    });
    let item = "§4.3: about 90% of a setup is transport (1 switch)";
    out.push(match (at(seq, 1), r.interface(GRPC, tls), r.interface(IN_PROCESS, false)) {
        (Some(p), Some(g), Some(w)) => {
            // Transport: the remote invocations a setup makes, each costing what one
            // gRPC switch operation costs less the switch's own work (§3); the rest of
            // the setup time is the performers' own work and scheduling.
            let remote: u64 = p
                .invocations
                .iter()
                .filter(|(k, _)| k.as_str() != atmlab_control::tina::iface::NML_EML_LOCAL)
                .map(|(_, n)| n)
                .sum();
            let per_setup = remote as f64 / p.calls.max(1) as f64;
            let invocation_ms = (g.pair_us.mean - w.pair_us.mean) / 2.0 / 1e3;
            let share = per_setup * invocation_ms / p.mean().mean;
            if share > 1.0 {
                // One §3 operation costs more than a setup's share of its invocations:
                // the chain's invocations are cheaper than the probe's (warm connections,
                // smaller messages), so this estimate cannot split the setup.
                Check::new(
                    item,
                    "≈ 90% in the ORB",
                    format!("estimate {} of the setup", v::sig(share)),
                    crate::report::Verdict::NotApplicable,
                    format!(
                        "{} invocations x {} ms (one §3 gRPC operation less the switch's work) exceed the setup's {} ms: the probe's invocation is not the chain's, and nothing here measures the chain's alone",
                        v::sig(per_setup),
                        v::sig(invocation_ms),
                        v::sig(p.mean().mean)
                    ),
                )
            } else {
                let mut c = v::value(item, 0.9, &v::point(share), RATIO_TOLERANCE)
                    .with_paper("≈ 90% in the ORB");
                c.why = format!(
                    "{}; transport = {} invocations x {} ms (one gRPC operation less the switch's work), against {} ms",
                    c.why,
                    v::sig(per_setup),
                    v::sig(invocation_ms),
                    v::sig(p.mean().mean)
                );
                c
            }
        }
        _ => missing(item, "≈ 90%", "1 switch, gRPC or the in-process row"),
    });
    let item = "§4.3: the EML-CP co-located with its caller (1 switch)";
    let paper = "1.4x faster (28 vs 20 ms)";
    out.push(match (at(seq, 1), at(COLOCATED, 1)) {
        (Some(remote), Some(local)) => {
            let (a, b) = (remote.mean(), local.mean());
            v::value(item, 1.4, &ratio(&a, &b), RATIO_TOLERANCE)
                .or_shape(v::order(
                    item,
                    "co-located faster",
                    ("co-located", &b),
                    Relation::Less,
                    ("remote", &a),
                ))
                .with_paper(paper)
        }
        _ => missing(item, paper, "the co-located configuration"),
    });
    sim_verdicts(r, &mut out);
    for (delay, how) in [
        (EMULATED_RTT, "emulated ORB"),
        (StdDuration::ZERO, "nothing injected"),
    ] {
        let item = format!("§4.3: parallel setup grows less per switch than sequential ({how})");
        let (s, p) = (
            r.slope_estimate_of(&label(seq, delay)),
            r.slope_estimate_of(&label(par, delay)),
        );
        out.push(if s.n >= 2 && p.n >= 2 {
            v::order(
                item,
                "parallelism removes the per-switch term",
                ("parallel", &p),
                Relation::Less,
                ("sequential", &s),
            )
        } else {
            missing(&item, "predicted", how)
        });
    }
    out
}

/// §4.3 in the simulator: the same TINA cores at the paper-001 costs (Table 3.3's cost
/// per invocation, nothing fitted to §4.3), in milliseconds against the paper's, each
/// within [`RATIO_TOLERANCE`] or with the paper's value inside our interval.
fn sim_verdicts(r: &RetinaResults, out: &mut Verdicts) {
    use crate::report::verdict::{self as v, Check, Relation};
    let at = |mode: &str, colocated: bool, switches: usize| {
        r.sim
            .iter()
            .find(|p| p.mode == mode && p.colocated == colocated && p.switches == switches)
    };
    let missing =
        |item: &str, paper: &str| Check::not_applicable(item, paper, "not simulated in this run");
    let (s1, s3) = (at("sequential", false, 1), at("sequential", false, 3));
    let counted = |c: Check, p: &super::SimPoint| {
        let mut c = c;
        c.why = format!(
            "{}; {} remote invocations per call here (setup and release)",
            c.why,
            v::sig(p.invocations)
        );
        c
    };
    let item = "§4.3 (sim, paper-001): setup through one switch, sequential";
    let paper = "28 ms (Alcin: 13 invocations of about 2 ms)";
    out.push(match s1 {
        Some(p) => counted(
            v::value(item, 28.0, &p.setup_ms, RATIO_TOLERANCE).with_paper(paper),
            p,
        ),
        None => missing(item, paper),
    });
    let item = "§4.3 (sim, paper-001): setup across three switches, sequential";
    let paper = "≈ 44 ms (estimated: 20 + 3 x 8 ms)";
    out.push(match s3 {
        Some(p) => counted(
            v::value(item, 44.0, &p.setup_ms, RATIO_TOLERANCE).with_paper(paper),
            p,
        ),
        None => missing(item, paper),
    });
    let item = "§4.3 (sim, paper-001): time added per switch, sequential";
    let paper = "8 ms (4 invocations x 2 ms)";
    out.push(match (s1, s3) {
        (Some(a), Some(b)) => {
            // Half the difference of two independent estimates.
            let per = Estimate {
                mean: (b.setup_ms.mean - a.setup_ms.mean) / 2.0,
                ci95: a.setup_ms.ci95.hypot(b.setup_ms.ci95) / 2.0,
                n: a.setup_ms.n.min(b.setup_ms.n),
            };
            v::value(item, 8.0, &per, RATIO_TOLERANCE).with_paper(paper)
        }
        _ => missing(item, paper),
    });
    let item = "§4.3 (sim, paper-001): the EML-CP co-located (1 switch)";
    let paper = "1.4x faster (28 vs 20 ms)";
    out.push(match (s1, at("sequential", true, 1)) {
        (Some(remote), Some(local)) => v::value(
            item,
            1.4,
            &ratio(&remote.setup_ms, &local.setup_ms),
            RATIO_TOLERANCE,
        )
        .or_shape(v::order(
            item,
            "co-located faster",
            ("co-located", &local.setup_ms),
            Relation::Less,
            ("remote", &remote.setup_ms),
        ))
        .with_paper(paper),
        _ => missing(item, paper),
    });
    let item = "§4.3 (sim, paper-001): parallel setup across three switches";
    let paper = "faster than sequential (predicted)";
    out.push(match (s3, at("parallel", false, 3)) {
        (Some(seq), Some(par)) => v::order(
            item,
            paper,
            ("parallel", &par.setup_ms),
            Relation::Less,
            ("sequential", &seq.setup_ms),
        ),
        _ => missing(item, paper),
    });
}
