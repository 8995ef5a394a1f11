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
    /// Seconds as a float, rounded to the nearest picosecond, ties to even (saturating,
    /// negative and NaN → 0).
    #[inline]
    pub fn from_secs_f64(s: f64) -> Self {
        Self::from_picos_f64(s * PS_PER_S as f64)
    }

    /// Picoseconds as a float, rounded to the nearest picosecond, ties to even
    /// (saturating, negative and NaN → 0). A delay drawn as a float is best scaled
    /// straight to picoseconds (`draw * mean_ps`) and converted here: one multiplication
    /// fewer than `from_secs_f64(draw * mean_secs)` on the path of every sampled delay.
    #[inline]
    pub fn from_picos_f64(ps: f64) -> Self {
        // The common case (0 <= ps < 2^52 ps, about 75 minutes) in one integer comparison:
        // the bits of a non-negative float order as its value, and those of a negative
        // float, of NaN or of a larger value are all above 2^52's. Adding 2^52 then rounds
        // `ps` to an integer (to nearest, ties to even: the sum's unit in the last place is
        // one) and leaves that integer in the low bits of the sum, where subtracting
        // 2^52's bits reads it out. Four instructions where a float-to-integer conversion
        // with Rust's saturating semantics takes about a dozen; it sits on every sampled
        // delay.
        if ps.to_bits() < TWO_52.to_bits() {
            return Duration((ps + TWO_52).to_bits() - TWO_52.to_bits());
        }
        Self::from_picos_f64_slow(ps)
    }

    /// [`Duration::from_secs_f64`] for `ps` outside `[0, 2^52)`: already a whole number of
    /// picoseconds when it is finite and positive.
    #[cold]
    fn from_picos_f64_slow(ps: f64) -> Self {
        if ps.is_nan() || ps <= 0.0 {
            Duration(0)
        } else {
            // Saturates at u64::MAX (infinity included).
            Duration(ps as u64)
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
    /// The span in picoseconds as a float (exact below 2^53 ps, about 2.5 hours; rounded
    /// to the nearest above): the scale of [`Duration::from_picos_f64`].
    #[inline]
    pub fn as_picos_f64(self) -> f64 {
        picos_to_f64(self.0)
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
/// The shells' conversion from the OS's durations: exact (nanoseconds are whole
/// picoseconds), saturating at [`Duration::MAX`] (213 days).
impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Duration {
        Duration(u64::try_from(d.as_nanos()).map_or(u64::MAX, |ns| ns.saturating_mul(PS_PER_NS)))
    }
}

/// The shells' conversion to the OS's durations (for timers and sleeps): truncated to
/// whole nanoseconds, the OS's resolution.
impl From<Duration> for std::time::Duration {
    fn from(d: Duration) -> std::time::Duration {
        std::time::Duration::from_nanos(d.as_nanos())
    }
}

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

/// 2^52: from it up, every `f64` is a whole number.
const TWO_52: f64 = 4_503_599_627_370_496.0;

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
    fn from_secs_f64_rounds_to_nearest_ties_to_even() {
        let d = |s: f64| Duration::from_secs_f64(s).as_picos();
        assert_eq!(d(0.0), 0);
        assert_eq!(d(-0.0), 0);
        assert_eq!(d(f64::NAN), 0);
        assert_eq!(d(f64::NEG_INFINITY), 0);
        assert_eq!(d(f64::INFINITY), u64::MAX);
        assert_eq!(d(1e300), u64::MAX);
        assert_eq!(d(0.4e-12), 0);
        assert_eq!(d(0.6e-12), 1);
        assert_eq!(d(0.5e-12), 0, "a tie goes to the even neighbour");
        assert_eq!(d(1.5e-12), 2);
        assert_eq!(d(2.5e-12), 2);
        // Either side of 2^52 ps, the fast path's limit, and a value that rounds up to it.
        let two_52 = 1u64 << 52;
        assert_eq!(d(two_52 as f64 * 1e-12), two_52);
        assert_eq!(d((two_52 - 1) as f64 * 1e-12), two_52 - 1);
        assert_eq!(d(((two_52 as f64) - 0.25) * 1e-12), two_52);
        assert_eq!(d(3.0e9), u64::MAX, "3e21 ps saturates");
        // Against the plain rounding of the float, over many magnitudes.
        let mut x: f64 = 1.234_567_890_123e-13;
        while x < 1e6 {
            let ps = x * 1e12;
            let want = ps.round_ties_even() as u64;
            assert_eq!(d(x), want, "{x} s");
            assert_eq!(Duration::from_picos_f64(ps).as_picos(), want, "{ps} ps");
            x *= 1.37;
        }
        // Picoseconds in: the same rounding, saturation and clamping.
        let p = |ps: f64| Duration::from_picos_f64(ps).as_picos();
        assert_eq!(p(2.5), 2, "ties to even");
        assert_eq!(p(3.5), 4, "ties to even");
        assert_eq!(p(-1.0), 0);
        assert_eq!(p(f64::NAN), 0);
        assert_eq!(p(f64::INFINITY), u64::MAX);
        assert_eq!(p(4_503_599_627_370_497.0), 4_503_599_627_370_497);
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
    fn std_durations_convert_both_ways() {
        let d = std::time::Duration::from_nanos(2_726);
        assert_eq!(Duration::from(d), Duration::from_picos(2_726_000));
        // Back: truncated to whole nanoseconds.
        let back: std::time::Duration = Duration::from_picos(2_726_337).into();
        assert_eq!(back, std::time::Duration::from_nanos(2_726));
        assert_eq!(Duration::from(std::time::Duration::MAX), Duration::MAX);
    }

    #[test]
    fn arithmetic() {
        let t = Instant::ZERO + Duration::from_micros(5);
        assert_eq!(t - Instant::ZERO, Duration::from_micros(5));
        assert_eq!(Instant::ZERO.saturating_duration_since(t), Duration::ZERO);
        assert_eq!(Instant::MAX.checked_add(Duration::from_picos(1)), None);
    }
}
