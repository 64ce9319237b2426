//! turnwal's test kit: what the tests, benches and fuzz targets drive the
//! engine with. Never a dependency of the engine itself.
//!
//! - [`crashlab`]: random op sequences against every store under simulated
//!   crashes and faults, judged by an oracle; the differential lab that runs
//!   every store in lockstep; the fuzz entry points.
//! - [`simdisk`]: a simulated, fault-injecting disk behind the engine's
//!   `Storage` trait, so every crash path runs deterministically.
//! - [`workload`]: the sessions benches and labs write — synthetic, and
//!   realistic (upstream's event shapes, mostly streamed deltas).

pub mod crashlab;
pub mod simdisk;
pub mod workload;
