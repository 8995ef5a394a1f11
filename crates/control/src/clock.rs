//! The live shells' clock: the one `LiveClock` of `atmlab-core` (feature `clock`).

pub use atmlab_core::clock::LiveClock;
