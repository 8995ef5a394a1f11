//! `atmlab`: the one command-line entry point of the atmlab laboratory.
//!
//! This crate is argument parsing and dispatch only (DESIGN.md §3): every command calls
//! into a library crate, and `--help` shows the whole laboratory.

/// Prints a line on standard output like `println!`, except that a standard output
/// nobody reads any more (`atmlab switch serve ... | head -1`, a supervisor that closed
/// the pipe) is not fatal: `println!` panics on the next line, which would take a running
/// server down; servers print with this.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

mod audit;
mod certs;
mod cm;
mod cmclient;
mod dashboard;
mod host;
mod install;
mod live;
mod names;
mod net;
mod reproduce;
mod sim;
mod smds;
mod soak;
mod switch;
mod wire;

use std::process::ExitCode;

/// mimalloc instead of glibc's allocator: under a high call rate the live parts (gRPC,
/// TLS, per-call tasks) allocate and free small blocks from several threads, and a profile
/// of an overloaded run spent a large share of its time in glibc malloc and free
/// (`malloc_consolidate` among them). The figures are in docs/performance.md.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

/// An open laboratory for connection-oriented broadband (ATM) networks.
#[derive(Debug, Parser)]
#[command(name = "atmlab", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// More logging: -v shows info, -vv debug, -vvv trace (RUST_LOG, if set, decides).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Less logging: -q shows errors only, -qq nothing (RUST_LOG, if set, decides).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "verbose")]
    quiet: u8,
    /// How log lines are written on stderr: text (coloured on a terminal only) or json (one
    /// object per line, with level, target and fields).
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: live::LogFormat,
    /// The data directory: the lab's certificates (DATA/certs), journals, net.json and SMDS
    /// state. A running network (up, net up, smds net up, demo, soak) holds it alone.
    #[arg(
        long,
        global = true,
        env = "ATMLAB_DATA",
        default_value = "atmlab-data"
    )]
    data: std::path::PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Wire formats: HEC, AAL5 segmentation and reassembly, cell decoding, captures.
    Wire(wire::WireArgs),
    /// Discrete-event simulation: run, check and list scenarios.
    Sim(sim::SimArgs),
    /// Regenerate a paper's tables and figures into reports/PAPER, beside the paper's numbers.
    Reproduce(reproduce::ReproduceArgs),
    /// Run a software ATM switch and its SwitchServer, or query one.
    Switch(switch::SwitchArgs),
    /// Run or query the name service.
    Names(names::NamesArgs),
    /// Check a topology file, or start its whole network on loopback.
    Net(net::NetArgs),
    /// Attach an end system to a switch port; send or receive AAL5 frames.
    Host(host::HostArgs),
    /// The lab's certificate authority: certificates for mutual TLS.
    Certs(certs::CertsArgs),
    /// Connection managers: run one (sequential, xbind or tina) over running switch
    /// servers, size its caches, or set up, change and release connections through one.
    Cm(cm::CmArgs),
    /// Generate Poisson calls against a connection manager and measure setup latency.
    Callgen(cm::CallgenArgs),
    /// SMDS connectionless servers: serve, send, receive, a whole network on loopback.
    Smds(smds::SmdsArgs),
    /// Start a whole network, run calls and traffic through it, and report.
    Demo(cm::DemoArgs),
    /// Start a network and a connection manager and keep them running until Ctrl-C.
    Up(cm::UpArgs),
    /// Check a running network: managers' connections against the switches, port books.
    Audit(audit::AuditArgs),
    /// Serve the live dashboard of a running network (topology, connections, calls,
    /// counters) in the browser.
    Dashboard(dashboard::DashboardArgs),
    /// A long run at a high sustained call rate, ending with the audit: no leaks.
    Soak(soak::SoakArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions(install::CompletionsArgs),
    /// Write the man pages, generated from this command line's definition.
    Man(install::ManArgs),
}

/// Prints a command's error with its context chain and maps it to exit status 2. When
/// the command failed against a server that speaks TLS while it spoke plain text, or
/// the other way round, that is the error, in one line with what to pass.
fn report(name: &str, r: anyhow::Result<ExitCode>) -> ExitCode {
    match r {
        Ok(code) => code,
        Err(e) => {
            match live::tls_mismatch() {
                Some(line) => eprintln!("atmlab {name}: error: {line}"),
                None => eprintln!("atmlab {name}: error: {}", bounded(&chain(&e))),
            }
            ExitCode::from(2)
        }
    }
}

/// The longest word an error message shows whole: longer than any path or address a
/// person types, far shorter than a pasted file.
const LONGEST_WORD: usize = 256;

/// `message` with every word (a run without spaces) longer than [`LONGEST_WORD`] cut
/// to its first 64 characters and a count of the rest: errors quote the input they
/// refuse, and an input of a megabyte must not come back whole (issue 24, item 7).
fn bounded(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(4 * LONGEST_WORD));
    let mut rest = message;
    while !rest.is_empty() {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (word, after) = rest.split_at(end);
        if word.chars().count() > LONGEST_WORD {
            let head: String = word.chars().take(64).collect();
            let more = word.len() - head.len();
            out.push_str(&format!("{head}... ({more} more bytes)"));
        } else {
            out.push_str(word);
        }
        let gap = after.len() - after.trim_start().len();
        out.push_str(&after[..gap]);
        rest = &after[gap..];
    }
    out
}

/// An error and its causes, "a: b: c", each cause once: a layer whose message already
/// ends with its cause's text (an OS error quoted in a context) does not repeat it.
fn chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.is_empty() {
            out = text;
        } else if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

/// Every command runs without transparent huge pages (unless `MIMALLOC_ALLOW_THP` says
/// otherwise). mimalloc asks for them on its arenas, and the kernel then zeroes a whole
/// 2 MiB page the first time any byte of it is touched, on the thread that touched it.
/// A simulation's working set is small (an event set, a few queues, histograms of a few
/// hundred KiB) and gains nothing measurable from fewer TLB misses, but each
/// replication's fresh allocations touched new huge pages, and zeroing them showed in the
/// M/M/1 benchmark's wall time. A live server's memory grows with its load (a switch
/// server's memory of answers, a manager's calls), and each 2 MiB zeroing stalled the
/// task that touched it: `atmlab up` under `callgen --stream` spent a fifth more CPU per
/// call with them and its mean setup latency tripled (docs/performance.md has both).
fn no_huge_pages() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return;
    }
    // A refusal (an old kernel) only costs the time above.
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}

fn main() -> ExitCode {
    no_huge_pages();
    let cli = Cli::parse();
    live::set_verbosity(i16::from(cli.verbose) - i16::from(cli.quiet));
    live::set_data_dir(cli.data);
    live::set_log_format(cli.log_format);
    match cli.command {
        Command::Wire(args) => match wire::run(args) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("atmlab wire: error: {}", bounded(&chain(&e)));
                ExitCode::from(2)
            }
        },
        Command::Sim(args) => report("sim", sim::run(args)),
        Command::Reproduce(args) => report("reproduce", reproduce::run(args)),
        Command::Switch(args) => report("switch", switch::run(args)),
        Command::Names(args) => report("names", names::run(args)),
        Command::Net(args) => report("net", net::run(args)),
        Command::Host(args) => report("host", host::run(args)),
        Command::Certs(args) => report("certs", certs::run(args)),
        Command::Cm(args) => report("cm", cm::cm(args)),
        Command::Callgen(args) => report("callgen", cm::callgen(args)),
        Command::Smds(args) => report("smds", smds::run(args)),
        Command::Demo(args) => report("demo", cm::demo(args)),
        Command::Up(args) => report("up", cm::up(args)),
        Command::Audit(args) => report("audit", audit::run(args)),
        Command::Dashboard(args) => report("dashboard", dashboard::run(args)),
        Command::Soak(args) => report("soak", soak::run(args)),
        Command::Completions(args) => report("completions", install::completions::<Cli>(args)),
        Command::Man(args) => report("man", install::man::<Cli>(args)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_words_are_cut_and_the_rest_is_kept() {
        let big = "x".repeat(1_000_000);
        let m = super::bounded(&format!("bad input {big:?}: expected a port\n  at line 2"));
        assert!(m.len() < 200, "{}", m.len());
        assert!(m.starts_with("bad input \"xxxx"), "{m}");
        assert!(
            m.contains("(999939 more bytes) expected a port\n  at line 2"),
            "{m}"
        );
        let short = "no certificate for \"s1\" in /tmp/a/b (os error 2)";
        assert_eq!(super::bounded(short), short);
    }
}
