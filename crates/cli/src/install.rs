//! `atmlab completions` and `atmlab man`: the command line installs like a tool (issue
//! 27, item 6). Both are generated from the clap definition in `main.rs`, so they never
//! drift from what the binary accepts.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, CommandFactory};

/// `atmlab completions SHELL`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    shell: clap_complete::Shell,
}

/// `atmlab man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Directory for atmlab.1 and one page per subcommand (atmlab-sim.1, atmlab-sim-run.1...).
    #[arg(long, default_value = "man")]
    out: PathBuf,
}

/// Prints the completion script for `args.shell` on stdout.
pub fn completions<C: CommandFactory>(args: CompletionsArgs) -> Result<ExitCode> {
    let mut cmd = C::command();
    let name = cmd.get_name().to_owned();
    // Into a buffer first: clap_complete panics on a write error, and a reader that
    // stops early (`| head`) is not one.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, name, &mut script);
    use std::io::Write as _;
    let _ = std::io::stdout().write_all(&script);
    Ok(ExitCode::SUCCESS)
}

/// Writes the man pages into `args.out`: atmlab.1 and one per subcommand, nested ones
/// named with dashes (`atmlab-sim-run.1`), as `man atmlab-sim-run` expects.
pub fn man<C: CommandFactory>(args: ManArgs) -> Result<ExitCode> {
    crate::live::writable_dir("--out", &args.out)?;
    let mut cmd = C::command();
    cmd.build();
    let mut written = 0usize;
    write_pages(&cmd, &args.out, &mut written)?;
    say!(
        "wrote {written} man pages to {} (atmlab.1 and one per subcommand)",
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn write_pages(cmd: &clap::Command, dir: &std::path::Path, written: &mut usize) -> Result<()> {
    let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_owned();
    let path = dir.join(format!("{name}.1"));
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .title(name.to_uppercase())
        .render(&mut page)
        .with_context(|| format!("rendering {}", path.display()))?;
    std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
    *written += 1;
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}
