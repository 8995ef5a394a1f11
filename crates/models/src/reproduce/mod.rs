//! Reproductions of the simulation papers' tables and figures (`atmlab reproduce PAPER`):
//! each module runs its paper's scenarios through the runner and writes a report
//! directory (markdown, PNG/SVG plots, CSV) with the paper's findings beside ours.

pub mod gateway;
