//! Latency statistics: a thin wrapper over `hdrhistogram`, in microseconds,
//! with three significant digits from 1 µs to one hour (longer waits count
//! as one hour). Quantiles report the highest value equivalent to their
//! bucket, so they never read low.

/// The longest latency told apart, µs.
const HIGHEST_US: u64 = 3_600_000_000;

/// A histogram of latencies in microseconds; fixed size once made, so
/// recording never allocates.
#[derive(Debug, Clone)]
pub struct Histogram(hdrhistogram::Histogram<u64>);

impl Default for Histogram {
    fn default() -> Histogram {
        // The bounds are constants that hdrhistogram accepts.
        Histogram(
            hdrhistogram::Histogram::new_with_bounds(1, HIGHEST_US, 3)
                .expect("valid histogram bounds"),
        )
    }
}

impl Histogram {
    /// Records `n` occurrences of `value_us`.
    pub fn record_n(&mut self, value_us: u64, n: u64) {
        self.0.saturating_record_n(value_us.min(HIGHEST_US), n);
    }

    /// Adds another histogram's values.
    pub fn merge(&mut self, other: &Histogram) {
        // Both have the same bounds, so adding cannot fail.
        let _ = self.0.add(&other.0);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The mean, µs.
    pub fn mean(&self) -> f64 {
        self.0.mean()
    }

    /// The largest value, µs.
    pub fn max(&self) -> u64 {
        self.0.max()
    }

    /// The value at quantile `q` (0..=1), µs.
    pub fn quantile(&self, q: f64) -> u64 {
        self.0.value_at_quantile(q)
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
        assert!(h.max() >= 100_000 && h.max() <= 100_100);
        for (q, exact) in [(0.5, 50_000.0), (0.99, 99_000.0), (0.999, 99_900.0)] {
            let got = h.quantile(q) as f64;
            assert!(
                got >= exact && (got - exact) / exact <= 1e-3,
                "q{q}: {got} vs {exact}"
            );
        }
        assert!((h.mean() - 50_000.5).abs() / 50_000.5 < 1e-3);
        let mut other = Histogram::default();
        other.record_n(u64::MAX, 3);
        h.merge(&other);
        assert_eq!(h.count(), 100_003);
        assert!(h.max() >= HIGHEST_US);
    }
}
