//! Writes the AAL3/4 and SMDS seed corpora of the fuzz targets (`fuzz/corpus/`), from the
//! encoders of atmlab-wire: `cargo run -p atmlab-wire --example gen_corpus`.

use std::path::Path;

use atmlab_wire::aal34::Segmenter;
use atmlab_wire::smds::HLPI_LLC;
use atmlab_wire::{E164Address, L3PduRepr};

fn write(dir: &Path, name: &str, data: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), data).unwrap();
}

fn sar_stream(frames: &[(u16, u8, Vec<u8>)]) -> Vec<u8> {
    let mut seg = Segmenter::new();
    let mut out = Vec::new();
    for (mid, btag, f) in frames {
        for sar in seg.segment_frame(*mid, *btag, f).unwrap() {
            out.extend_from_slice(&sar);
        }
    }
    out
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let aal34 = root.join("aal34");
    let data: Vec<u8> = (0..600u32).map(|i| (i * 13) as u8).collect();
    write(&aal34, "ssm", &sar_stream(&[(1, 7, data[..20].to_vec())]));
    write(&aal34, "bom-com-eom", &sar_stream(&[(2, 9, data.clone())]));
    // Two MIDs interleaved SAR-PDU by SAR-PDU.
    let a = sar_stream(&[(3, 1, data[..200].to_vec())]);
    let b = sar_stream(&[(4, 2, data[200..500].to_vec())]);
    let mut mixed = Vec::new();
    let (mut ia, mut ib) = (a.chunks(48), b.chunks(48));
    loop {
        let (x, y) = (ia.next(), ib.next());
        if x.is_none() && y.is_none() {
            break;
        }
        for c in [x, y].into_iter().flatten() {
            mixed.extend_from_slice(c);
        }
    }
    write(&aal34, "two-mids", &mixed);
    let mut lost = sar_stream(&[(5, 3, data.clone())]);
    lost.drain(48..96); // a COM lost: a sequence gap
    write(&aal34, "sequence-gap", &lost);

    let smds = root.join("smds");
    let pdu = |info: &[u8], crc32: bool, dest: E164Address| {
        let r = L3PduRepr {
            betag: 0x42,
            destination: dest,
            source: E164Address::individual("15551234567").unwrap(),
            hlpi: HLPI_LLC,
            qos: 0,
            crc32,
            bridging: 0,
            header_extension: [0x03, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            info,
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf).unwrap();
        buf
    };
    let ind = E164Address::individual("15557654321").unwrap();
    let grp = E164Address::group("15550000001").unwrap();
    write(&smds, "individual-no-crc", &pdu(&data[..61], false, ind));
    write(&smds, "group-with-crc", &pdu(&data[..100], true, grp));
    write(&smds, "empty-info", &pdu(&[], false, ind));
    write(&smds, "address", &ind.to_bytes());
    write(&smds, "address-text", b"I:15551234567");
}
