//! The commands of xbind's switch server (paper 000 §II-B) and ReTINA's
//! ConnectionServer (paper 001 §3): phase 1 ([`Switch::reserve`], [`Switch::unreserve`]),
//! phase 2 ([`Switch::commit`] with its piggybacked replenishment), [`Switch::release`],
//! the point-to-multipoint [`Switch::add_branch`] / [`Switch::drop_branch`], and
//! [`Switch::modify`] (ReTINA's and UNI 4.0's connection modification).
//!
//! Each command validates everything (ranges, identifier ownership, admission control
//! by [`crate::cac`]) before it changes anything, so a refused command leaves the switch
//! as it was. The `*_inner` forms return what the undo log needs to take the change back.

use smallvec::SmallVec;

use atmlab_core::ids::{PortId, VcId};
use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};

use super::{
    Branch, BranchChange, Commit, ConnectionKind, Entry, Hot, IdState, MAX_BRANCHES, MAX_RESERVE,
    MIN_CELL_RATE, Modify, Police, Port, Release, Reserve, Rewrite, Switch, Unreserve, header_for,
    vc_key, vp_key,
};
use crate::cac;
use crate::error::FabricError;

impl Switch {
    // ----- validation helpers ------------------------------------------------------

    fn check_vpi(p: &Port, vpi: u32) -> Result<(), FabricError> {
        let (min, max) = p.config.vpi_range;
        if vpi < u32::from(min) || vpi > u32::from(max) {
            return Err(FabricError::VpiOutOfRange {
                port: p.config.id,
                vpi,
                min,
                max,
            });
        }
        Ok(())
    }

    fn check_vci(p: &Port, vci: u32) -> Result<(), FabricError> {
        let (min, max) = p.config.vci_range;
        if vci < u32::from(min) || vci > u32::from(max) {
            return Err(FabricError::VciOutOfRange {
                port: p.config.id,
                vci,
                min,
                max,
            });
        }
        Ok(())
    }

    fn check_id(p: &Port, kind: ConnectionKind, id: VcId) -> Result<(), FabricError> {
        Self::check_vpi(p, u32::from(id.vpi.0))?;
        match kind {
            ConnectionKind::Vc => Self::check_vci(p, u32::from(id.vci.0)),
            ConnectionKind::Vp if id.vci.0 != 0 => Err(FabricError::Invalid(
                "a VP connection names its VPIs with VCI 0",
            )),
            ConnectionKind::Vp => Ok(()),
        }
    }

    fn out_state(p: &Port, kind: ConnectionKind, id: VcId) -> Option<IdState> {
        match kind {
            ConnectionKind::Vc => p.vc_ids.get(id.vpi.0, id.vci.0),
            ConnectionKind::Vp => p.vp_ids.get(&id.vpi.0).copied(),
        }
    }

    /// May `owner` use output `id` of `p` for a new branch?
    fn check_output(
        p: &Port,
        kind: ConnectionKind,
        id: VcId,
        owner: Option<u32>,
    ) -> Result<(), FabricError> {
        let port = p.config.id;
        match Self::out_state(p, kind, id) {
            Some(IdState::Committed(by)) => return Err(FabricError::OutputInUse { port, id, by }),
            Some(IdState::Reserved(o)) if Some(o) != owner => {
                return Err(FabricError::ReservedByOther { port, id });
            }
            Some(IdState::Reserved(_)) => return Ok(()),
            None => {}
        }
        // A free identifier: its path must not be taken the other way.
        match kind {
            ConnectionKind::Vc if p.vp_ids.contains_key(&id.vpi.0) => Err(FabricError::PathBusy {
                port,
                vpi: id.vpi.0,
                why: "held by a VP connection or reservation",
            }),
            ConnectionKind::Vp if p.vcs_per_vpi.count(id.vpi.0) > 0 => Err(FabricError::PathBusy {
                port,
                vpi: id.vpi.0,
                why: "partly used by VCs",
            }),
            _ => Ok(()),
        }
    }

    /// Admission control on one port: `bw` cells/s and `buf` cells more must fit. The
    /// relative slack absorbs float sums of many small rates.
    fn check_room(p: &Port, bw: f64, buf: u32) -> Result<(), FabricError> {
        let available = (p.config.capacity.per_sec() - p.allocated).max(0.0);
        if bw > available * (1.0 + 1e-12) + 1e-9 {
            return Err(FabricError::InsufficientBandwidth {
                port: p.config.id,
                needed: bw,
                available,
            });
        }
        let free_buf = p.config.buffer_cells - p.buffer_allocated;
        if buf > free_buf {
            return Err(FabricError::InsufficientBuffer {
                port: p.config.id,
                needed: buf,
                available: free_buf,
            });
        }
        Ok(())
    }

    fn check_traffic(t: &TrafficDescriptor, clr: f64) -> Result<(), FabricError> {
        let pcr = t.pcr.per_sec();
        if !(pcr.is_finite() && pcr >= MIN_CELL_RATE) {
            return Err(FabricError::Invalid(
                "the peak cell rate must be finite and at least 1 cell/s",
            ));
        }
        if matches!(t.class, ServiceClass::RtVbr | ServiceClass::NrtVbr) {
            let scr = t.scr.per_sec();
            if !(scr.is_finite() && scr >= MIN_CELL_RATE && scr <= pcr) {
                return Err(FabricError::Invalid(
                    "a VBR sustainable cell rate must be at least 1 cell/s and at most the peak",
                ));
            }
            if t.mbs == 0 {
                return Err(FabricError::Invalid(
                    "a VBR maximum burst size must be at least 1",
                ));
            }
        }
        if !(clr.is_finite() && (0.0..1.0).contains(&clr)) {
            return Err(FabricError::Invalid(
                "the cell loss ratio must be in [0, 1)",
            ));
        }
        Ok(())
    }

    // ----- identifier state primitives (no validation) ------------------------------

    pub(super) fn set_out(
        &mut self,
        pi: usize,
        kind: ConnectionKind,
        id: VcId,
        st: Option<IdState>,
    ) {
        let p = &mut self.ports[pi];
        let old = match kind {
            ConnectionKind::Vc => p.vc_ids.set(id.vpi.0, id.vci.0, st),
            ConnectionKind::Vp => match st {
                Some(s) => p.vp_ids.insert(id.vpi.0, s),
                None => p.vp_ids.remove(&id.vpi.0),
            },
        };
        match old {
            Some(IdState::Reserved(_)) => p.reserved -= 1,
            Some(IdState::Committed(_)) => p.committed -= 1,
            None => {}
        }
        match st {
            Some(IdState::Reserved(_)) => p.reserved += 1,
            Some(IdState::Committed(_)) => p.committed += 1,
            None => {}
        }
        if kind == ConnectionKind::Vc {
            let delta = i32::from(st.is_some()) - i32::from(old.is_some());
            if delta != 0 {
                let bits = p
                    .vc_bits
                    .at(id.vpi.0)
                    .get_or_insert_with(|| Box::new([0u64; 1024]));
                let (w, b) = (usize::from(id.vci.0 >> 6), id.vci.0 & 63);
                if delta > 0 {
                    bits[w] |= 1 << b;
                } else {
                    bits[w] &= !(1 << b);
                }
                let n = p.vcs_per_vpi.at(id.vpi.0);
                *n = n.wrapping_add_signed(delta);
            }
        }
    }

    // ----- phase 1 --------------------------------------------------------------------

    /// Phase 1: reserve `count` free output identifiers (all or none).
    pub fn reserve(&mut self, r: &Reserve) -> Result<Vec<VcId>, FabricError> {
        let pi = self.port_idx(r.port)?;
        if r.count == 0 || r.count > MAX_RESERVE {
            return Err(FabricError::Invalid(
                "a reservation asks for 1 to 65536 identifiers",
            ));
        }
        let ids = self.find_free(pi, r)?;
        let owner = self.owner_id(&r.owner);
        let kind = if r.vp {
            ConnectionKind::Vp
        } else {
            ConnectionKind::Vc
        };
        for &id in &ids {
            self.set_out(pi, kind, id, Some(IdState::Reserved(owner)));
        }
        if let (Some(last), false) = (ids.last(), r.vp) {
            *self.ports[pi].cursor.at(r.vpi) = Some(last.vci.0.wrapping_add(1));
        }
        Ok(ids)
    }

    /// Finds `r.count` free identifiers for `r` without changing anything.
    fn find_free(&self, pi: usize, r: &Reserve) -> Result<Vec<VcId>, FabricError> {
        let p = &self.ports[pi];
        let port = p.config.id;
        let full = if r.vp {
            p.config.vpi_range
        } else {
            p.config.vci_range
        };
        let (lo, hi) = match r.within {
            None => full,
            Some((a, b)) => {
                if a > b {
                    return Err(FabricError::Invalid("the partition's range is reversed"));
                }
                if r.vp {
                    Self::check_vpi(p, u32::from(a))?;
                    Self::check_vpi(p, u32::from(b))?;
                } else {
                    Self::check_vci(p, u32::from(a))?;
                    Self::check_vci(p, u32::from(b))?;
                }
                (a, b)
            }
        };
        let want = r.count as usize;
        let mut ids = Vec::with_capacity(want);
        if r.vp {
            for vpi in lo..=hi {
                if !p.vp_ids.contains_key(&vpi) && p.vcs_per_vpi.count(vpi) == 0 {
                    ids.push(VcId::new(vpi, 0));
                    if ids.len() == want {
                        return Ok(ids);
                    }
                }
            }
        } else {
            Self::check_vpi(p, u32::from(r.vpi))?;
            if p.vp_ids.contains_key(&r.vpi) {
                return Err(FabricError::PathBusy {
                    port,
                    vpi: r.vpi,
                    why: "held by a VP connection or reservation",
                });
            }
            let start = p
                .cursor
                .get(r.vpi)
                .copied()
                .flatten()
                .unwrap_or(lo)
                .clamp(lo, hi);
            let bits = p.vc_bits.get(r.vpi).and_then(Option::as_ref);
            let used =
                |vci: u16| bits.is_some_and(|b| b[usize::from(vci >> 6)] & (1 << (vci & 63)) != 0);
            // From the cursor to the top of the range, then from the bottom to the
            // cursor; whole words of used identifiers are skipped at once.
            for (a, b) in [(start, hi), (lo, start.saturating_sub(1).max(lo))] {
                if a > b {
                    continue;
                }
                let mut vci = u32::from(a);
                while vci <= u32::from(b) {
                    let v = vci as u16;
                    if v & 63 == 0
                        && u32::from(v) + 63 <= u32::from(b)
                        && bits.is_some_and(|x| x[usize::from(v >> 6)] == u64::MAX)
                    {
                        vci += 64;
                        continue;
                    }
                    if !used(v) {
                        ids.push(VcId::new(r.vpi, v));
                        if ids.len() == want {
                            return Ok(ids);
                        }
                    }
                    vci += 1;
                }
                if start == lo {
                    break;
                }
            }
        }
        Err(FabricError::NoFreeIdentifiers {
            port,
            wanted: r.count,
            free: ids.len() as u32,
        })
    }

    /// Returns reserved identifiers (all or none).
    pub fn unreserve(&mut self, u: &Unreserve) -> Result<(), FabricError> {
        let pi = self.port_idx(u.port)?;
        let owner = self.existing_owner(&u.owner);
        let p = &self.ports[pi];
        let mut seen = rustc_hash::FxHashSet::default();
        for &id in &u.ids {
            let kind = ConnectionKind::of_id(id);
            let mine = matches!(
                (Self::out_state(p, kind, id), owner),
                (Some(IdState::Reserved(o)), Some(w)) if o == w
            );
            if !mine || !seen.insert(id) {
                return Err(FabricError::NotReserved { port: u.port, id });
            }
        }
        for &id in &u.ids {
            let kind = ConnectionKind::of_id(id);
            self.set_out(pi, kind, id, None);
        }
        Ok(())
    }

    // ----- phase 2 --------------------------------------------------------------------

    /// Phase 2: install a connection and admit its resources; with `replenish`, also
    /// reserve up to that many more identifiers on the first branch's port (as many as
    /// are free: a short replenishment never fails the commit).
    pub fn commit(&mut self, c: &Commit) -> Result<(u64, Vec<VcId>), FabricError> {
        let (id, _) = self.commit_inner(c, false)?;
        let replenished = self.replenish(c);
        Ok((id, replenished))
    }

    pub(super) fn replenish(&mut self, c: &Commit) -> Vec<VcId> {
        if c.replenish == 0 {
            return Vec::new();
        }
        let first = c.branches[0];
        let mut r = Reserve {
            port: first.port,
            count: c.replenish.min(MAX_RESERVE),
            vpi: first.id.vpi.0,
            vp: c.kind == ConnectionKind::Vp,
            within: None,
            owner: c.owner.clone(),
        };
        while r.count > 0 {
            match self.reserve(&r) {
                Ok(ids) => return ids,
                Err(FabricError::NoFreeIdentifiers { free, .. }) if free < r.count => {
                    r.count = free
                }
                Err(_) => break,
            }
        }
        Vec::new()
    }

    fn admitted_for(&self, c: &Commit, pi: usize) -> f64 {
        cac::effective_bandwidth(
            &c.traffic,
            c.buffer_cells,
            self.ports[pi].config.buffer_cells,
            c.clr,
        )
    }

    /// Validates and installs; returns the id and, with `prior`, each branch
    /// identifier's prior state (for an undo log; none is built without one).
    pub(super) fn commit_inner(
        &mut self,
        c: &Commit,
        prior: bool,
    ) -> Result<(u64, Vec<Option<IdState>>), FabricError> {
        if c.branches.is_empty() {
            return Err(FabricError::Invalid(
                "a connection needs at least one branch",
            ));
        }
        if c.branches.len() > MAX_BRANCHES {
            return Err(FabricError::Invalid(
                "a connection has at most 256 branches",
            ));
        }
        Self::check_traffic(&c.traffic, c.clr)?;
        let in_pi = self.port_idx(c.in_port)?;
        let inp = &self.ports[in_pi];
        Self::check_id(inp, c.kind, c.in_id)?;
        match c.kind {
            ConnectionKind::Vc => {
                if let Some(&s) = self.vp_table.get(&vp_key(c.in_port, c.in_id.vpi.0)) {
                    return Err(FabricError::InputInUse {
                        port: c.in_port,
                        id: c.in_id,
                        by: self.slots[s as usize].as_ref().expect("live").id,
                    });
                }
                if let Some(&s) = self.vc_table.get(&vc_key(c.in_port, c.in_id)) {
                    return Err(FabricError::InputInUse {
                        port: c.in_port,
                        id: c.in_id,
                        by: self.slots[s as usize].as_ref().expect("live").id,
                    });
                }
            }
            ConnectionKind::Vp => {
                if let Some(&s) = self.vp_table.get(&vp_key(c.in_port, c.in_id.vpi.0)) {
                    return Err(FabricError::InputInUse {
                        port: c.in_port,
                        id: c.in_id,
                        by: self.slots[s as usize].as_ref().expect("live").id,
                    });
                }
                if inp.vc_inputs_per_vpi.count(c.in_id.vpi.0) > 0 {
                    return Err(FabricError::PathBusy {
                        port: c.in_port,
                        vpi: c.in_id.vpi.0,
                        why: "partly used by VCs on input",
                    });
                }
            }
        }
        let owner = self.existing_owner(&c.owner);
        let mut need_bw: SmallVec<[(usize, f64, u32); 4]> = SmallVec::new();
        for (i, b) in c.branches.iter().enumerate() {
            if hairpin(c.kind, c.in_port, c.in_id, b) {
                return Err(FabricError::Invalid(HAIRPIN));
            }
            let pi = self.port_idx(b.port)?;
            let p = &self.ports[pi];
            Self::check_id(p, c.kind, b.id)?;
            if c.branches[..i].contains(b) {
                return Err(FabricError::Invalid("a branch appears twice"));
            }
            Self::check_output(p, c.kind, b.id, owner)?;
            let bw = self.admitted_for(c, pi);
            match need_bw.iter_mut().find(|(q, _, _)| *q == pi) {
                Some(n) => {
                    n.1 += bw;
                    n.2 += c.buffer_cells;
                }
                None => need_bw.push((pi, bw, c.buffer_cells)),
            }
        }
        for &(pi, bw, buf) in &need_bw {
            Self::check_room(&self.ports[pi], bw, buf)?;
        }
        // Everything checked: install.
        let id = self.next_id;
        self.next_id += 1;
        let owner = match owner {
            Some(o) => o,
            None => self.owner_id(&c.owner),
        };
        let prior: Vec<Option<IdState>> = if prior {
            c.branches
                .iter()
                .map(|b| {
                    let pi = self.index(b.port).expect("checked");
                    Self::out_state(&self.ports[pi], c.kind, b.id)
                })
                .collect()
        } else {
            Vec::new()
        };
        let admitted = self.admitted_for(c, self.index(c.branches[0].port).expect("checked"));
        let entry = Entry {
            id,
            kind: c.kind,
            in_port: c.in_port,
            in_id: c.in_id,
            branches: SmallVec::from_slice(&c.branches),
            traffic: c.traffic,
            clr: c.clr,
            admitted,
            buffer_cells: c.buffer_cells,
            owner,
            tag: c.tag.clone(),
            cells: 0,
            discarded: 0,
        };
        self.install(entry);
        Ok((id, prior))
    }

    /// Installs a validated entry: tables, identifier states, resources.
    pub(super) fn install(&mut self, e: Entry) {
        let rewrites: SmallVec<[Rewrite; 2]> =
            e.branches.iter().map(|b| self.rewrite_for(b)).collect();
        for b in &e.branches {
            let pi = self.index(b.port).expect("validated");
            self.set_out(pi, e.kind, b.id, Some(IdState::Committed(e.id)));
            let p = &mut self.ports[pi];
            p.allocated += e.admitted;
            p.buffer_allocated += e.buffer_cells;
        }
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                self.hot.push(Hot::default());
                (self.slots.len() - 1) as u32
            }
        };
        self.hot[slot as usize] = Hot {
            kind: e.kind,
            rewrites,
            cells: e.cells,
            discarded: e.discarded,
            police: Police::for_contract(&e.traffic),
            policed: 0,
        };
        let in_pi = self.index(e.in_port).expect("validated");
        match e.kind {
            ConnectionKind::Vc => {
                self.vc_table.insert(vc_key(e.in_port, e.in_id), slot);
                *self.ports[in_pi].vc_inputs_per_vpi.at(e.in_id.vpi.0) += 1;
            }
            ConnectionKind::Vp => {
                self.vp_table.insert(vp_key(e.in_port, e.in_id.vpi.0), slot);
                self.ports[in_pi].vp_inputs += 1;
            }
        }
        self.by_id.insert(e.id, slot);
        self.slots[slot as usize] = Some(e);
    }

    fn rewrite_for(&self, b: &Branch) -> Rewrite {
        let pi = self.index(b.port).expect("validated");
        Rewrite {
            port: pi as u16,
            header: header_for(self.ports[pi].config.interface, b.id),
        }
    }

    /// Removes a connection from the tables and returns its resources; its output
    /// identifiers become free. Returns the entry.
    pub(super) fn uninstall(&mut self, id: u64) -> Result<Entry, FabricError> {
        let slot = self
            .by_id
            .remove(&id)
            .ok_or(FabricError::UnknownConnection(id))?;
        let mut e = self.slots[slot as usize]
            .take()
            .expect("indexed slot is live");
        let hot = std::mem::take(&mut self.hot[slot as usize]);
        e.cells = hot.cells;
        e.discarded = hot.discarded;
        self.free_slots.push(slot);
        let in_pi = self.index(e.in_port).expect("installed");
        match e.kind {
            ConnectionKind::Vc => {
                self.vc_table.remove(&vc_key(e.in_port, e.in_id));
                *self.ports[in_pi].vc_inputs_per_vpi.at(e.in_id.vpi.0) -= 1;
            }
            ConnectionKind::Vp => {
                self.vp_table.remove(&vp_key(e.in_port, e.in_id.vpi.0));
                self.ports[in_pi].vp_inputs -= 1;
            }
        }
        for b in &e.branches {
            let pi = self.index(b.port).expect("installed");
            self.set_out(pi, e.kind, b.id, None);
            let p = &mut self.ports[pi];
            p.allocated = (p.allocated - e.admitted).max(0.0);
            p.buffer_allocated -= e.buffer_cells;
            if p.committed == 0 {
                // Float sums drift; a port that carries nothing has nothing admitted, so
                // an audit after release finds exactly zero.
                p.allocated = 0.0;
            }
        }
        Ok(e)
    }

    /// Removes a connection; its identifiers go back to the pool, or to the owner's
    /// reservations with `keep_reserved`.
    pub fn release(&mut self, r: &Release) -> Result<(), FabricError> {
        self.release_inner(r).map(|_| ())
    }

    pub(super) fn release_inner(&mut self, r: &Release) -> Result<Entry, FabricError> {
        let e = self.uninstall(r.connection)?;
        if r.keep_reserved {
            for b in &e.branches {
                let pi = self.index(b.port).expect("installed");
                self.set_out(pi, e.kind, b.id, Some(IdState::Reserved(e.owner)));
            }
        }
        Ok(e)
    }

    /// Adds a branch (leaf) to a connection, admitting its bandwidth on the new port.
    pub fn add_branch(&mut self, ch: &BranchChange) -> Result<(), FabricError> {
        self.add_branch_inner(ch).map(|_| ())
    }

    pub(super) fn add_branch_inner(
        &mut self,
        ch: &BranchChange,
    ) -> Result<Option<IdState>, FabricError> {
        let slot = *self
            .by_id
            .get(&ch.connection)
            .ok_or(FabricError::UnknownConnection(ch.connection))?;
        let e = self.slots[slot as usize].as_ref().expect("live");
        if e.branches.len() >= MAX_BRANCHES {
            return Err(FabricError::Invalid(
                "a connection has at most 256 branches",
            ));
        }
        if e.branches.contains(&ch.branch) {
            return Err(FabricError::Invalid(
                "the connection already has this branch",
            ));
        }
        let (kind, owner, admitted, buf) = (e.kind, e.owner, e.admitted, e.buffer_cells);
        if hairpin(kind, e.in_port, e.in_id, &ch.branch) {
            return Err(FabricError::Invalid(HAIRPIN));
        }
        let pi = self.port_idx(ch.branch.port)?;
        let p = &self.ports[pi];
        Self::check_id(p, kind, ch.branch.id)?;
        Self::check_output(p, kind, ch.branch.id, Some(owner))?;
        Self::check_room(p, admitted, buf)?;
        let prior = Self::out_state(p, kind, ch.branch.id);
        self.attach_branch(slot, ch.branch, None);
        Ok(prior)
    }

    pub(super) fn attach_branch(&mut self, slot: u32, b: Branch, at: Option<usize>) {
        let rw = self.rewrite_for(&b);
        let pi = usize::from(rw.port);
        let e = self.slots[slot as usize].as_mut().expect("live");
        let at = at.unwrap_or(e.branches.len()).min(e.branches.len());
        e.branches.insert(at, b);
        self.hot[slot as usize].rewrites.insert(at, rw);
        let (kind, id, admitted, buf) = (e.kind, e.id, e.admitted, e.buffer_cells);
        self.set_out(pi, kind, b.id, Some(IdState::Committed(id)));
        let p = &mut self.ports[pi];
        p.allocated += admitted;
        p.buffer_allocated += buf;
    }

    /// Drops one branch; its identifier goes back to the pool. The last branch cannot be
    /// dropped: release the connection instead.
    pub fn drop_branch(&mut self, ch: &BranchChange) -> Result<(), FabricError> {
        self.drop_branch_inner(ch).map(|_| ())
    }

    pub(super) fn drop_branch_inner(&mut self, ch: &BranchChange) -> Result<usize, FabricError> {
        let slot = *self
            .by_id
            .get(&ch.connection)
            .ok_or(FabricError::UnknownConnection(ch.connection))?;
        let e = self.slots[slot as usize].as_mut().expect("live");
        let at =
            e.branches
                .iter()
                .position(|b| *b == ch.branch)
                .ok_or(FabricError::UnknownBranch {
                    connection: ch.connection,
                    port: ch.branch.port,
                    id: ch.branch.id,
                })?;
        if e.branches.len() == 1 {
            return Err(FabricError::Invalid(
                "cannot drop the last branch; release the connection",
            ));
        }
        self.detach_branch(slot, at, None);
        Ok(at)
    }

    /// Removes branch `at` of the connection in `slot`, returns its bandwidth and buffer,
    /// and leaves its output identifier in state `after` (free, or back to a reservation
    /// when an all-or-nothing batch undoes an AddBranch).
    pub(super) fn detach_branch(&mut self, slot: u32, at: usize, after: Option<IdState>) {
        let e = self.slots[slot as usize].as_mut().expect("live");
        let b = e.branches.remove(at);
        let rw = self.hot[slot as usize].rewrites.remove(at);
        let (kind, admitted, buf) = (e.kind, e.admitted, e.buffer_cells);
        let pi = usize::from(rw.port);
        self.set_out(pi, kind, b.id, after);
        let p = &mut self.ports[pi];
        p.allocated = (p.allocated - admitted).max(0.0);
        p.buffer_allocated -= buf;
        if p.committed == 0 {
            p.allocated = 0.0;
        }
    }

    /// Changes a connection's traffic contract. The new bandwidth is admitted on every
    /// port a branch leaves by (only an increase needs room); nothing changes when one
    /// refuses. Returns the old (traffic, clr, admitted), for an undo.
    pub fn modify(&mut self, m: &Modify) -> Result<(), FabricError> {
        self.modify_inner(m).map(|_| ())
    }

    pub(super) fn modify_inner(
        &mut self,
        m: &Modify,
    ) -> Result<(TrafficDescriptor, f64, f64), FabricError> {
        let slot = *self
            .by_id
            .get(&m.connection)
            .ok_or(FabricError::UnknownConnection(m.connection))?;
        let e = self.slots[slot as usize].as_ref().expect("live");
        let clr = if m.clr > 0.0 { m.clr } else { e.clr };
        Self::check_traffic(&m.traffic, clr)?;
        let first = self.index(e.branches[0].port).expect("installed");
        let admitted = cac::effective_bandwidth(
            &m.traffic,
            e.buffer_cells,
            self.ports[first].config.buffer_cells,
            clr,
        );
        let old = (e.traffic, e.clr, e.admitted);
        // Each port is charged once per branch leaving by it (as at commit).
        let mut per_port: SmallVec<[(usize, u32); 4]> = SmallVec::new();
        for b in &e.branches {
            let pi = self.index(b.port).expect("installed");
            match per_port.iter_mut().find(|(q, _)| *q == pi) {
                Some(n) => n.1 += 1,
                None => per_port.push((pi, 1)),
            }
        }
        let delta = admitted - e.admitted;
        if delta > 0.0 {
            for &(pi, n) in &per_port {
                Self::check_room(&self.ports[pi], delta * f64::from(n), 0)?;
            }
        }
        for &(pi, n) in &per_port {
            let p = &mut self.ports[pi];
            p.allocated = (p.allocated + delta * f64::from(n)).max(0.0);
        }
        let e = self.slots[slot as usize].as_mut().expect("live");
        e.traffic = m.traffic;
        e.clr = clr;
        e.admitted = admitted;
        // The new contract is policed from now on.
        self.hot[slot as usize].police = Police::for_contract(&m.traffic);
        Ok(old)
    }
}

const HAIRPIN: &str = "a branch may not leave by the port and identifier the connection enters by (a hairpin: its cells would loop for ever)";

/// A branch that sends cells back out on the very port and identifier they came in on
/// (the whole VPI for a VP connection): each cell would be switched again, for ever.
fn hairpin(kind: ConnectionKind, in_port: PortId, in_id: VcId, b: &Branch) -> bool {
    b.port == in_port
        && match kind {
            ConnectionKind::Vc => b.id == in_id,
            ConnectionKind::Vp => b.id.vpi == in_id.vpi,
        }
}
