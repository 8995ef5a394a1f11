//! Property tests of atmlab-wire's public API: round trips, error detection, and decoders
//! fed arbitrary bytes. One test binary for the crate keeps link time down.

mod aal5_props;
mod cell_props;
pub mod harness;
mod robustness;

/// The header format a generated `nni` flag stands for.
fn format_of(nni: bool) -> atmlab_wire::HeaderFormat {
    if nni {
        atmlab_wire::HeaderFormat::Nni
    } else {
        atmlab_wire::HeaderFormat::Uni
    }
}
