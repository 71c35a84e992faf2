//! The order in which an issuer's URLs are tried. A URL that took a request and gave no answer in
//! time (a hung CA, a black-holed route) moves behind the others for this issuer until it answers
//! again, so one stuck server does not cost every request a full timeout.

use std::sync::atomic::{AtomicBool, Ordering};

/// Per-client memory of which URLs went quiet, by position in the issuer's `url` list.
#[derive(Debug)]
pub struct Failover {
    quiet: Vec<AtomicBool>,
}

impl Failover {
    pub fn new(urls: usize) -> Self {
        Self {
            quiet: (0..urls).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Positions to try, in order: answering URLs as configured, then the quiet ones.
    pub fn order(&self) -> Vec<usize> {
        let quiet: Vec<bool> = self.quiet.iter().map(|q| q.load(Ordering::Relaxed)).collect();
        order(&quiet)
    }

    /// The URL at `position` took a request and did not answer in time.
    pub fn went_quiet(&self, position: usize) {
        self.quiet[position].store(true, Ordering::Relaxed);
    }

    /// The URL at `position` answered (a result or a CFSSL refusal): back to its place.
    pub fn answered(&self, position: usize) {
        self.quiet[position].store(false, Ordering::Relaxed);
    }
}

/// Pure: the configured order with the quiet URLs moved to the back, each group keeping its order.
pub fn order(quiet: &[bool]) -> Vec<usize> {
    let (answering, silent): (Vec<usize>, Vec<usize>) = (0..quiet.len()).partition(|&i| !quiet[i]);
    answering.into_iter().chain(silent).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_table() {
        let cases: [(&[bool], &[usize]); 6] = [
            (&[false], &[0]),
            (&[true], &[0]),
            (&[false, false, false], &[0, 1, 2]),
            (&[true, false, false], &[1, 2, 0]),
            (&[false, true, false], &[0, 2, 1]),
            (&[true, true, false], &[2, 0, 1]),
        ];
        for (quiet, want) in cases {
            assert_eq!(order(quiet), want, "{quiet:?}");
        }
    }

    #[test]
    fn a_quiet_url_returns_to_its_place_when_it_answers() {
        let failover = Failover::new(3);
        failover.went_quiet(0);
        assert_eq!(failover.order(), [1, 2, 0]);
        failover.went_quiet(1);
        assert_eq!(failover.order(), [2, 0, 1]);
        failover.answered(0);
        assert_eq!(failover.order(), [0, 2, 1]);
    }
}
