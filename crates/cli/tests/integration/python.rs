//! The IDL from another language (DESIGN.md §4 gRPC): a Python client whose stubs
//! grpcio-tools generates from the `.proto` files (`clients/python`) commits and releases a
//! channel on a live `atmlab switch serve` over mutual TLS, and the Rust client sees
//! exactly the table it left. Python clients without a lab certificate are refused.
//!
//! Each test generates the Python modules into a scratch directory with
//! `clients/python/generate.sh`, so the client is always built from the current IDL. The
//! interpreter is `$ATMLAB_PYTHON`, else `clients/python/.venv/bin/python`; the README's
//! test command (`scripts/test.sh`) creates that venv with grpcio and grpcio-tools. As
//! with tshark, a missing interpreter is a failure, not a skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use atmlab_core::ids::{PortId, VcId, Vci, Vpi};
use atmlab_core::traffic::ServiceClass;
use atmlab_fabric::live::backend::SwitchBackend;
use atmlab_fabric::live::grpc::GrpcSwitch;
use atmlab_fabric::switch::{Branch, ConnectionKind};
use serde_json::Value;

use crate::common::serve_switch;

use crate::common::Proc as Server;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The interpreter with grpcio and grpcio-tools.
fn python() -> PathBuf {
    let (path, from) = match std::env::var_os("ATMLAB_PYTHON") {
        Some(p) => (PathBuf::from(p), "$ATMLAB_PYTHON"),
        None => (
            workspace_root().join("clients/python/.venv/bin/python"),
            "the default",
        ),
    };
    assert!(
        path.exists(),
        "no Python with grpcio at {} ({from}): run the README's test command \
         (bash scripts/test.sh), which creates clients/python/.venv, or set ATMLAB_PYTHON",
        path.display()
    );
    path
}

/// The Python client, with its modules generated from the current IDL into `dir`.
struct PyClient {
    python: PathBuf,
    generated: PathBuf,
    addr: String,
}

impl PyClient {
    /// Generates the modules; `addr` is set once the switch is up.
    fn generate(dir: &Path) -> PyClient {
        let python = python();
        let generated = dir.join("generated");
        let o = Command::new("bash")
            .arg(workspace_root().join("clients/python/generate.sh"))
            .arg(&generated)
            .env("PYTHON", &python)
            .output()
            .expect("run clients/python/generate.sh");
        assert!(
            o.status.success(),
            "generate.sh failed with {} (run the README's test command, which installs \
             grpcio-tools): {}",
            python.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        PyClient {
            python,
            generated,
            addr: String::new(),
        }
    }

    /// Runs `atmlab_client.py --addr ADDR TLS... ARGS`.
    fn run(&self, tls: &[&str], args: &[&str]) -> Output {
        Command::new(&self.python)
            .arg(workspace_root().join("clients/python/atmlab_client.py"))
            .args(["--addr", &self.addr])
            .args(tls)
            .args(args)
            .env("ATMLAB_PB_DIR", &self.generated)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .expect("run the Python client")
    }

    /// Runs a command that must succeed and returns its JSON output.
    fn json(&self, tls: &[&str], args: &[&str]) -> Value {
        let o = self.run(tls, args);
        assert!(
            o.status.success(),
            "atmlab_client.py {args:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!("{e}: {}", String::from_utf8_lossy(&o.stdout));
        })
    }

    /// Runs a command that must be refused and returns its standard error.
    fn refused(&self, tls: &[&str], args: &[&str]) -> String {
        let o = self.run(tls, args);
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(
            o.status.code(),
            Some(1),
            "{args:?} was not refused: {stderr}"
        );
        stderr
    }
}

/// Lab certificates for `s1` and `admin`, a two-port switch serving them, and the client.
fn setup(dir: &Path) -> (Server, PyClient, PathBuf) {
    let certs = dir.join("certs");
    atmlab_rpc::tls::init_certs(
        &certs,
        &atmlab_rpc::tls::Subject::list(&["switch:s1", "admin:admin"]).unwrap(),
        false,
    )
    .unwrap();
    let config = dir.join("s1.toml");
    std::fs::write(
        &config,
        "name = \"s1\"\n[[ports]]\nid = 0\n[[ports]]\nid = 1\n",
    )
    .unwrap();
    // Python first: a missing interpreter fails the test before any server starts.
    let mut client = PyClient::generate(dir);
    let (child, addr) = serve_switch(&config, &certs);
    client.addr = addr;
    (Server(child), client, certs)
}

/// The Rust view of the switch, as the lab's admin.
fn rust_switch(rt: &tokio::runtime::Runtime, addr: &str, certs: &Path) -> GrpcSwitch {
    let admin = atmlab_rpc::tls::TlsFiles::in_dir(certs, "admin")
        .load()
        .unwrap()
        .expecting(atmlab_rpc::tls::Expect::Role(atmlab_rpc::tls::Role::Switch));
    rt.block_on(async {
        GrpcSwitch::new(
            atmlab_rpc::client_channel(addr, Some(&admin))
                .await
                .unwrap(),
        )
    })
}

#[test]
fn a_python_client_commits_and_releases_a_channel_over_mutual_tls() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, py, certs) = setup(dir.path());
    let c = certs.to_str().unwrap();
    let tls = ["--certs", c, "--as", "admin"];
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sw = rust_switch(&rt, &py.addr, &certs);

    let d = py.json(&tls, &["describe"]);
    assert_eq!(d["name"], "s1");
    assert_eq!(d["ports"].as_array().unwrap().len(), 2);

    // xbind's two phases from Python: reserve a VCI on port 1, commit 0/100 -> it.
    let ch = py.json(
        &tls,
        &[
            "commit",
            "--in-port",
            "0",
            "--in-vci",
            "100",
            "--out-port",
            "1",
            "--pcr",
            "1000",
            "--tag",
            "from-python",
        ],
    );
    let id = ch["connection"].as_u64().expect("a connection id");
    assert_eq!(ch["out_port"], 1);
    assert_eq!(ch["out_vpi"], 0);
    let out_vci = u16::try_from(ch["out_vci"].as_u64().unwrap()).unwrap();
    assert!((32..=4095).contains(&out_vci), "{ch}");

    let out = Branch {
        port: PortId(1),
        id: VcId {
            vpi: Vpi(0),
            vci: Vci(out_vci),
        },
    };
    rt.block_on(async {
        let listed = sw.connections().await.unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
        let conn = &listed[0];
        assert_eq!(conn.id, id);
        assert_eq!(conn.kind, ConnectionKind::Vc);
        assert_eq!(conn.in_port, PortId(0));
        assert_eq!(
            conn.in_id,
            VcId {
                vpi: Vpi(0),
                vci: Vci(100)
            }
        );
        assert_eq!(conn.branches, vec![out]);
        assert_eq!(conn.traffic.class, ServiceClass::Cbr);
        assert_eq!(conn.traffic.pcr.0, 1000.0);
        assert_eq!(conn.owner, "admin");
        assert_eq!(conn.tag, "from-python");
        // The commit used the reservation up.
        assert!(sw.reservations().await.unwrap().is_empty());
    });

    // Python reads the same table (proto3 JSON: 64-bit ids are strings).
    let list = py.json(&tls, &["list"]);
    let conns = list["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 1, "{list}");
    assert_eq!(conns[0]["connection"], id.to_string());
    assert_eq!(conns[0]["branches"][0]["id"]["vci"], u64::from(out_vci));

    // A refused commit (input 0/100 is taken) returns the VCI it reserved: no leak.
    let err = py.refused(
        &tls,
        &[
            "commit",
            "--in-port",
            "0",
            "--in-vci",
            "100",
            "--out-port",
            "1",
            "--pcr",
            "1000",
        ],
    );
    assert!(err.contains("ALREADY_EXISTS"), "{err}");
    rt.block_on(async {
        assert_eq!(sw.connections().await.unwrap().len(), 1);
        assert!(sw.reservations().await.unwrap().is_empty());
    });

    let released = py.json(&tls, &["release", &id.to_string()]);
    assert_eq!(released["released"], id);
    rt.block_on(async {
        assert!(sw.connections().await.unwrap().is_empty());
        assert!(sw.reservations().await.unwrap().is_empty());
        let d = sw.describe().await.unwrap();
        for p in &d.ports {
            assert_eq!(p.allocated, 0.0, "port {:?}", p.config.id);
            assert_eq!(p.committed, 0, "port {:?}", p.config.id);
        }
    });
    // Releasing it again: NOT_FOUND, from Python as from any client.
    let err = py.refused(&tls, &["release", &id.to_string()]);
    assert!(err.contains("NOT_FOUND"), "{err}");
}

#[test]
fn a_python_client_without_a_lab_certificate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, py, certs) = setup(dir.path());
    let other = dir.path().join("other-ca");
    atmlab_rpc::tls::init_certs(
        &other,
        &atmlab_rpc::tls::Subject::list(&["admin:admin"]).unwrap(),
        false,
    )
    .unwrap();
    let c = certs.to_str().unwrap();
    let ca = certs.join("ca.pem");
    let commit = [
        "commit",
        "--in-port",
        "0",
        "--in-vci",
        "100",
        "--out-port",
        "1",
        "--pcr",
        "1000",
    ];

    // No client certificate at all.
    let err = py.refused(&["--certs", c], &commit);
    assert!(err.contains("UNAVAILABLE"), "{err}");
    // A certificate from another CA; the client trusts the lab's CA, so it is the switch
    // that refuses.
    let err = py.refused(
        &[
            "--certs",
            other.to_str().unwrap(),
            "--as",
            "admin",
            "--ca",
            ca.to_str().unwrap(),
        ],
        &commit,
    );
    assert!(err.contains("UNAVAILABLE"), "{err}");

    // The lab's admin gets in, and finds that nothing changed.
    let list = py.json(&["--certs", c, "--as", "admin"], &["list"]);
    assert_eq!(list["connections"], serde_json::json!([]));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sw = rust_switch(&rt, &py.addr, &certs);
    rt.block_on(async {
        assert!(sw.connections().await.unwrap().is_empty());
        assert!(sw.reservations().await.unwrap().is_empty());
    });
}
