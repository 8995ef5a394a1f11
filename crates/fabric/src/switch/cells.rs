//! The per-cell switching path (paper 000 §II-B: the switch whose VPI/VCI space the
//! switch server manages; ITU-T I.361 headers, I.432.1 HEC): the HEC receiver, the
//! translation look-up, the header rewrite of each branch, and the output queues with
//! CLP-based partial buffer sharing.
//!
//! With a time ([`Switch::handle_cell_at`], the live data plane), each cell first meets
//! its connection's usage parameter control (ITU-T I.371 §4.4: the GCRA of
//! `atmlab_core::gcra` on the contract), which tags or discards a non-conforming cell.
//!
//! The look-up reads only the dense per-slot records (`Hot`), a cell is copied
//! once into its queue slot and rewritten there, and nothing on this path allocates once
//! a queue has grown to its working size.

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::time::Instant;
use atmlab_wire::cell::{CELL_LEN, HecOutcome};
use atmlab_wire::crc;

use super::{CellFate, ConnectionKind, Policing, Switch, vc_key, vp_key};
use crate::config::Interface;

impl Switch {
    // ----- cells ------------------------------------------------------------------------

    /// The per-cell switching function: HEC check, look-up, header rewrite, and a copy
    /// queued on each branch's output port (CLP = 1 discarded above the threshold, every
    /// cell when the buffer is full). `cell` may be corrected in place by the HEC
    /// receiver.
    #[inline]
    pub fn handle_cell(&mut self, in_port: PortId, cell: &mut [u8; CELL_LEN]) -> CellFate {
        self.switch_cell(in_port, cell, None)
    }

    /// [`Switch::handle_cell`] with the usage parameter control: the cell arrived at
    /// `now`, and its connection's conformance test (GCRA on its contract's PCR, and SCR
    /// and MBS for VBR) decides, under the switch's [`Policing`], whether a
    /// non-conforming cell is tagged CLP = 1 or discarded ([`CellFate::Policed`]).
    #[inline]
    pub fn handle_cell_at(
        &mut self,
        in_port: PortId,
        cell: &mut [u8; CELL_LEN],
        now: Instant,
    ) -> CellFate {
        self.switch_cell(in_port, cell, Some(now))
    }

    /// How non-conforming cells are treated by [`Switch::handle_cell_at`].
    pub fn set_policing(&mut self, policing: Policing) {
        self.policing = policing;
    }

    /// The switch's [`Policing`].
    pub fn policing(&self) -> Policing {
        self.policing
    }

    /// Cells of connection `id` found non-conforming at ingress so far (tagged or
    /// discarded); `None` for an unknown connection.
    pub fn policed(&self, id: u64) -> Option<u64> {
        self.by_id
            .get(&id)
            .map(|&slot| self.hot[slot as usize].policed)
    }

    #[inline]
    fn switch_cell(
        &mut self,
        in_port: PortId,
        cell: &mut [u8; CELL_LEN],
        now: Option<Instant>,
    ) -> CellFate {
        let Some(pi) = self.index(in_port) else {
            return CellFate::NoSuchPort;
        };
        let port = &mut self.ports[pi];
        port.counters.cells_in += 1;
        if port.hec.check(cell) == HecOutcome::Discard {
            port.counters.cells_hec_errors += 1;
            return CellFate::HecError;
        }
        let vpi = match port.config.interface {
            Interface::Uni => (u16::from(cell[0] & 0x0f) << 4) | u16::from(cell[1] >> 4),
            Interface::Nni => (u16::from(cell[0]) << 4) | u16::from(cell[1] >> 4),
        };
        let vci =
            (u16::from(cell[1] & 0x0f) << 12) | (u16::from(cell[2]) << 4) | u16::from(cell[3] >> 4);
        let has_vp = port.vp_inputs > 0;
        let slot = if has_vp {
            self.vp_table.get(&vp_key(in_port, vpi)).copied()
        } else {
            None
        };
        let slot = match slot {
            Some(s) => s,
            None => match self.vc_table.get(&vc_key(in_port, VcId::new(vpi, vci))) {
                Some(&s) => s,
                None => {
                    self.ports[pi].counters.cells_unknown += 1;
                    return CellFate::Unknown;
                }
            },
        };
        let e = &mut self.hot[slot as usize];
        e.cells += 1;
        if let (Some(now), Some(police)) = (now, e.police.as_mut())
            && self.policing != Policing::Off
            && !police.conforms(now)
        {
            e.policed += 1;
            self.ports[pi].counters.cells_policed += 1;
            if self.policing == Policing::Discard {
                return CellFate::Policed;
            }
            // Tagged: CLP = 1 from here on (the header's HEC is recomputed with the
            // rewrite on each branch).
            cell[3] |= 0x01;
        }
        let e = &mut self.hot[slot as usize];
        let clp = cell[3] & 0x01 != 0;
        let (mut queued, mut discarded) = (0u16, 0u16);
        for rw in &e.rewrites {
            let mut h = rw.header;
            match e.kind {
                ConnectionKind::Vc => h[3] |= cell[3] & 0x0f,
                ConnectionKind::Vp => {
                    h[1] = (h[1] & 0xf0) | (cell[1] & 0x0f);
                    h[2] = cell[2];
                    h[3] = cell[3];
                }
            }
            let out = &mut self.ports[usize::from(rw.port)];
            let len = out.queue.len() as u32;
            if len >= out.config.buffer_cells {
                out.counters.cells_discarded_full += 1;
                discarded += 1;
                continue;
            }
            if clp && len >= out.config.clp_threshold {
                out.counters.cells_discarded_clp1 += 1;
                discarded += 1;
                continue;
            }
            // Copy the cell once, into its queue slot, and rewrite the header there.
            out.queue.push_back(*cell);
            let slot = out.queue.back_mut().expect("just pushed");
            slot[..4].copy_from_slice(&h);
            slot[4] = crc::hec(h);
            queued += 1;
        }
        e.discarded += u64::from(discarded);
        CellFate::Switched { queued, discarded }
    }

    /// Takes the next cell off a port's output queue.
    #[inline]
    pub fn poll_transmit(&mut self, port: PortId) -> Option<[u8; CELL_LEN]> {
        let pi = self.index(port)?;
        let p = &mut self.ports[pi];
        let c = p.queue.pop_front()?;
        p.counters.cells_out += 1;
        Some(c)
    }

    /// Appends up to `max` cells of a port's output queue to `out`; returns how many.
    pub fn drain(&mut self, port: PortId, out: &mut Vec<u8>, max: usize) -> usize {
        let Some(pi) = self.index(port) else { return 0 };
        let p = &mut self.ports[pi];
        let n = p.queue.len().min(max);
        if n == p.queue.len() {
            // The whole queue: at most two contiguous runs, copied in one go each.
            let (a, b) = p.queue.as_slices();
            out.extend_from_slice(a.as_flattened());
            out.extend_from_slice(b.as_flattened());
            p.queue.clear();
        } else {
            for c in p.queue.drain(..n) {
                out.extend_from_slice(&c);
            }
        }
        p.counters.cells_out += n as u64;
        n
    }

    /// Cells waiting on a port's output queue.
    pub fn queue_len(&self, port: PortId) -> usize {
        self.index(port).map_or(0, |pi| self.ports[pi].queue.len())
    }
}
