//! [`TimeWeighted`]: the time average of a piecewise-constant quantity.

use atmlab_core::time::Instant;

/// The time average of a quantity that changes only at events and stays constant in
/// between (queue length, buffer occupancy, busy servers, open connections).
///
/// It accumulates the integral `∫ x(t) dt` at each [`set`](TimeWeighted::set): the old
/// value times the time it was held. [`mean`](TimeWeighted::mean) divides the integral up
/// to `now` by the time observed. Time spans are taken in exact integer picoseconds and
/// only then converted to `f64`, so equal instants give exactly zero-length holds.
///
/// Time never runs backwards in the simulator; should a caller pass an instant earlier
/// than the last update anyway, it is treated as the last update (a zero-length hold)
/// rather than a negative one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeWeighted {
    /// Start of the observed window (construction or last reset).
    start: Instant,
    /// Instant of the last change; the area is complete up to here.
    last: Instant,
    /// The value held since `last`.
    value: f64,
    /// `∫ x(t) dt` from `start` to `last`, in value·picoseconds.
    area: f64,
    min: f64,
    max: f64,
}

impl TimeWeighted {
    /// Starts observing at `start`, with the quantity at `initial`.
    pub fn new(start: Instant, initial: f64) -> Self {
        TimeWeighted {
            start,
            last: start,
            value: initial,
            area: 0.0,
            min: initial,
            max: initial,
        }
    }

    /// Closes the current hold at `now` (adds `value · (now − last)` to the area).
    #[inline]
    fn advance(&mut self, now: Instant) {
        if now > self.last {
            let held = super::picos_f64(now.saturating_duration_since(self.last).as_picos());
            // No test for a zero value (it was 5 instructions and a data-dependent branch
            // on every change of a queue length): `held` is finite and positive here, so a
            // zero value adds exactly +0.0, which leaves the area's bits unchanged (the area
            // starts at +0.0 and a sum is -0.0 only when both terms are), and an infinite or
            // NaN value poisons the area either way.
            self.area += self.value * held;
            self.last = now;
        }
    }

    /// The quantity changes to `value` at `now`. O(1), no allocation.
    #[inline]
    pub fn set(&mut self, now: Instant, value: f64) {
        self.advance(now);
        self.value = value;
        // As in `Tally::record`: comparisons, the same result as `f64::min`/`max` here.
        if value < self.min {
            self.min = value;
        }
        if value > self.max {
            self.max = value;
        }
    }

    /// The quantity changes by `delta` at `now` (e.g. `+1.0` on an arrival, `-1.0` on a
    /// departure).
    #[inline]
    pub fn add(&mut self, now: Instant, delta: f64) {
        let value = self.value + delta;
        self.set(now, value);
    }

    /// The value held now.
    pub fn current(&self) -> f64 {
        self.value
    }

    /// The time average from the start (or the last reset) to `now`.
    ///
    /// Over a window of zero length the average is the current value (its limit as the
    /// window shrinks), not NaN, since the quantity is well defined at every instant.
    pub fn mean(&self, now: Instant) -> f64 {
        let now = now.max(self.last);
        let total = now.saturating_duration_since(self.start).as_picos();
        if total == 0 {
            return self.value;
        }
        let tail = now.saturating_duration_since(self.last).as_picos() as f64;
        let area = if self.value != 0.0 {
            self.area + self.value * tail
        } else {
            self.area
        };
        area / total as f64
    }

    /// The integral `∫ x(t) dt` from the start (or the last reset) to `now`, in value ·
    /// seconds (e.g. cell·seconds for a queue length).
    pub fn integral_secs(&self, now: Instant) -> f64 {
        let now = now.max(self.last);
        let tail = now.saturating_duration_since(self.last).as_picos() as f64;
        let area = if self.value != 0.0 {
            self.area + self.value * tail
        } else {
            self.area
        };
        area * 1e-12
    }

    /// The largest value held since the start (or the last reset), the initial one
    /// included, even if held for no time.
    pub fn max(&self) -> f64 {
        self.max
    }

    /// The smallest value held since the start (or the last reset), the initial one
    /// included, even if held for no time.
    pub fn min(&self) -> f64 {
        self.min
    }

    /// The instant the observed window starts (construction or the last reset).
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Forgets the history before `now` but keeps the current value: the window restarts at
    /// `now`, and min and max restart at the current value. This is warm-up deletion for a
    /// time-persistent statistic.
    pub fn reset(&mut self, now: Instant) {
        let now = now.max(self.last);
        *self = TimeWeighted::new(now, self.value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atmlab_core::time::Duration;
    use proptest::prelude::*;

    fn at(us: u64) -> Instant {
        Instant::ZERO + Duration::from_micros(us)
    }

    #[test]
    fn known_answer() {
        // 0 for 2 us, 3 for 1 us, 1 for 1 us: area 4 over 4 us → 1.
        let mut tw = TimeWeighted::new(at(0), 0.0);
        tw.set(at(2), 3.0);
        tw.set(at(3), 1.0);
        assert_eq!(tw.mean(at(4)), 1.0);
        assert_eq!(tw.max(), 3.0);
        assert_eq!(tw.min(), 0.0);
        assert_eq!(tw.current(), 1.0);
        assert!((tw.integral_secs(at(4)) - 4e-6).abs() < 1e-18);
        // Holding 1 for another 4 us: area 8 over 8 us → 1.
        assert_eq!(tw.mean(at(8)), 1.0);
    }

    #[test]
    fn queue_increments() {
        let mut q = TimeWeighted::new(at(10), 0.0);
        q.add(at(10), 1.0); // arrival at start
        q.add(at(11), 1.0); // 1 for 1 us
        q.add(at(13), -1.0); // 2 for 2 us
        q.add(at(14), -1.0); // 1 for 1 us
        // area = 1 + 4 + 1 = 6 over 4 us, then 0 for 2 us → 6/6.
        assert_eq!(q.mean(at(14)), 1.5);
        assert_eq!(q.mean(at(16)), 1.0);
        assert_eq!(q.max(), 2.0);
    }

    #[test]
    fn zero_window_is_current_value() {
        let tw = TimeWeighted::new(at(5), 7.0);
        assert_eq!(tw.mean(at(5)), 7.0);
    }

    #[test]
    fn reset_forgets_past_keeps_value() {
        let mut tw = TimeWeighted::new(at(0), 100.0);
        tw.set(at(10), 2.0);
        tw.reset(at(20));
        assert_eq!(tw.start(), at(20));
        assert_eq!(tw.current(), 2.0);
        assert_eq!(tw.max(), 2.0);
        tw.set(at(30), 4.0);
        // 2 for 10 us, 4 for 10 us.
        assert_eq!(tw.mean(at(40)), 3.0);
        assert_eq!(tw.max(), 4.0);
    }

    #[test]
    fn time_going_backwards_is_a_zero_hold() {
        let mut tw = TimeWeighted::new(at(0), 1.0);
        tw.set(at(10), 3.0);
        tw.set(at(5), 5.0); // earlier than the last update: treated as at(10)
        assert_eq!(tw.mean(at(20)), 3.0); // 1·10 + 5·10 over 20
        assert_eq!(tw.mean(at(1)), tw.mean(at(10)));
    }

    #[test]
    fn exact_at_picosecond_granularity() {
        // One cell slot at 155.52 Mb/s is 2_726_337 ps; occupancy 1 for one slot in three.
        let slot = Duration::from_picos(2_726_337);
        let t0 = Instant::from_picos(1);
        let mut tw = TimeWeighted::new(t0, 0.0);
        let mut t = t0;
        for _ in 0..1000 {
            tw.set(t, 1.0);
            t += slot;
            tw.set(t, 0.0);
            t += slot + slot;
        }
        assert!((tw.mean(t) - 1.0 / 3.0).abs() < 1e-12);
    }

    proptest! {
        #[test]
        fn matches_naive_integral(
            steps in proptest::collection::vec((0u64..1_000_000, -50.0f64..50.0), 0..100),
            tail in 0u64..1_000_000,
        ) {
            let t0 = Instant::from_picos(12_345);
            let mut tw = TimeWeighted::new(t0, 1.0);
            let mut t = t0;
            let mut value = 1.0;
            let mut area = 0.0;
            let mut max = 1.0f64;
            for &(dt, v) in &steps {
                area += value * dt as f64;
                t += Duration::from_picos(dt);
                tw.set(t, v);
                value = v;
                max = max.max(v);
            }
            area += value * tail as f64;
            let end = t + Duration::from_picos(tail);
            let total = (end - t0).as_picos() as f64;
            let expect = if total == 0.0 { value } else { area / total };
            let got = tw.mean(end);
            prop_assert!((got - expect).abs() <= 1e-9 * (1.0 + expect.abs()), "{got} vs {expect}");
            prop_assert_eq!(tw.max(), max);
        }
    }
}
