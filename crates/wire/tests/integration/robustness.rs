//! Every decoder and reassembler takes arbitrary bytes without panicking. The same entry
//! points are fuzzed by the cargo-fuzz targets in `fuzz/`; this suite also replays their
//! seed corpora so that a crash once found stays fixed.

use atmlab_wire::CellHeader;
use proptest::prelude::*;

use crate::harness::{aal5, aal34, cell, cells_and_aal5, smds};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        cells_and_aal5(&data);
        aal34(&data);
        smds(&data);
    }

    /// Random bytes shaped like cells of one VC, so the reassembler gets past the HEC.
    #[test]
    fn random_payloads_on_a_vc_never_panic(payloads in proptest::collection::vec((proptest::collection::vec(any::<u8>(), 48), any::<bool>()), 0..60)) {
        let mut stream = Vec::new();
        for (p, end) in payloads {
            let h = CellHeader::uni(0, 100, atmlab_wire::Pti::user(end)).to_bytes();
            stream.extend_from_slice(&h);
            stream.extend_from_slice(&p);
        }
        cells_and_aal5(&stream);
    }
}

/// Replays the fuzz seed corpora (and any crash inputs committed beside them).
#[test]
fn fuzz_corpora_replay() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut n = 0;
    type Harness = fn(&[u8]);
    let targets: [(&str, Harness); 4] = [
        ("cell", cell),
        ("aal5", aal5),
        ("aal34", aal34),
        ("smds", smds),
    ];
    for (target, harness) in targets {
        let dir = root.join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            panic!("missing seed corpus {}", dir.display());
        };
        for e in entries {
            let data = std::fs::read(e.unwrap().path()).unwrap();
            harness(&data);
            n += 1;
        }
    }
    assert!(n > 0, "the seed corpora are empty");
}
