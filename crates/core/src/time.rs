//! Time for cores and shells: integer picoseconds (DESIGN.md §2).
//!
//! One cell slot of a 155.52 Mb/s link is 2726.3 ns; a 622 Mb/s slot is 681.6 ns.
//! Nanoseconds would round these by up to 0.1 %, which accumulates over millions of
//! slots; picoseconds in a `u64` are exact to 10^-12 s and still span 213 days, longer
//! than any run. Integers (not `f64`) keep equal timestamps equal, which the simulator's
//! deterministic ordering depends on.

use core::fmt;
use core::ops::{Add, AddAssign, Sub, SubAssign};

const PS_PER_NS: u64 = 1_000;
const PS_PER_US: u64 = 1_000_000;
const PS_PER_MS: u64 = 1_000_000_000;
const PS_PER_S: u64 = 1_000_000_000_000;

/// A point in time, in picoseconds since an arbitrary epoch chosen by the shell.
///
/// The simulator passes its virtual time; a live shell maps its monotonic clock onto it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

/// A span of time in picoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);
    /// The last representable instant; used as "never".
    pub const MAX: Instant = Instant(u64::MAX);

    /// The instant `ps` picoseconds after the epoch.
    pub const fn from_picos(ps: u64) -> Self {
        Instant(ps)
    }
    /// Picoseconds since the epoch.
    pub const fn as_picos(self) -> u64 {
        self.0
    }
    /// Time elapsed since `earlier`, or zero if `earlier` is later (never negative).
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
    /// `self + d`, or `None` on overflow.
    pub const fn checked_add(self, d: Duration) -> Option<Instant> {
        match self.0.checked_add(d.0) {
            Some(v) => Some(Instant(v)),
            None => None,
        }
    }
    /// `self + d`, clamped to [`Instant::MAX`].
    pub const fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}

impl Duration {
    /// No time.
    pub const ZERO: Duration = Duration(0);
    /// The longest span.
    pub const MAX: Duration = Duration(u64::MAX);

    /// `ps` picoseconds.
    pub const fn from_picos(ps: u64) -> Self {
        Duration(ps)
    }
    /// `ns` nanoseconds (saturating).
    pub const fn from_nanos(ns: u64) -> Self {
        Duration(ns.saturating_mul(PS_PER_NS))
    }
    /// `us` microseconds (saturating).
    pub const fn from_micros(us: u64) -> Self {
        Duration(us.saturating_mul(PS_PER_US))
    }
    /// `ms` milliseconds (saturating).
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms.saturating_mul(PS_PER_MS))
    }
    /// `s` seconds (saturating).
    pub const fn from_secs(s: u64) -> Self {
        Duration(s.saturating_mul(PS_PER_S))
    }
    /// Seconds as a float, rounded to the nearest picosecond (saturating, negative → 0).
    pub fn from_secs_f64(s: f64) -> Self {
        let ps = s * PS_PER_S as f64;
        // The common case first, in one test (false for NaN): rounded through i64, the
        // same value as the general path below.
        if ps > 0.0 && ps < FAST_LIMIT {
            return Duration((ps + 0.5) as i64 as u64);
        }
        if ps.is_nan() || ps <= 0.0 {
            Duration(0)
        } else if ps >= u64::MAX as f64 {
            Duration(u64::MAX)
        } else {
            // Round half up by adding 0.5 and truncating: for non-negative values this is
            // `round()`, without the libm call (it sits on every sampled delay).
            let r = ps + 0.5;
            // Below 2^63 through i64: one conversion instruction instead of the unsigned
            // sequence, and the same truncated value.
            if r < I64_LIMIT {
                Duration(r as i64 as u64)
            } else {
                Duration(r as u64)
            }
        }
    }
    /// The span in picoseconds.
    pub const fn as_picos(self) -> u64 {
        self.0
    }
    /// The span in nanoseconds, truncated.
    pub const fn as_nanos(self) -> u64 {
        self.0 / PS_PER_NS
    }
    /// The span in seconds.
    pub fn as_secs_f64(self) -> f64 {
        picos_to_f64(self.0) / PS_PER_S as f64
    }
    /// `self * n`, clamped.
    pub const fn saturating_mul(self, n: u64) -> Duration {
        Duration(self.0.saturating_mul(n))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Panics on overflow in debug builds, like integer addition; use
    /// [`Instant::checked_add`] where the sum may exceed 213 days.
    fn add(self, d: Duration) -> Instant {
        Instant(self.0 + d.0)
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        self.0 += d.0;
    }
}
impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        Duration(self.0 - rhs.0)
    }
}
impl Add for Duration {
    type Output = Duration;
    fn add(self, rhs: Duration) -> Duration {
        Duration(self.0 + rhs.0)
    }
}
impl AddAssign for Duration {
    fn add_assign(&mut self, rhs: Duration) {
        self.0 += rhs.0;
    }
}
impl Sub for Duration {
    type Output = Duration;
    fn sub(self, rhs: Duration) -> Duration {
        Duration(self.0 - rhs.0)
    }
}
impl SubAssign for Duration {
    fn sub_assign(&mut self, rhs: Duration) {
        self.0 -= rhs.0;
    }
}

/// Writes `ps` picoseconds in the largest unit that keeps the figure readable.
fn fmt_picos(ps: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let (unit, div) = if ps >= PS_PER_S {
        ("s", PS_PER_S)
    } else if ps >= PS_PER_MS {
        ("ms", PS_PER_MS)
    } else if ps >= PS_PER_US {
        ("us", PS_PER_US)
    } else if ps >= PS_PER_NS {
        ("ns", PS_PER_NS)
    } else {
        return write!(f, "{ps} ps");
    };
    let whole = ps / div;
    let frac = ps % div;
    if frac == 0 {
        write!(f, "{whole} {unit}")
    } else {
        // Up to 12 fractional digits, trailing zeros trimmed: exact, never rounded.
        let width = div.ilog10() as usize;
        let digits = format!("{frac:0width$}");
        write!(f, "{whole}.{} {unit}", digits.trim_end_matches('0'))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_picos(self.0, f)
    }
}
impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("t=")?;
        fmt_picos(self.0, f)
    }
}

/// Below this (2^62), `ps + 0.5` stays below 2^63 and converts through `i64`.
const FAST_LIMIT: f64 = 4_611_686_018_427_387_904.0;

/// 2^63 as an `f64`: the values below it convert to and from `i64` exactly like `u64`.
const I64_LIMIT: f64 = 9_223_372_036_854_775_808.0;

/// `ps as f64`, through `i64` when it fits: x86-64 converts a signed integer in one
/// instruction and an unsigned one in six; both round to the nearest `f64`, so the value is
/// the same.
#[inline]
fn picos_to_f64(ps: u64) -> f64 {
    if ps <= i64::MAX as u64 {
        ps as i64 as f64
    } else {
        ps as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_agree() {
        assert_eq!(Duration::from_secs(1), Duration::from_millis(1000));
        assert_eq!(Duration::from_millis(1), Duration::from_micros(1000));
        assert_eq!(Duration::from_micros(1), Duration::from_nanos(1000));
        assert_eq!(Duration::from_nanos(1), Duration::from_picos(1000));
        assert_eq!(Duration::from_secs_f64(2.5e-6), Duration::from_nanos(2500));
        assert_eq!(Duration::from_secs_f64(-1.0), Duration::ZERO);
    }

    #[test]
    fn display_is_exact() {
        assert_eq!(Duration::from_nanos(2726).to_string(), "2.726 us");
        assert_eq!(Duration::from_picos(2_726_337).to_string(), "2.726337 us");
        assert_eq!(Duration::from_secs(3).to_string(), "3 s");
        assert_eq!(Duration::from_picos(7).to_string(), "7 ps");
        assert_eq!(Instant::from_picos(1_500_000).to_string(), "t=1.5 us");
    }

    #[test]
    fn arithmetic() {
        let t = Instant::ZERO + Duration::from_micros(5);
        assert_eq!(t - Instant::ZERO, Duration::from_micros(5));
        assert_eq!(Instant::ZERO.saturating_duration_since(t), Duration::ZERO);
        assert_eq!(Instant::MAX.checked_add(Duration::from_picos(1)), None);
    }
}
