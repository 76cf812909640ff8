//! Latency statistics: a thin wrapper over `hdrhistogram`, in microseconds,
//! with three significant digits from 1 µs to one hour. Quantiles report
//! the highest value equivalent to their bucket, so they never read low,
//! except for waits over an hour, which the quantiles count as one hour.
//! The mean and the maximum are kept exactly beside the histogram.

/// The longest latency told apart, µs.
const HIGHEST_US: u64 = 3_600_000_000;

/// A histogram of latencies in microseconds; fixed size once made, so
/// recording never allocates.
#[derive(Debug, Clone)]
pub struct Histogram {
    buckets: hdrhistogram::Histogram<u64>,
    sum_us: f64,
    max_us: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        // The bounds are constants that hdrhistogram accepts.
        let buckets = hdrhistogram::Histogram::new_with_bounds(1, HIGHEST_US, 3)
            .expect("valid histogram bounds");
        Histogram {
            buckets,
            sum_us: 0.0,
            max_us: 0,
        }
    }
}

impl Histogram {
    /// Records `n` occurrences of `value_us`.
    pub fn record_n(&mut self, value_us: u64, n: u64) {
        self.buckets
            .saturating_record_n(value_us.min(HIGHEST_US), n);
        self.sum_us += value_us as f64 * n as f64;
        self.max_us = self.max_us.max(value_us);
    }

    /// Adds another histogram's values.
    pub fn merge(&mut self, other: &Histogram) {
        // Both have the same bounds, so adding cannot fail.
        let _ = self.buckets.add(&other.buckets);
        self.sum_us += other.sum_us;
        self.max_us = self.max_us.max(other.max_us);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.buckets.len()
    }

    /// The mean, µs.
    pub fn mean(&self) -> f64 {
        match self.count() {
            0 => 0.0,
            n => self.sum_us / n as f64,
        }
    }

    /// The largest value, µs.
    pub fn max(&self) -> u64 {
        self.max_us
    }

    /// The value at quantile `q` (0..=1), µs.
    pub fn quantile(&self, q: f64) -> u64 {
        self.buckets.value_at_quantile(q).min(self.max_us.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_a_thousandth_and_never_low() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record_n(v, 1);
        }
        assert_eq!(h.count(), 100_000);
        assert_eq!(h.max(), 100_000, "the maximum is exact");
        for (q, exact) in [(0.5, 50_000.0), (0.99, 99_000.0), (0.999, 99_900.0)] {
            let got = h.quantile(q) as f64;
            assert!(
                got >= exact && (got - exact) / exact <= 1e-3,
                "q{q}: {got} vs {exact}"
            );
        }
        assert!((h.mean() - 50_000.5).abs() < 1e-6, "the mean is exact");
        let mut other = Histogram::default();
        let two_hours = 2 * HIGHEST_US;
        other.record_n(two_hours, 3);
        h.merge(&other);
        assert_eq!(h.count(), 100_003);
        assert_eq!(
            h.max(),
            two_hours,
            "a wait longer than the buckets keeps its length"
        );
        let exact = (5_000_050_000.0 + 3.0 * two_hours as f64) / 100_003.0;
        assert!((h.mean() - exact).abs() < 1e-3, "{} vs {exact}", h.mean());
        let mut one = Histogram::default();
        one.record_n(123_456, 1);
        assert_eq!(
            (one.max(), one.quantile(1.0)),
            (123_456, 123_456),
            "never above what was seen"
        );
    }
}
