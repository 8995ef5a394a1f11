//! The ATM-FDDI gateway of paper 004 (Buddhikot, Kapoor, Parulkar, *Simulation of an
//! ATM-FDDI Gateway*, WUCS-92-36, 1992), one module per block of its Figs. 2, 4 and 9-12.
//!
//! | module | block | paper |
//! | --- | --- | --- |
//! | [`sar`] | the cell: 8 octets of overhead, 45 of data | §2 Fig. 3, §6.1, Table 1 |
//! | [`spp`] | SAR Protocol Processor: reassembly with the five state tables; fragmentation | §2, §5 Fig. 10 |
//! | [`mpp`] | MCHIP Protocol Processor with the NPE handshake (rate R), transmit buffer; reverse path with the receive buffer | §2, §5 Fig. 11, §6.3, §6.4 |
//! | [`fddi`] | the FDDI ring's timed-token MAC (TTRT, TRT, synchronous and asynchronous traffic, priorities) | §5 Fig. 12, Table 2 |
//! | [`model`] | the model kind `gateway`: ATM network (bursty sources, FIFO at the link rate), gateway, ring; the paper's metrics | §3, §5 Figs. 6-9, §6 |
//!
//! The cores are sans-IO (inputs `handle_*(now, ..)`, outputs `poll_*`), so the tests
//! drive them with crafted cell sequences, the paper's "functional verification"
//! experiments (§6). How the paper was read where it is silent or garbled is in each
//! module's doc and in `docs/reproductions/gateway.md`.

pub mod fddi;
pub mod model;
pub mod mpp;
pub mod sar;
pub mod spp;

pub use model::{GatewayConfig, GatewayKind};
