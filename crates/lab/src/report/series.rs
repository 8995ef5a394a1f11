//! Plot series gathered point by point (DESIGN.md §4, Reports: the figures of the
//! reproductions and the demo): a measurement loop meets its points in row order, one
//! curve's points among another's, and [`SeriesSet::push`] files each under its label.

use atmlab_sim::plot::Series;

/// Series in the order their labels were first seen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesSet {
    series: Vec<Series>,
}

impl SeriesSet {
    /// No series yet.
    pub fn new() -> SeriesSet {
        SeriesSet::default()
    }

    /// Appends `point` (x, y, 95% half-width or NaN) to the series labelled `label`,
    /// starting that series after the others if it is new.
    pub fn push(&mut self, label: &str, point: (f64, f64, f64)) {
        match self.series.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push(point),
            None => self.series.push(Series {
                label: label.to_owned(),
                points: vec![point],
            }),
        }
    }

    /// Adds a whole series after the others (a reference curve, the paper's points).
    pub fn add(&mut self, label: &str, points: Vec<(f64, f64, f64)>) {
        self.series.push(Series {
            label: label.to_owned(),
            points,
        });
    }

    /// The series, in order.
    pub fn as_slice(&self) -> &[Series] {
        &self.series
    }

    /// The series' labels, in order.
    pub fn labels(&self) -> Vec<String> {
        self.series.iter().map(|s| s.label.clone()).collect()
    }

    /// The series, in order.
    pub fn into_vec(self) -> Vec<Series> {
        self.series
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_go_to_their_label_in_first_seen_order() {
        let mut s = SeriesSet::new();
        s.push("b", (1.0, 1.0, f64::NAN));
        s.push("a", (1.0, 2.0, f64::NAN));
        s.push("b", (2.0, 3.0, f64::NAN));
        s.add("ref", vec![(0.0, 0.0, 0.0)]);
        assert_eq!(s.labels(), ["b", "a", "ref"]);
        let v = s.into_vec();
        assert_eq!(v[0].points.len(), 2);
        assert_eq!(v[0].points[1].1, 3.0);
        assert_eq!(v[1].points.len(), 1);
    }
}
