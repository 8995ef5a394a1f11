//! The state of a port's output VC identifiers (paper 000 §II-B: the switch server
//! manages "the VPI/VCI space"): free, reserved for an owner's cache, or committed to a
//! connection, by VPI and VCI.
//!
//! A table of chunks of 256 VCIs per VPI, each chunk made on first use, instead of a
//! hash map: every commit and release reads and writes an identifier's state, and a
//! hash map's look-ups, spread over a table as large as the identifiers in use, missed
//! the cache (7% of a loaded control plane's CPU). Identifiers are handed out in order
//! from a cursor, so the chunks in use are few and dense: a port using its 4,064 VCIs
//! of VPI 0 holds 16 chunks of 4 KiB.

use super::{IdState, PerVpi};

/// VCIs per chunk.
const CHUNK: usize = 256;

type Chunk = [Option<IdState>; CHUNK];

/// The output VC identifiers of one port in use, by VPI and VCI.
#[derive(Debug, Default)]
pub(super) struct VcIds {
    /// Per VPI, per chunk of VCIs (`vci / CHUNK`), the states.
    chunks: PerVpi<Vec<Option<Box<Chunk>>>>,
}

impl VcIds {
    /// The state of (`vpi`, `vci`), `None` if free.
    #[inline]
    pub(super) fn get(&self, vpi: u16, vci: u16) -> Option<IdState> {
        let (c, i) = (usize::from(vci) / CHUNK, usize::from(vci) % CHUNK);
        self.chunks.get(vpi)?.get(c)?.as_ref()?[i]
    }

    /// Sets the state of (`vpi`, `vci`) (`None`: free) and returns the one it had.
    #[inline]
    pub(super) fn set(&mut self, vpi: u16, vci: u16, st: Option<IdState>) -> Option<IdState> {
        let (c, i) = (usize::from(vci) / CHUNK, usize::from(vci) % CHUNK);
        if st.is_none() {
            // Freeing makes no chunk.
            return self
                .chunks
                .0
                .get_mut(usize::from(vpi))?
                .get_mut(c)?
                .as_mut()?[i]
                .take();
        }
        let chunks = self.chunks.at(vpi);
        if c >= chunks.len() {
            chunks.resize_with(c + 1, || None);
        }
        let chunk = chunks[c].get_or_insert_with(|| Box::new([None; CHUNK]));
        std::mem::replace(&mut chunk[i], st)
    }

    /// Every identifier in use with its state, as (`vpi`, `vci`, state).
    pub(super) fn iter(&self) -> impl Iterator<Item = (u16, u16, IdState)> + '_ {
        self.chunks.0.iter().enumerate().flat_map(|(vpi, chunks)| {
            chunks.iter().enumerate().flat_map(move |(c, chunk)| {
                chunk
                    .iter()
                    .flat_map(|ch| ch.iter())
                    .enumerate()
                    .filter_map(move |(i, st)| {
                        st.map(|st| (vpi as u16, (c * CHUNK + i) as u16, st))
                    })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table answers as a map from (VPI, VCI) to state would, over any sequence of
    /// settings, and lists exactly the identifiers in use.
    #[test]
    fn the_table_is_a_map() {
        use std::collections::BTreeMap;
        let mut t = VcIds::default();
        let mut m: BTreeMap<(u16, u16), IdState> = BTreeMap::new();
        let mut x = 12345u64;
        for n in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let vpi = ((x >> 60) % 3) as u16;
            let vci = ((x >> 32) as u16) % 1500 + if n % 7 == 0 { 64_000 } else { 0 };
            let st = match (x >> 20) % 3 {
                0 => None,
                1 => Some(IdState::Reserved((x >> 8) as u32 % 5)),
                _ => Some(IdState::Committed(n)),
            };
            let before = match st {
                Some(s) => m.insert((vpi, vci), s),
                None => m.remove(&(vpi, vci)),
            };
            assert_eq!(t.set(vpi, vci, st), before);
            assert_eq!(t.get(vpi, vci), st);
        }
        assert_eq!(t.get(7, 40), None);
        let listed: BTreeMap<(u16, u16), IdState> = t.iter().map(|(p, c, s)| ((p, c), s)).collect();
        assert_eq!(listed, m);
    }
}
