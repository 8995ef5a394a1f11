//! End-to-end tests of the `atmlab` binary: the fixed `wire` interfaces, the subcommand
//! tree, and captures checked by a real tshark. One test binary for the crate.

mod cli;
mod kill;
mod net;
mod sim;
mod tshark;

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `atmlab ARGS` with `stdin` on its standard input.
pub fn atmlab(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start atmlab");
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    // Write from another thread so a large output cannot deadlock against the input.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("run atmlab");
    writer.join().unwrap();
    out
}

/// Deterministic test bytes.
pub fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
