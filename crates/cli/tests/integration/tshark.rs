//! Captures written by `atmlab wire pcap`, read back by a real tshark. The README's test
//! command installs tshark when it is missing; here a missing tshark is a failure, not a
//! skip, so that the check cannot silently vanish.

use std::process::Command;

use crate::common::{atmlab, bytes};

fn tshark(args: &[&str]) -> String {
    let o = Command::new("tshark")
        .args(args)
        .output()
        .expect("tshark is not installed: run the README's test command, which installs it");
    assert!(
        o.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Two good frames on 1/100 and 2/200 and, between them, one frame on 1/100 whose payload
/// was corrupted on the way.
fn cells() -> Vec<u8> {
    let mut s = atmlab(
        &["wire", "segment", "--vpi", "1", "--vci", "100", "--uu", "7"],
        &bytes(1500, 1),
    )
    .stdout;
    let mut bad = atmlab(
        &["wire", "segment", "--vpi", "1", "--vci", "100"],
        &bytes(300, 2),
    )
    .stdout;
    bad[53 + 10] ^= 0x01;
    s.extend(bad);
    s.extend(
        atmlab(
            &["wire", "segment", "--vpi", "2", "--vci", "200"],
            &bytes(40, 3),
        )
        .stdout,
    );
    s
}

#[test]
fn erf_capture_shows_trailer_and_checks_crc() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("aal5.pcap");
    let p = path.to_str().unwrap();
    let o = atmlab(&["wire", "pcap", "--out", p, "--linktype", "erf"], &cells());
    // The corrupted frame is reported (exit 1) but still written, as received.
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let fields = tshark(&[
        "-r",
        p,
        "-o",
        "erf.aal5_type:unspecified",
        "-T",
        "fields",
        "-E",
        "separator=,",
        "-e",
        "atm.vpi",
        "-e",
        "atm.vci",
        "-e",
        "atm.hf_atm.aal5t_uu",
        "-e",
        "atm.aal5t_len",
    ]);
    assert_eq!(
        fields.lines().collect::<Vec<_>>(),
        ["1,100,0x07,1500", "1,100,0x00,300", "2,200,0x00,40"]
    );
    let verbose = tshark(&["-r", p, "-o", "erf.aal5_type:unspecified", "-V"]);
    let crc_lines: Vec<&str> = verbose
        .lines()
        .filter(|l| l.contains("AAL5 CRC:"))
        .collect();
    assert_eq!(crc_lines.len(), 3, "{verbose}");
    assert!(crc_lines[0].ends_with("(correct)"), "{}", crc_lines[0]);
    assert!(crc_lines[1].ends_with("(incorrect)"), "{}", crc_lines[1]);
    assert!(crc_lines[2].ends_with("(correct)"), "{}", crc_lines[2]);
}

#[test]
fn sunatm_capture_shows_vpi_vci_and_pdu() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("aal5.pcap");
    let p = path.to_str().unwrap();
    atmlab(&["wire", "pcap", "--out", p], &cells());
    let fields = tshark(&[
        "-r",
        p,
        "-T",
        "fields",
        "-E",
        "separator=,",
        "-e",
        "frame.len",
        "-e",
        "atm.vpi",
        "-e",
        "atm.vci",
        "-e",
        "atm.aal",
    ]);
    // The whole CPCS-PDU follows the pseudo-header (frame.len counts the PDU only); AAL 4
    // is Wireshark's code for AAL5.
    assert_eq!(
        fields.lines().collect::<Vec<_>>(),
        ["1536,1,100,4", "336,1,100,4", "48,2,200,4"]
    );
}

/// The README's showcase command, as written there, writes a capture that tshark 4.0
/// decodes as ATM AAL5 PDUs on their VPI/VCI (with ERF, tshark guessed LANE and showed
/// Ethernet frames made of README text).
#[test]
fn the_readme_showcase_capture_decodes_as_atm_aal5() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.contains("-- wire roundtrip README.md"))
        .expect("the showcase command in the README");
    let cmd = line.trim().trim_matches('`');
    let args: Vec<&str> = cmd
        .split_once(" -- ")
        .expect("cargo run ... -- ARGS")
        .1
        .split_whitespace()
        .collect();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(root.join("README.md"), dir.path().join("README.md")).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_atmlab"))
        .args(&args)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let pcap = args
        .iter()
        .position(|a| *a == "--pcap")
        .map(|i| dir.path().join(args[i + 1]))
        .expect("--pcap in the showcase");
    let v = tshark(&["-r", pcap.to_str().unwrap(), "-V", "-c", "3"]);
    assert!(v.contains("Asynchronous Transfer Mode"), "{v}");
    assert!(v.contains("AAL: AAL5"), "{v}");
    assert!(v.contains("VCI: 100"), "{v}");
    assert!(!v.contains("Ethernet II") && !v.contains("LANE"), "{v}");
}
