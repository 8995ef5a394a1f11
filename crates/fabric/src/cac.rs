//! Connection admission control: the bandwidth a connection is charged on an output port.
//!
//! The xbind switch server admits a channel only if its port can carry it (paper 000
//! §II-B, "commit a channel with its bandwidth and buffer"). The rule is per service class:
//!
//! - CBR: the peak cell rate, a hard guarantee.
//! - rt-VBR and nrt-VBR: the *effective bandwidth* of an on-off fluid source feeding a
//!   buffer of `X` cells with target loss `eps` (Guérin, Ahmadi and Naghshineh, "Equivalent
//!   capacity and its application to bandwidth allocation in high-speed networks", IEEE
//!   JSAC 9(7), 1991, eq. 4):
//!
//!   ```text
//!   y = ln(1/eps) * b * (1 - rho) * PCR,   b = MBS / PCR (mean burst length, s),
//!   c = PCR * (y - X + sqrt((y - X)^2 + 4 X rho y)) / (2 y),   rho = SCR / PCR
//!   ```
//!
//!   clamped to [SCR, PCR]. With no buffer (`X = 0`) it is the peak rate; with a large
//!   buffer it falls towards the mean. rt-VBR counts only the buffer set aside for the
//!   connection itself (its delay bound forbids relying on a shared queue); nrt-VBR counts
//!   the port's whole buffer.
//! - UBR: nothing; it takes what is left and its cells are the first discarded.

use atmlab_core::traffic::{ServiceClass, TrafficDescriptor};

/// Default target cell loss ratio for the effective-bandwidth rule.
pub const DEFAULT_CLR: f64 = 1e-6;

/// The bandwidth (cells/s) that admission control charges for `traffic` on a port whose
/// output buffer is `port_buffer` cells, with `own_buffer` cells set aside for the
/// connection and target loss `clr`.
pub fn effective_bandwidth(
    traffic: &TrafficDescriptor,
    own_buffer: u32,
    port_buffer: u32,
    clr: f64,
) -> f64 {
    let pcr = traffic.pcr.per_sec();
    match traffic.class {
        ServiceClass::Cbr => pcr,
        ServiceClass::Ubr => 0.0,
        ServiceClass::RtVbr => fluid_equivalent_capacity(traffic, f64::from(own_buffer), clr),
        ServiceClass::NrtVbr => fluid_equivalent_capacity(traffic, f64::from(port_buffer), clr),
    }
}

/// Guérin-Ahmadi-Naghshineh equivalent capacity of one on-off source, cells/s.
fn fluid_equivalent_capacity(traffic: &TrafficDescriptor, buffer: f64, clr: f64) -> f64 {
    let pcr = traffic.pcr.per_sec();
    let scr = traffic.scr.per_sec().min(pcr);
    if pcr <= 0.0 {
        return 0.0;
    }
    let rho = scr / pcr;
    let eps = if clr > 0.0 && clr < 1.0 {
        clr
    } else {
        DEFAULT_CLR
    };
    let burst = f64::from(traffic.mbs.max(1)) / pcr;
    let y = (1.0 / eps).ln() * burst * (1.0 - rho) * pcr;
    if y <= 0.0 {
        // rho = 1: the source is constant at its peak.
        return pcr;
    }
    let c = pcr * (y - buffer + ((y - buffer).powi(2) + 4.0 * buffer * rho * y).sqrt()) / (2.0 * y);
    c.clamp(scr, pcr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use atmlab_core::units::CellRate;

    fn vbr(class: ServiceClass, pcr: f64, scr: f64, mbs: u32) -> TrafficDescriptor {
        TrafficDescriptor {
            class,
            pcr: CellRate(pcr),
            scr: CellRate(scr),
            mbs,
            cdvt_ps: 0,
        }
    }

    #[test]
    fn cbr_is_peak_and_ubr_is_nothing() {
        let t = TrafficDescriptor::cbr(CellRate(1000.0));
        assert_eq!(effective_bandwidth(&t, 0, 1000, DEFAULT_CLR), 1000.0);
        let u = vbr(ServiceClass::Ubr, 1000.0, 1000.0, 1);
        assert_eq!(effective_bandwidth(&u, 0, 1000, DEFAULT_CLR), 0.0);
    }

    #[test]
    fn vbr_lies_between_mean_and_peak_and_falls_with_buffer() {
        let t = vbr(ServiceClass::NrtVbr, 10_000.0, 2_000.0, 100);
        let small = effective_bandwidth(&t, 0, 10, DEFAULT_CLR);
        let large = effective_bandwidth(&t, 0, 100_000, DEFAULT_CLR);
        assert!(small <= 10_000.0 && small > large && large >= 2_000.0);
        // No buffer at all: the peak.
        let rt = vbr(ServiceClass::RtVbr, 10_000.0, 2_000.0, 100);
        assert_eq!(effective_bandwidth(&rt, 0, 100_000, DEFAULT_CLR), 10_000.0);
        // A looser loss target costs less.
        let loose = effective_bandwidth(&t, 0, 1_000, 1e-2);
        let tight = effective_bandwidth(&t, 0, 1_000, 1e-9);
        assert!(loose < tight);
    }
}
