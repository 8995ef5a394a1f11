//! [`Estimate`]: a mean with its Student-t 95 % confidence half-width.

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

use super::tally::Tally;

/// A point estimate and the half-width of its two-sided 95 % confidence interval,
/// `mean ± ci95`, from `n` independent and identically distributed samples — the means of
/// independent replications, or the batch means of [`BatchMeans`](super::BatchMeans).
///
/// The interval is Student's t (Law and Kelton's fixed-sample-size procedure):
/// `ci95 = t(0.975; n − 1) · s / √n`, with `s` the sample standard deviation. It is exact
/// for normal samples and asymptotically right for others by the central limit theorem;
/// replication means of a long run are close to normal.
///
/// With `n == 0`, `mean` and `ci95` are NaN; with `n == 1`, `mean` is the sample and `ci95`
/// is NaN — one sample says nothing about the spread, and a 0 would claim a perfect
/// estimate. serde_json writes NaN as `null`, so reports show "no interval".
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// The sample mean.
    pub mean: f64,
    /// The half-width of the two-sided 95 % Student-t confidence interval; NaN for `n < 2`.
    pub ci95: f64,
    /// The number of samples (replications or batches) behind the estimate.
    pub n: u64,
}

impl Estimate {
    /// The estimate from `samples`, one per replication (or batch).
    pub fn from_samples(samples: &[f64]) -> Self {
        let mut t = Tally::new();
        for &x in samples {
            t.record(x);
        }
        Estimate::from_tally(&t)
    }

    /// The estimate from a tally of the samples (mean, variance and count), which lets
    /// replications be folded in one by one without keeping them.
    pub fn from_tally(tally: &Tally) -> Self {
        let n = tally.count();
        let ci95 = if n < 2 {
            f64::NAN
        } else {
            let t = student_t_quantile(0.975, (n - 1) as f64);
            t * tally.std_dev() / (n as f64).sqrt()
        };
        Estimate {
            mean: tally.mean(),
            ci95,
            n,
        }
    }

    /// The lower end of the interval, `mean − ci95`.
    pub fn lower(&self) -> f64 {
        self.mean - self.ci95
    }

    /// The upper end of the interval, `mean + ci95`.
    pub fn upper(&self) -> f64 {
        self.mean + self.ci95
    }

    /// Whether `value` lies in the closed interval; `false` when the interval is NaN.
    pub fn contains(&self, value: f64) -> bool {
        self.lower() <= value && value <= self.upper()
    }

    /// The relative half-width `ci95 / |mean|`, the usual stopping rule for sequential
    /// replications (e.g. stop below 0.05); infinite for a zero mean, NaN for `n < 2`.
    pub fn relative_half_width(&self) -> f64 {
        self.ci95 / self.mean.abs()
    }
}

/// The `p`-quantile of Student's t distribution with `df` degrees of freedom, e.g.
/// `student_t_quantile(0.975, 4) = 2.776…`. `df` may be fractional, and infinite (the
/// standard normal quantile). NaN when `p` is outside `[0, 1]` or `df` is not positive;
/// ±∞ at `p = 0` and `p = 1`.
///
/// Below 1000 degrees of freedom it is computed by `statrs` (through the inverse of the
/// regularized incomplete beta function), accurate to better than 1e-10 relative in the
/// range a confidence interval uses. From 1000 on, that inversion degrades (an error of
/// 1e-4 at 10^6 degrees of freedom, worse beyond), and the Cornish–Fisher expansion of t
/// in powers of 1/ν about the normal quantile (Abramowitz and Stegun 26.7.5, four terms)
/// takes over: its truncation error there is below 1e-12.
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    if !(0.0..=1.0).contains(&p) || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    if df >= LARGE_DF {
        let Ok(normal) = Normal::new(0.0, 1.0) else {
            return f64::NAN;
        };
        return t_expansion(normal.inverse_cdf(p), df);
    }
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.inverse_cdf(p),
        Err(_) => f64::NAN,
    }
}

/// Degrees of freedom from which [`student_t_quantile`] uses the expansion: statrs and
/// the expansion agree to about 1e-13 between 200 and 10^4 degrees of freedom.
const LARGE_DF: f64 = 1000.0;

/// The t quantile with `nu` degrees of freedom from the normal quantile `z`, by the
/// asymptotic expansion of Abramowitz and Stegun 26.7.5 (infinite `nu` gives `z`).
fn t_expansion(z: f64, nu: f64) -> f64 {
    let z2 = z * z;
    let g1 = (z2 + 1.0) * z / 4.0;
    let g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0;
    let g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0;
    let g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0;
    z + (g1 + (g2 + (g3 + g4 / nu) / nu) / nu) / nu
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal as NormalDist};
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn t_table_values() {
        // Two-sided 95 % critical values from any t table (3 decimals).
        let table = [
            (1.0, 12.706),
            (2.0, 4.303),
            (4.0, 2.776),
            (7.0, 2.365),
            (10.0, 2.228),
            (19.0, 2.093),
            (30.0, 2.042),
            (120.0, 1.980),
        ];
        for (df, t) in table {
            let got = student_t_quantile(0.975, df);
            assert!((got - t).abs() < 5e-4, "df={df}: {got} vs {t}");
        }
        // More digits where they are well known.
        assert!((student_t_quantile(0.975, 1.0) - 12.706_204_736).abs() < 1e-6);
        assert!((student_t_quantile(0.975, 4.0) - 2.776_445_105).abs() < 1e-7);
    }

    #[test]
    fn t_tends_to_normal() {
        let z = 1.959_963_984_540_054;
        assert!((student_t_quantile(0.975, f64::INFINITY) - z).abs() < 1e-8);
        // t(0.975; ν) = z + (z³ + z)/(4ν) + O(1/ν²), the second-order term being 2.8/ν².
        for nu in [1e4, 1e6, 1e9] {
            let first_order = z + (z * z * z + z) / (4.0 * nu);
            let got = student_t_quantile(0.975, nu);
            assert!(
                (got - first_order).abs() < 3.0 / (nu * nu) + 1e-14,
                "nu={nu}: {got}"
            );
        }
        assert!((student_t_quantile(0.975, 1e4) - 1.960_201_239_891).abs() < 1e-11);
        assert!((student_t_quantile(0.975, 1000.0) - 1.962_339_080_826).abs() < 1e-11);
        // No seam where the method changes.
        let below = student_t_quantile(0.975, 999.9999);
        assert!((below - student_t_quantile(0.975, 1000.0)).abs() < 1e-9);
        // Monotone decreasing in df towards z.
        let mut last = f64::INFINITY;
        for df in [1.0, 2.0, 5.0, 50.0, 500.0, 5e4, 5e6, 5e8] {
            let t = student_t_quantile(0.975, df);
            assert!(t < last && t > z - 1e-9, "df={df}: {t}");
            last = t;
        }
    }

    #[test]
    fn t_edge_cases() {
        assert!(student_t_quantile(0.975, 0.0).is_nan());
        assert!(student_t_quantile(0.975, -1.0).is_nan());
        assert!(student_t_quantile(0.975, f64::NAN).is_nan());
        assert!(student_t_quantile(1.5, 3.0).is_nan());
        assert!(student_t_quantile(f64::NAN, 3.0).is_nan());
        assert_eq!(student_t_quantile(1.0, 3.0), f64::INFINITY);
        assert_eq!(student_t_quantile(0.0, 3.0), f64::NEG_INFINITY);
        assert!(student_t_quantile(0.5, 3.0).abs() < 1e-12);
        let (lo, hi) = (
            student_t_quantile(0.025, 7.0),
            student_t_quantile(0.975, 7.0),
        );
        assert!((lo + hi).abs() < 1e-9);
    }

    #[test]
    fn known_samples() {
        let e = Estimate::from_samples(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(e.n, 5);
        assert_eq!(e.mean, 3.0);
        // s = √2.5 = 1.5811; t(0.975, 4) = 2.7764; 2.7764 · 1.5811 / √5 = 1.9632.
        assert!((e.ci95 - 1.963_243).abs() < 1e-5, "{}", e.ci95);
        assert!((e.lower() - 1.036_757).abs() < 1e-5);
        assert!((e.upper() - 4.963_243).abs() < 1e-5);
        assert!(e.contains(3.0) && e.contains(1.5) && !e.contains(5.0));
        assert!((e.relative_half_width() - 1.963_243 / 3.0).abs() < 1e-5);
    }

    #[test]
    fn too_few_samples() {
        let e = Estimate::from_samples(&[]);
        assert_eq!(e.n, 0);
        assert!(e.mean.is_nan() && e.ci95.is_nan());
        assert!(!e.contains(0.0));
        let e = Estimate::from_samples(&[42.0]);
        assert_eq!(e.n, 1);
        assert_eq!(e.mean, 42.0);
        assert!(e.ci95.is_nan());
        assert!(!e.contains(42.0));
    }

    #[test]
    fn identical_samples_zero_width() {
        let e = Estimate::from_samples(&[0.25; 10]);
        assert_eq!(e.mean, 0.25);
        assert_eq!(e.ci95, 0.0);
    }

    #[test]
    fn from_tally_matches_from_samples() {
        let xs = [0.3, 1.7, 2.2, 0.9, 1.1, 1.4];
        let mut t = Tally::new();
        xs.iter().for_each(|&x| t.record(x));
        assert_eq!(Estimate::from_tally(&t), Estimate::from_samples(&xs));
    }

    #[test]
    fn coverage_is_about_95_percent() {
        // 400 experiments of 8 normal replications each: the interval should cover the
        // true mean in about 95 % of them (binomial s.d. 1.1 %, so 90–99 % is a wide band).
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(20_240_601);
        let normal = NormalDist::new(10.0, 3.0).expect("valid normal");
        let mut covered = 0;
        let mut samples = [0.0; 8];
        for _ in 0..400 {
            for s in &mut samples {
                *s = normal.sample(&mut rng);
            }
            if Estimate::from_samples(&samples).contains(10.0) {
                covered += 1;
            }
        }
        let coverage = f64::from(covered) / 400.0;
        assert!((0.90..=0.99).contains(&coverage), "coverage {coverage}");
    }
}
