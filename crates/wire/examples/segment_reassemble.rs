//! A first program with atmlab-wire: one frame sent over AAL5 (ITU-T I.363.5) and back.
//!
//! It segments a frame into 53-octet cells, decodes the header of one cell (ITU-T I.361),
//! and feeds the cells to a reassembler, printing each step. Run it with
//!
//! ```text
//! cargo run -p atmlab-wire --example segment_reassemble
//! ```
//!
//! Nothing here touches a socket or a clock: the library only turns bytes into values and
//! values into bytes. A real sender would write the cells to a link, and a real receiver
//! would pass the time each cell arrived; here the cells go from one loop to the next and
//! the time is a counter.

use atmlab_core::time::{Duration, Instant};
use atmlab_wire::aal5::{self, Reassembler, ReassemblerConfig, Segmenter};
use atmlab_wire::cell::{CELL_LEN, PAYLOAD_LEN};
use atmlab_wire::{Cell, CellHeader, HeaderFormat, Pti, WireError};

fn main() -> Result<(), WireError> {
    // The frame to send: a line of text. AAL5 carries 1 to 65,535 octets.
    let frame = b"An AAL5 frame rides in 48-octet cell payloads; the last cell carries its length and CRC-32....";
    println!("frame: {} octets", frame.len());

    // The cell header of the virtual channel 1/100 at the user-network interface. The
    // segmenter sets the payload type itself: user data, and the "end of frame" bit on
    // the last cell only.
    let header = CellHeader::uni(1, 100, Pti::user(false));

    // Segment. The segmenter is an iterator of `[u8; 53]` that computes the CRC-32 as it
    // goes; it never copies the frame. The frame plus the 8-octet trailer, padded to a
    // multiple of 48 octets, gives the number of cells.
    let cells: Vec<[u8; CELL_LEN]> = Segmenter::new(header, frame, 0, 0)?.collect();
    println!(
        "segmented into {} cells (AAL5 says {} for {} octets)",
        cells.len(),
        aal5::cells_for(frame.len()),
        frame.len()
    );

    // Decode the header of the last cell. `new_checked` makes sure the buffer holds a
    // whole cell, so that no accessor can panic; `CellHeader::parse` checks the HEC
    // (the header's own CRC-8) and gives the fields as values.
    let last = cells.last().expect("a frame has at least one cell");
    let view = Cell::new_checked(&last[..])?;
    let hdr = CellHeader::parse(&view, HeaderFormat::Uni)?;
    println!(
        "last cell: VPI {} VCI {} PT {} CLP {} HEC {:#04x} (end of frame: {})",
        hdr.vpi,
        hdr.vci,
        hdr.pti.name(),
        u8::from(hdr.clp),
        view.hec(),
        hdr.pti.is_end_of_frame()
    );

    // Reassemble. One reassembler serves one VC; it answers `None` while a frame is
    // incomplete, and a frame or an error when a cell ends one. It is sans-IO: the caller
    // says when each cell arrived (here, one cell time apart on a 155.52 Mb/s link), and
    // the reassembly timer, if configured, runs on those times.
    let mut rx = Reassembler::new(ReassemblerConfig::default());
    let cell_time = Duration::from_picos(2_726_337);
    let mut now = Instant::ZERO;
    for cell in &cells {
        let view = Cell::new_checked(&cell[..])?;
        let payload: &[u8; PAYLOAD_LEN] = view.payload().try_into().expect("48 octets");
        match rx.handle_cell(now, payload, view.pti().is_end_of_frame()) {
            None => println!("  cell at {now}: frame incomplete"),
            Some(Ok(f)) => {
                println!(
                    "  cell at {now}: frame of {} octets, CRC-32 good",
                    f.sdu.len()
                );
                assert_eq!(f.sdu, frame, "the frame came back as it was sent");
                println!("reassembled: {:?}", String::from_utf8_lossy(f.sdu));
            }
            Some(Err(e)) => println!("  cell at {now}: frame discarded: {e}"),
        }
        now += cell_time;
    }

    // The same cells with one payload bit flipped: the CRC-32 catches it, and the
    // reassembler reports the frame as bad instead of delivering it.
    let mut damaged = cells.clone();
    damaged[0][5 + 10] ^= 0x01;
    for cell in &damaged {
        let view = Cell::new_checked(&cell[..])?;
        let payload: &[u8; PAYLOAD_LEN] = view.payload().try_into().expect("48 octets");
        if let Some(Err(e)) = rx.handle_cell(now, payload, view.pti().is_end_of_frame()) {
            println!("with one bit flipped: {e}");
        }
        now += cell_time;
    }
    Ok(())
}
